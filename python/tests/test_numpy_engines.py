"""Independent numpy engines (numpy_engines.py, engine_runs.py) against the whole catalog:
each engine's outputs pass `posenc verify` under its pipeline's
profile, and `posenc diagnose` agrees (verdict "correct"; a negative control, which diagnose
does not diagnose, passes because the output differs from the known-wrong convention).

One parameter per (engine, case of a scheme the engine models); a case the engine cannot
compute is skipped with the reason. The runs are batched: one verify and one diagnose per
engine, two engines at a time (about 25 s of the 2-core CI machine, mostly diagnose).

Besides the engines of real pipelines, three variants pin false FAILs that the profiles once gave:
`hf32-negpow` (a sinusoid as powf(base, -2i/d), failed fp32 at up to 8.3), `ggml-kv16`
(llama.cpp's 16-bit KV cache: scores from 16-bit q, k with ggml's tables, failed
fp32-recurrence at up to 15.9) and `ggml-dynamic` (dynamic NTK as a host-computed base, was
"not applicable"); the BLOOM engine failed fp32 at 1.08 on the 4200-key f16 decode case."""
import pytest

import posenc
import engine_runs as er
from conftest import posenc_bin


def _params():
    out = []
    for engine, (_, fns) in er.ENGINES.items():
        for scheme in fns:
            for cid in posenc.case_ids(scheme=scheme):
                out.append(pytest.param(engine, cid, id=f"{engine}:{cid}"))
    return out


@pytest.fixture(scope="module")
def runs():
    b = posenc_bin()
    if b is None:
        pytest.skip("no posenc binary: set POSENC_BIN (ctest does) or put posenc on PATH")
    return er.run_all(b)


@pytest.mark.parametrize("engine,case_id", _params())
def test_engine_passes_its_profile_and_diagnose_agrees(runs, engine, case_id):
    r = runs[engine][case_id]
    if isinstance(r, str):
        pytest.skip(r)
    assert r.status == "PASS", r.describe()
    if r.case.result == "invalid":
        assert "differs from the known-wrong convention" in r.message, r.describe()
        assert r.verdict is None, r.describe()
    else:
        assert r.verdict == "correct", r.describe()


def test_every_scheme_is_modelled_or_named():
    """A scheme no engine models is listed with the reason in engine_runs.NOT_MODELLED."""
    modelled = {s for _, fns in er.ENGINES.values() for s in fns}
    schemes = {posenc.load_case(c).scheme for c in posenc.case_ids()}
    assert schemes - modelled == set(er.NOT_MODELLED), (schemes - modelled, set(er.NOT_MODELLED))


def test_mrope_sectioned_map_on_an_interleaved_model_fails_and_is_named(tmp_path):
    """An HF-style float32 M-RoPE that splits Qwen3-VL's table into contiguous sections (Qwen2-VL's
    map) instead of interleaving them fails `fp32`, and diagnose names the map."""
    b = posenc_bin()
    if b is None:
        pytest.skip("no posenc binary: set POSENC_BIN (ctest does) or put posenc on PATH")
    import numpy_engines as ne
    case = posenc.load_case("mrope_qwen3_vl_8b_instruct_text_image_text_f32")
    assert case.params["map"]["rule"] == "interleaved"
    case.write_outputs(str(tmp_path), ne.mrope_hf(case, rule="sectioned"))
    v = posenc.verify(case, str(tmp_path), profile="fp32", posenc=b).case(case.id)
    assert v.status == "FAIL", v
    (d,) = posenc.diagnose(case, str(tmp_path), profile="fp32", posenc=b)
    assert d["verdict"] == "explained", d
    assert "`wrong-map`" in d["summary"], d["summary"]


def test_gemma3_plan_global_rope_on_sliding_layers_fails_and_is_named(tmp_path):
    """An HF-style float32 Gemma 3 layer passes both of the plan's layer types under `fp32`;
    the same engine rotating the sliding layers with the global layers' base 1e6 and linear x8
    (vLLM #29111, llama.cpp #14367) fails the sliding type only, and diagnose names the mistake
    and the layer type."""
    b = posenc_bin()
    if b is None:
        pytest.skip("no posenc binary: set POSENC_BIN (ctest does) or put posenc on PATH")
    import numpy_engines as ne
    good, bad = tmp_path / "good", tmp_path / "bad"
    for t in ("sliding_attention", "full_attention"):
        case = posenc.load_case(f"plan_gemma_3_4b_it_{t}_f32")
        case.write_outputs(str(good), ne.plan_hf(case))
        v = posenc.verify(case, str(good), profile="fp32", posenc=b).case(case.id)
        assert v.status == "PASS", v
    case = posenc.load_case("plan_gemma_3_4b_it_sliding_attention_f32")
    assert case.params["type"]["mask"] == "sliding" and case.params["type"]["base"] == 10000.0
    case.write_outputs(str(bad), ne.plan_hf(case, global_on_sliding=True))
    v = posenc.verify(case, str(bad), profile="fp32", posenc=b).case(case.id)
    assert v.status == "FAIL", v
    (d,) = posenc.diagnose(case, str(bad), profile="fp32", posenc=b)
    assert d["verdict"] == "explained", d
    assert "`global-rope-on-sliding`" in d["summary"], d["summary"]
    assert "sliding_attention" in d["id"], d


def test_mrope_half_split_pairs_on_glm_fails_and_is_named(tmp_path):
    """An HF-style float32 M-RoPE that rotates GLM-4.1V's 64 rotated channels with Qwen2-VL's
    rotate_half pairs (i, i + 32) instead of its adjacent pairs (2i, 2i + 1) fails `fp32`, and
    diagnose names the pair layout; the same engine with the case's pairs passes."""
    b = posenc_bin()
    if b is None:
        pytest.skip("no posenc binary: set POSENC_BIN (ctest does) or put posenc on PATH")
    import numpy_engines as ne
    case = posenc.load_case("mrope_glm_4_1v_9b_thinking_text_image_text_f32")
    assert case.params["layout"] == "interleaved" and case.params["rotary_dim"] == 64
    case.write_outputs(str(tmp_path), ne.mrope_hf(case))
    assert posenc.verify(case, str(tmp_path), profile="fp32", posenc=b).case(case.id).status == "PASS"
    case.write_outputs(str(tmp_path), ne.mrope_hf(case, layout="half_split"))
    v = posenc.verify(case, str(tmp_path), profile="fp32", posenc=b).case(case.id)
    assert v.status == "FAIL", v
    (d,) = posenc.diagnose(case, str(tmp_path), profile="fp32", posenc=b)
    assert d["verdict"] == "explained", d
    assert "`pair-layout`" in d["summary"], d["summary"]
