import pytest

import numpy_rope
import wrong_ropes
from conftest import F32, BF16, F16, GPTJ

CASES = [F32, BF16, F16, GPTJ]


def test_numpy_rope_passes_fp32(binary):
    r = numpy_rope.check(CASES, "fp32", posenc_bin=binary)
    assert r.passed, r.describe()
    assert sorted(c.id for c in r.cases) == sorted(CASES)
    assert all(c.status == "PASS" for c in r.cases) and len(r.cases) == 4


def test_numpy_rope_fails_strict(binary):
    r = numpy_rope.check(CASES, "strict", posenc_bin=binary)
    assert r.returncode == 1 and r.summary["failed"] == 4
    for c in r.cases:
        assert c.tensor("q_rot").status == "FAIL"  # float32 tables are not correctly rounded


@pytest.mark.parametrize("mistake", sorted(wrong_ropes.WRONG))
def test_wrong_ropes_fail_fp32(binary, mistake):
    r = numpy_rope.check([F32, BF16], "fp32", rope=wrong_ropes.WRONG[mistake], posenc_bin=binary)
    assert r.returncode == 1 and r.summary["failed"] == 2, r.describe()
    for c in r.cases:
        q = c.tensor("q_rot")
        assert q.status == "FAIL" and q.ratio != "nan"
    if mistake == "off_by_one":
        assert r.case(F32).tensor("q_rot").first_fail_position == 0


def test_diagnose_names_the_off_by_one_and_the_float32_pipeline(binary, tmp_path):
    # The HF-style numpy RoPE with positions off by one, claimed fp32: `offset` is confirmed. The
    # correct one claimed strict: told to claim fp32 (it matches the float32 pipeline).
    import posenc
    case = posenc.load_case(F32)
    wrong, right = tmp_path / "wrong", tmp_path / "right"
    case.write_outputs(str(wrong), numpy_rope.outputs_for(case, wrong_ropes.WRONG["off_by_one"]))
    case.write_outputs(str(right), numpy_rope.outputs_for(case, numpy_rope.rope_hf))
    d = posenc.diagnose(case, str(wrong), profile="fp32", posenc=binary)
    assert len(d) == 1 and d[0]["verdict"] == "explained", d
    assert "`offset`" in d[0]["summary"], d[0]["summary"]
    d = posenc.diagnose(case, str(right), profile="strict", posenc=binary)
    assert d[0]["verdict"] == "explained" and "claim --profile fp32" in d[0]["summary"], d
    assert posenc.diagnose(case, str(right), profile="fp32", posenc=binary)[0]["verdict"] == "correct"


def test_diagnose_agrees_with_verify_and_names_stacked_pairing(binary, tmp_path):
    # numpy's float32 cos / pow, not posenc's: the HF-style engine passes fp32 and diagnose,
    # told strict, recommends fp32 (never a profile verify fails), naming every profile it
    # passes. GPT-J pairing on a NeoX case with these float32 angles is the stacked hypothesis
    # (fp32, pairing), not "unexplained".
    import posenc
    ids = ["rope_half_d128_b5e5_llama3_8b_f32", F32]
    right, wrong = tmp_path / "right", tmp_path / "wrong"
    for cid in ids:
        case = posenc.load_case(cid)
        case.write_outputs(str(right), numpy_rope.outputs_for(case, numpy_rope.rope_hf))
        case.write_outputs(str(wrong), numpy_rope.outputs_for(case, wrong_ropes.WRONG["interleaved"]))
    for cid in ids:
        case = posenc.load_case(cid)
        d = posenc.diagnose(case, str(right), profile="strict", posenc=binary)[0]
        rec = d["recommended_profile"]
        assert d["verdict"] == "explained" and rec == "fp32", d["summary"]
        assert posenc.verify(case, str(right), profile=rec, posenc=binary).passed
        d = posenc.diagnose(case, str(wrong), profile="fp32", posenc=binary)[0]
        top = d["hypotheses"][0]
        assert d["verdict"] == "explained", d["summary"]
        assert (top["mistake"], top["pipeline"]) == ("pairing", "fp32"), d["summary"]


def test_first_verdict_fails_strict_passes_fp32_and_fp16_angles_are_fitted(binary, tmp_path):
    # README.md, "First verdict in five minutes": the 25-line numpy RoPE fails strict (worst at
    # position 16777217, where a float32 angle can be anywhere), passes fp32, and diagnose tells
    # it to claim fp32. The float16-angle variant of wrong_ropes is fitted as float16 angles.
    import os
    import subprocess
    import sys
    import posenc
    from conftest import HERE
    script = os.path.join(HERE, "..", "examples", "first_verdict.py")
    out = tmp_path / "out"
    subprocess.run([sys.executable, script, str(out)], check=True, timeout=120)
    case = posenc.load_case("rope_half_d128_b5e5_llama3_8b_f32")
    strict = posenc.verify(case, str(out), profile="strict", posenc=binary)
    assert strict.returncode == 1
    assert "(position 16777217)" in strict.case(case.id).tensor("q_rot").worst["where"]
    assert posenc.verify(case, str(out), profile="fp32", posenc=binary).passed
    d = posenc.diagnose(case, str(out), profile="strict", posenc=binary)[0]
    assert "claim --profile fp32" in d["summary"], d
    f16 = tmp_path / "f16"
    case.write_outputs(str(f16), numpy_rope.outputs_for(case, wrong_ropes.WRONG["fp16_angles"]))
    d = posenc.diagnose(case, str(f16), profile="fp32", posenc=binary)[0]
    fits = [h["fit"] for h in d["hypotheses"] if "fit" in h]
    assert d["verdict"] == "explained" and d["hypotheses"][0].get("fit", {}).get("value") == \
        "float16", (d["summary"], fits)
