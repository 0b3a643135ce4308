"""Verdicts that say only what the data shows, judged on the independent numpy engines
(numpy_engines.py, HF-style float32), not on posenc's own engine:

- INCONCLUSIVE (issue 33, item 2): every negative control the hf32 engine computes, given only
  the stages its manifest's control_detection says cannot tell the right convention from the
  known-wrong one under fp32, is INCONCLUSIVE (exit 3 alone), names the stages that would tell,
  and the Python objects show it; with one telling stage it passes.
- The M-RoPE release conventions (item 3): an HF 5.x engine (text after a video at its start +
  max(h, w)) and an HF 4.52-5.15 engine (int(second_per_grid)) pass the cases that declare
  them, and verify names the alternative each follows; the trained rules are the defaults.
- diagnose names a newcomer's bugs in an HF-style Qwen2.5-VL (item 5): the streams fed as
  (h, w, t), h and w swapped, Qwen2-VL's temporal rule on a Qwen2.5-VL video, and (w, h, t)
  even when the correct positions are written.
"""
import json
import os
import subprocess

import numpy as np
import pytest

import posenc
import numpy_engines as ne

HF32 = {"rope_scaling": ne.rope_hf, "mrope": ne.mrope_hf, "mla": ne.mla_hf, "alibi": ne.alibi_hf,
        "plan": ne.plan_hf}


def _controls():
    out = []
    for cid in posenc.case_ids():
        c = posenc.load_case(cid)
        if c.result == "invalid" and c.scheme in HF32:
            out.append(cid)
    return out


def _outputs(case):
    try:
        return HF32[case.scheme](case)
    except ne.Skip as e:
        pytest.skip(str(e))


def test_numpy_controls_given_only_undetecting_stages_are_inconclusive(tmp_path, binary):
    inconclusive = telling = 0
    blind_out, full_out = tmp_path / "blind", tmp_path / "full"
    blind_cases, full_cases = [], []
    for cid in _controls():
        case = posenc.load_case(cid)
        tells = case.manifest["control_detection"].get("fp32")
        if tells is None:
            continue
        try:
            out = HF32[case.scheme](case)
        except ne.Skip:
            continue
        blind = {n: a for n, a in out.items() if n not in tells}
        if blind:
            case.write_outputs(str(blind_out), blind)
            blind_cases.append((case, tells))
        if tells:
            case.write_outputs(str(full_out), {**blind, tells[0]: out[tells[0]]})
            full_cases.append(case)
    res = posenc.verify([c for c, _ in blind_cases], str(blind_out), profile="fp32", posenc=binary)
    for case, tells in blind_cases:
        cr = res.case(case.id)
        assert cr.status == "INCONCLUSIVE" and cr.inconclusive and not cr.passed and not cr.failed, cr.describe()
        assert cr.telling_stages == tells, cr.describe()
        assert ("give one of: " if tells else "no stage of this case") in cr["message"], cr["message"]
        inconclusive += 1
    assert res.summary["inconclusive"] == len(blind_cases) and res.returncode == 3
    assert {c.id for c in res.inconclusive} == {c.id for c, _ in blind_cases}
    full = posenc.verify(full_cases, str(full_out), profile="fp32", posenc=binary)
    for case in full_cases:
        assert full.case(case.id).status == "PASS", full.case(case.id).describe()
        telling += 1
    assert inconclusive >= 15 and telling >= 15, (inconclusive, telling)
    # The runs among them: DeepSeek-V3 without softmax_scale; the traces with positions
    # and rotations only.
    names = {c.id for c, _ in blind_cases}
    assert "rope_scaling_deepseek_v3_all_softmax_factor_missing_f32" in names


def test_trace_controls_with_positions_and_rotations_only_are_inconclusive(tmp_path, binary):
    ids = ["mrope_qwen2_vl_7b_instruct_trace_prefix_reuse_seq_rm_count_invalid_f32",
           "mrope_qwen3_vl_8b_instruct_trace_speculative_draft_slot_t_invalid_f32"]
    for cid in ids:
        case = posenc.load_case(cid)
        out = ne.mrope_hf(case)
        keep = {n: a for n, a in out.items()
                if n.endswith((".positions", ".rope_positions", ".q_rot", ".k_rot"))}
        case.write_outputs(str(tmp_path), keep)
    for prof in ("strict", "fp32", "fp32-recurrence"):
        r = posenc.verify(ids, str(tmp_path), profile=prof, posenc=binary)
        for cid in ids:
            assert r.case(cid).status == "INCONCLUSIVE", r.case(cid).describe()
        assert r.returncode == 3, r


