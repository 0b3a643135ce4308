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


KV_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "golden", "data",
                      "kv_cache")


def test_nonfinite_numbers_come_back_as_floats(tmp_path, binary):
    """verify's JSON writes an infinite ratio as null + ratio_nonfinite; the wrapper gives inf.
    An integer tensor's mismatch is finite: 2 x its largest difference, with max_difference."""
    import subprocess
    case = "kv_cache_rope_window8_ring_wrap_f32"
    out = tmp_path / f"{case}.safetensors"
    subprocess.run([binary, "engine", case, "--mistake", "cache-length-position", "--out",
                    str(out)], check=True, capture_output=True)
    r = posenc.verify(os.path.join(KV_DIR, case + ".json"), str(out), posenc=binary)
    t = r.case(case).tensor("s04.positions")
    assert t.status == "FAIL" and t.ratio == 2 * t["max_difference"] and t["max_difference"] >= 1, t
    assert t.describe().startswith("s04.positions: FAIL worst 2 of budget"), t.describe()
    c = posenc.load_case(F32)
    outs = {n: c.expected_values(n).copy() for n in c.expected}
    outs["q_rot"].flat[5] = np.inf
    c.write_outputs(str(tmp_path), outs)
    t = posenc.verify(c, str(tmp_path), posenc=binary).case(F32).tensor("q_rot")
    assert t.status == "FAIL" and t.ratio == float("inf") and t["n_inf"] == 1, t
    assert t.describe().startswith("q_rot: FAIL worst inf of budget"), t.describe()
    assert "non-finite output" in t["message"], t["message"]


def test_kv_negative_controls_say_what_verify_does_with_a_correct_engine(tmp_path, binary):
    """The manifest's negative_control.meaning names verify's verdict on a correct engine's
    output (and on the mistaken engine's): run both and compare."""
    import re
    import subprocess
    cases = sorted(f[:-5] for f in os.listdir(KV_DIR) if f.endswith("_invalid_f32.json"))
    assert cases
    for case in cases:
        with open(os.path.join(KV_DIR, case + ".json")) as f:
            m = json.load(f)
        meaning = m["negative_control"]["meaning"]
        said = re.search(r"correct engine[^;(]*\(verify (PASS|FAIL)\)", meaning)
        said_mistake = re.search(r"engine with the mistake[^;(]*\(verify (PASS|FAIL)\)", meaning)
        assert said and said_mistake, meaning
        for mistake, claim in [(None, said.group(1)), (m["negative_control"]["mistake"],
                                                       said_mistake.group(1))]:
            out = tmp_path / f"{case}_{mistake}.safetensors"
            cmd = [binary, "engine", case, "--out", str(out)]
            if mistake:
                cmd += ["--mistake", mistake]
            subprocess.run(cmd, check=True, capture_output=True)
            r = posenc.verify(os.path.join(KV_DIR, case + ".json"), str(out), posenc=binary)
            assert r.case(case).status == claim, (case, mistake, meaning, r.describe())
