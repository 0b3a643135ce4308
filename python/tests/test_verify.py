import json
import os

import numpy as np
import pytest

import posenc
from conftest import F32, BF16, GPTJ
import numpy_rope


def _write_stored(case, out):
    case.write_outputs(out, {n: case.expected_values(n) for n in case.expected})


def test_stored_expected_values_pass_strict(tmp_path, binary):
    c = posenc.load_case(BF16)
    _write_stored(c, str(tmp_path))
    r = posenc.verify(c, str(tmp_path), profile="strict", posenc=binary)
    assert r.passed and r.returncode == 0 and r.profile == "strict"
    assert r.summary["checked"] == 1 and r.summary["passed"] == 1
    assert [x.id for x in r.cases] == [BF16]
    cr = r.case(BF16)
    assert cr.status == "PASS" and cr.passed
    names = [t.name for t in cr.tensors]
    assert names == ["inv_freq", "cos", "sin", "q_rot", "k_rot", "scores"]
    for t in cr.tensors:
        assert t.status == "PASS" and t.ratio <= 1.0 and "n_over" in t and t["n_over"] == 0


def test_fp32_pipeline_result_structure_and_numpy_ratios(tmp_path, binary):
    c = posenc.load_case(F32)
    outs = numpy_rope.outputs_for(c)
    c.write_outputs(str(tmp_path), outs)
    strict = posenc.verify(F32, str(tmp_path), profile="strict", posenc=binary)
    fp32 = posenc.verify([c], str(tmp_path), profile="fp32", posenc=binary)
    assert not strict.passed and strict.returncode == 1 and fp32.passed
    q = strict.case(F32).tensor("q_rot")
    assert q.status == "FAIL" and q.first_fail_position == 255 and q.passes_up_to_position == 1
    assert q.worst["where"].startswith("token ") and len(q.worst["coords"]) == 3
    assert "first_fail_position=255" in strict.case(F32).describe()
    # The numpy error ratios agree with verify's worst element for every tensor and profile.
    for res, prof in ((strict, "strict"), (fp32, "fp32")):
        for t in res.case(F32).tensors:
            written = posenc.read_safetensors(os.path.join(tmp_path, F32 + ".safetensors"))[t.name]
            mine = posenc.error_ratio(c, t.name, written, prof)
            assert mine.shape == c.expected[t.name].shape
            assert np.isclose(mine.max(), t.ratio, rtol=1e-9), (prof, t.name)
            assert np.unravel_index(mine.argmax(), mine.shape) == tuple(t.worst["coords"])


def test_by_position(tmp_path):
    c = posenc.load_case(F32)
    outs = numpy_rope.outputs_for(c)
    pos, worst = posenc.by_position(c, "q_rot", outs["q_rot"], "strict")
    assert pos.shape == worst.shape == (19,)
    assert np.all(np.diff(pos) >= 0) and pos[0] == 0
    assert worst[0] <= 1.0 and worst[-1] > 1e6  # exact at 0, far off at 2^24 + 1
    pos32, worst32 = posenc.by_position(c, "q_rot", outs["q_rot"], "fp32")
    assert np.all(worst32 <= 1.0)
    with pytest.raises(ValueError, match="tensor 'inv_freq' .* has no position axis"):
        posenc.by_position(c, "inv_freq", outs["inv_freq"])


def test_bf16_error_ratio_accepts_bits_and_floats():
    c = posenc.load_case(BF16)
    bits = c.expected_values("cos")
    a = posenc.error_ratio(c, "cos", bits, "strict")
    b = posenc.error_ratio(c, "cos", posenc.bf16_to_float32(bits), "strict")
    assert np.array_equal(a, b) and a.max() <= 1.0
    with pytest.raises(ValueError, match="profile='bf16' does not apply"):
        posenc.budget(posenc.load_case(F32), "cos", "bf16")


def test_missing_binary_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.delenv("POSENC_BIN", raising=False)
    with pytest.raises(posenc.PosencError, match="posenc='/nonexistent/posenc' not found"):
        posenc.verify(F32, str(tmp_path), posenc="/nonexistent/posenc")


def test_input_error_raises_posenc_error(tmp_path, binary):
    # A tensor of the wrong shape written behind write_outputs' back: posenc exits 2.
    posenc.write_safetensors(str(tmp_path / (F32 + ".safetensors")), {"q_rot": np.zeros((3,), np.float32)})
    with pytest.raises(posenc.PosencError, match="exited 2"):
        posenc.verify(F32, str(tmp_path), posenc=binary)


def test_glob_selects_cases(tmp_path, binary):
    c = posenc.load_case(GPTJ)
    c.write_outputs(str(tmp_path), numpy_rope.outputs_for(c))
    r = posenc.verify("rope_inter_d256_*_f32", str(tmp_path), profile="fp32", posenc=binary)
    assert r.passed and [x.id for x in r.cases] == [GPTJ]
    assert len(r.all_cases) == len(posenc.case_ids("rope_inter_d256_*_f32"))