def test_inconclusive_exit_status_beside_judged_cases(tmp_path, binary):
    """A run with a judged case beside an INCONCLUSIVE control exits as the judged cases do."""
    ctl = posenc.load_case("rope_scaling_deepseek_v3_all_softmax_factor_missing_f32")
    ok = posenc.load_case("rope_half_d96_r24_b1e4_neox_20b_f32")
    out = ne.rope_hf(ctl)
    out.pop("softmax_scale")
    ctl.write_outputs(str(tmp_path), out)
    ok.write_outputs(str(tmp_path), ne.rope_hf(ok))
    r = posenc.verify([ctl, ok], str(tmp_path), profile="fp32", posenc=binary)
    assert r.returncode == 0 and r.summary["passed"] == 1 and r.summary["inconclusive"] == 1, r
    text = subprocess.run([binary, "verify", ctl.manifest_path, "--actual", str(tmp_path),
                           "--profile", "fp32"], capture_output=True, text=True)
    assert text.returncode == 3, text.stdout
    assert "INCONCLUSIVE" in text.stdout and "give one of: softmax_scale" in text.stdout


# ---- M-RoPE release conventions ----------------------------------------------------------------

VIDEO_25 = "mrope_qwen2_5_vl_7b_instruct_text_video_text_f32"
HALF_S = "mrope_qwen2_5_vl_7b_instruct_text_video_half_second_text_f32"
VIDEO_2 = "mrope_qwen2_vl_7b_instruct_text_video_text_f32"


@pytest.mark.parametrize("cid,release,alt", [
    (VIDEO_2, {"release": "v5"}, "hf5_resume_max_hw"),
    (VIDEO_25, {"release": "v5"}, "hf5_resume_max_hw"),
    (HALF_S, {"release": "v5"}, "hf5_resume_max_hw"),
    (HALF_S, {"temporal": "scaled_int_seconds"}, "hf_int_seconds"),
    (HALF_S, {"temporal": "scaled_int_seconds", "release": "v5"}, "hf_int_seconds"),
    (HALF_S, {}, "default"),
])
def test_mrope_release_conventions_pass_and_are_named(tmp_path, binary, cid, release, alt):
    case = posenc.load_case(cid)
    out = ne.mrope_hf(case, **release)
    right = ne.mrope_hf(case)
    assert (alt == "default") == np.array_equal(out["positions"], right["positions"])
    case.write_outputs(str(tmp_path), out)
    cr = posenc.verify(case, str(tmp_path), profile="fp32", posenc=binary).case(cid)
    assert cr.status == "PASS", cr.describe()
    for t in cr.tensors:
        assert t["convention"] == alt, cr.describe()
        if alt != "default":
            assert "follows the declared alternative \"" + alt + "\"" in t["message"], t["message"]
    (d,) = posenc.diagnose(case, str(tmp_path), profile="fp32", posenc=binary)
    assert d["verdict"] == "correct", d


def test_mrope_cases_carry_mm_token_type_ids():
    for cid in posenc.case_ids(scheme="mrope"):
        case = posenc.load_case(cid)
        if case.variant == "vision":
            continue
        if case.variant == "trace":
            names = [n for n in case.inputs if n.endswith(".input_ids")]
        else:
            names = ["input_ids"]
        for n in names:
            ids = case.inputs[n]
            types = case.inputs[n.replace("input_ids", "mm_token_type_ids")]
            cfg = case.manifest["preset"]["config"]
            text = cfg.get("text_config", {})
            image = cfg.get("image_token_id", text.get("image_token_id", 151655))
            video = cfg.get("video_token_id", text.get("video_token_id", 151656))
            want = np.where(ids == image, 1, np.where(ids == video, 2, 0))
            assert np.array_equal(types, want), (cid, n)


# ---- diagnose names a newcomer's M-RoPE bugs -----------------------------------------------------

@pytest.mark.parametrize("cid,bug,named", [
    (VIDEO_25, {"order": (1, 2, 0)}, ("stream-order", "(h, w, t)")),
    (VIDEO_25, {"order": (0, 2, 1)}, ("stream-order", "(t, w, h)")),
    (VIDEO_25, {"temporal": "frame_index"}, ("temporal", "frame_index")),
    (VIDEO_25, {"order": (2, 1, 0), "write_right_positions": True}, ("stream-permutation", None)),
    ("mrope_qwen2_5_vl_7b_instruct_text_image_text_f32", {"order": (2, 1, 0), "write_right_positions": True},
     ("stream-order", "(w, h, t)")),
    ("mrope_qwen2_5_vl_7b_instruct_text_image_text_f32", {"grid_hw_swap": True}, ("grid-hw-swap", None)),
    ("mrope_qwen2_5_vl_7b_instruct_text_image_text_f32", {"base": 10000.0}, ("base", "10000")),
])
def test_newcomer_mrope_bugs_are_named(tmp_path, binary, cid, bug, named):
    case = posenc.load_case(cid)
    case.write_outputs(str(tmp_path), ne.mrope_hf(case, **bug))
    v = posenc.verify(case, str(tmp_path), profile="fp32", posenc=binary).case(cid)
    assert v.status == "FAIL", v.describe()
    (d,) = posenc.diagnose(case, str(tmp_path), profile="fp32", posenc=binary)
    assert d["verdict"] == "explained", d["summary"]
    top = d["hypotheses"][0]
    mistake, value = named
    if mistake == "stream-permutation":  # the fixed mistake: (w, h, t) fed and written
        mistake, value = "stream-order", "(w, h, t)"
        assert top["mistake"] in ("stream-permutation", "stream-order"), d["summary"]
    else:
        assert top["mistake"] == mistake, d["summary"]
    if top["mistake"] == mistake and value is not None:
        assert top["fit"]["value"] == value, top
    assert top["confirmed"] and top["residual"] <= 1.0, top


# ---- the pair-0 sentences of the manifests (issue 33, item 7) ------------------------------------

def _pi(prec=60):
    """pi to `prec` digits (Machin's formula in decimal, stdlib only: independent of posenc)."""
    import decimal
    decimal.getcontext().prec = prec + 10

    def arctan_inv(x):
        x = decimal.Decimal(x)
        total, term, n, sign = decimal.Decimal(0), 1 / x, 1, 1
        x2 = x * x
        while term > decimal.Decimal(10) ** -(prec + 5):
            total += sign * term / n
            term /= x2
            n += 2
            sign = -sign
        return total
    return 4 * (4 * arctan_inv(5) - arctan_inv(239))


def test_every_pair0_sentence_states_the_real_distance_to_a_multiple_of_half_pi():
    """Every manifest's "pair-0 angle ... from a multiple of pi/2 (k pi/2)" sentence is true,
    recomputed here in 70-digit decimals: the angle m * inv_freq_0 (the case's pair-0 frequency),
    its nearest multiple k of pi/2, and the distance as printed (2 significant digits)."""
    import decimal
    import re
    half_pi = _pi() / 2
    short = re.compile(r"^pair-0 angle ([0-9.e+-]+) from a multiple of pi/2 \((\d+) pi/2\)$")
    long = re.compile(r"^pair-0 angle m \* inv_freq_0 = ([0-9.]+) \(inv_freq_0 = [0-9.e+-]+\) is ([0-9.e+-]+) "
                      r"from a multiple of pi/2 \((\d+) pi/2\); chosen at frequency 1, where the angle is "
                      r"([0-9.e+-]+) from a multiple of pi/2 \((\d+) pi/2\)$")

    def check(x, dist, k):
        kk = int((x / half_pi).to_integral_value(rounding=decimal.ROUND_HALF_EVEN))
        assert kk == int(k), (x, kk, k)
        assert f"{float(abs(x - kk * half_pi)):.2g}" == f"{float(dist):.2g}", (x, dist)

    n = 0
    for cid in posenc.case_ids():
        case = posenc.load_case(cid)
        sentences = [(p.get("position", p.get("m")), p["why"]) for p in case.manifest.get("positions", [])
                     if isinstance(p, dict) and "pi/2" in p.get("why", "")]
        for m, why in sentences:
            s, lg = short.match(why), long.match(why)
            assert s or lg, (cid, why)
            if s:
                inv = case.manifest.get("tables", {}).get("inv_freq")
                if inv:  # the short form is for a pair-0 frequency of exactly 1
                    assert decimal.Decimal(inv[0]["decimal"]) == 1, (cid, inv[0])
                check(decimal.Decimal(m), s.group(1), s.group(2))
            else:
                inv0 = decimal.Decimal(case.manifest["tables"]["inv_freq"][0]["decimal"])
                check(decimal.Decimal(m) * inv0, lg.group(2), lg.group(3))
                check(decimal.Decimal(m), lg.group(4), lg.group(5))
            n += 1
    assert n >= 100, n


# ---- more newcomer bugs, each named by diagnose (issue 33, items 4 and 5) -----------------------

def _bloom_slopes_index_off_by_one(n):
    """BLOOM's build_alibi_tensor with the power's index starting at 0 instead of 1 (every head
    takes the next lower exponent: head 1 slope 1), float32 as HF computes it."""
    import math
    c = 2 ** int(math.floor(math.log2(n)))
    base = ne.F32(2 ** (-(2 ** -(math.log2(c) - 3))))
    slopes = list(np.power(base, np.arange(0, c, dtype=np.int32).astype(ne.F32)))
    if c != n:
        extra = ne.F32(2 ** (-(2 ** -(math.log2(2 * c) - 3))))
        k = np.arange(0, 2 * min(c, n - c), 2, dtype=np.int32).astype(ne.F32)
        slopes += list(np.power(extra, k))
    return np.asarray(slopes, ne.F32)


def test_alibi_slope_index_off_by_one_is_named_and_not_slopes_reversed(tmp_path, binary):
    """An HF-style float32 ALiBi whose slope exponents start one too low is named
    `slope-index-off-by-one` (it was once "confirmed" as `slopes-reversed` at a residual above 1)."""
    ids = [c for c in posenc.case_ids(scheme="alibi") if posenc.load_case(c).result == "valid"][:6]
    named = 0
    for cid in ids:
        case = posenc.load_case(cid)
        if case.variant == "slopes":
            out = ne.slopes_outputs(case, _bloom_slopes_index_off_by_one)
        else:
            if case.params["dtype"] != "f32":
                continue
            out = ne.alibi_attention(case, _bloom_slopes_index_off_by_one(case.params["n_heads"]),
                                     ne._alibi_form(case), "f32")
        case.write_outputs(str(tmp_path), out)
        (d,) = posenc.diagnose(case, str(tmp_path), profile="fp32", posenc=binary)
        if d["verdict"] == "correct":
            continue
        confirmed = [h["mistake"] for h in d["hypotheses"] if h["confirmed"]]
        assert "slopes-reversed" not in confirmed, d["summary"]
        assert d["hypotheses"][0]["mistake"] == "slope-index-off-by-one", (cid, d["summary"])
        named += 1
    assert named >= 2, named


def test_numpy_rope_with_llama2s_base_is_fitted_as_base_10000(tmp_path, binary):
    """The HF-style float32 numpy RoPE with rope_theta left at 10000 on Llama 3's case (500000),
    claimed fp32: diagnose fits the base (the fit's float32 twin, its budget widened by its own
    rounding of the other frequencies)."""
    import numpy_rope
    case = posenc.load_case("rope_half_d128_b5e5_llama3_8b_f32")

    def rope10k(q, k, positions, base, rotary_dim, attention_factor=1.0):
        return numpy_rope.rope_hf(q, k, positions, 10000.0, rotary_dim, attention_factor)
    case.write_outputs(str(tmp_path), numpy_rope.outputs_for(case, rope=rope10k))
    (d,) = posenc.diagnose(case, str(tmp_path), profile="fp32", posenc=binary)
    top = d["hypotheses"][0]
    assert d["verdict"] == "explained" and top["mistake"] == "base", d["summary"]
    assert top["fit"]["value"] == "10000" and top["residual"] <= 1.0, top


def test_html_report_shows_inconclusive(tmp_path, binary):
    ctl = posenc.load_case("rope_scaling_deepseek_v3_all_softmax_factor_missing_f32")
    out = ne.rope_hf(ctl)
    out.pop("softmax_scale")
    ctl.write_outputs(str(tmp_path / "out"), out)
    page = tmp_path / "r.html"
    p = subprocess.run([binary, "verify", ctl.manifest_path, "--actual", str(tmp_path / "out"),
                        "--profile", "fp32", "--report", str(page)], capture_output=True, text=True)
    assert p.returncode == 3, p.stdout + p.stderr
    html = page.read_text()
    assert 'class="INCONCLUSIVE">INCONCLUSIVE' in html, html[:2000]
    assert "1 inconclusive (negative controls whose given stages cannot tell" in html
    assert "give one of: softmax_scale" in html
