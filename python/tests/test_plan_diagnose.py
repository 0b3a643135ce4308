"""Plans checked with an independent numpy HF-style float32 engine (numpy_engines.plan_hf):
Llama 4's attention with its L2 q/k norm after RoPE passes `fp32`; bugs a newcomer plants in
it (numpy_engines.PLAN_BUGS: the Gemma 3 base left at 10000, the sliding window off by one, the
other layer type's output, temperature variants, ...) are each named by `posenc diagnose`,
top-1 on at least 95 % of them; Gemma 3's layer pattern off by one fails per-layer verification
naming its 11 layers, diagnose fits the pattern, and the engine's layer table names them too."""
import json
import os
import subprocess

import pytest

import posenc
from conftest import posenc_bin

ne = pytest.importorskip("numpy_engines")

# The name diagnose gives each planted bug: a fixed mistake of the plan engine or a fitted
# parameter (golden/cases/plan_fit.hpp).
NAMED = {"global_rope_on_sliding": "global-rope-on-sliding", "rope_theta_default": "base",
         "window_plus_1": "window", "window_minus_1": "window", "window_plus_2": "window",
         "other_type": "other-layer-type", "qk_norm_missing": "qk-norm-missing",
         "temperature_p": "temperature-p", "temperature_p_plus_1": "temperature-p-plus-1",
         "temperature_offset": "temperature-offset", "temperature_scale": "temperature-scale",
         "yarn_truncate_flip": "yarn-truncate", "sinks_dropped": "sinks-dropped",
         "rope_on_nope": "rope-on-nope"}
PL = "plan_gemma_3_4b_it"
ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


@pytest.fixture(scope="module")
def b():
    x = posenc_bin()
    if x is None:
        pytest.skip("no posenc binary: set POSENC_BIN (ctest does) or put posenc on PATH")
    return x


def _top(case, outdir, b):
    (d,) = posenc.diagnose(case, str(outdir), profile="fp32", posenc=b)
    top = d["hypotheses"][0] if d["hypotheses"] else {}
    return d, (top.get("mistake") if d["verdict"] == "explained" else None), top


def test_llama4_attention_with_its_qk_norm_passes_fp32_and_without_it_is_named(tmp_path, b):
    case = posenc.load_case("plan_llama_4_scout_17b_16e_instruct_chunked_attention_f32")
    n = case.params["type"]["qk_norm"]
    assert n["kind"] == "l2" and n["position"] == "after_rope" and n["eps"] == 1e-5
    assert case.params["qk_inputs"] == "projections"
    case.write_outputs(str(tmp_path / "good"), ne.plan_hf(case))
    v = posenc.verify(case, str(tmp_path / "good"), profile="fp32", posenc=b).case(case.id)
    assert v.status == "PASS", v
    case.write_outputs(str(tmp_path / "bad"), ne.plan_hf(case, bug="qk_norm_missing"))
    v = posenc.verify(case, str(tmp_path / "bad"), profile="fp32", posenc=b).case(case.id)
    assert v.status == "FAIL", v
    d, name, _ = _top(case, tmp_path / "bad", b)
    assert name == "qk-norm-missing", d["summary"]


def test_planted_plan_bugs_are_named_top_1(tmp_path, b, record_property):
    """Every bug of PLAN_BUGS on every valid plan case it changes (a bug the case cannot see,
    such as the global RoPE on Gemma 2's alike layers, is left out): diagnose's top hypothesis
    names it; the rate is printed and recorded."""
    n, ok, wrong = 0, 0, []
    for cid in posenc.case_ids(scheme="plan"):
        case = posenc.load_case(cid)
        if case.result == "invalid":
            continue
        for bug in ne.PLAN_BUGS:
            try:
                out = ne.plan_hf(case, bug=bug)
            except ne.Skip:
                continue
            d = tmp_path / f"{cid}.{bug}"
            case.write_outputs(str(d), out)
            r, name, top = _top(case, d, b)
            if r["verdict"] == "correct":
                continue  # the case's stages cannot see this bug
            n += 1
            if name == NAMED[bug]:
                ok += 1
            else:
                wrong.append(f"{cid} {bug}: {name} ({r['summary'][:160]})")
    rate = ok / n
    print(f"planted plan bugs: top-1 {ok}/{n} = {100 * rate:.1f} %")
    record_property("plan_top1_rate", rate)
    assert n >= 40, n
    assert rate >= 0.95, f"top-1 {ok}/{n}:\n" + "\n".join(wrong)


def test_gemma3_base_and_window_bugs_are_fitted(tmp_path, b):
    """Two of issue 33's newcomer bugs on Gemma 3: rope_theta left at 10000 on the global layers
    (fitted base 10000) and the sliding window off by one (fitted W + 1 = 1025)."""
    full = posenc.load_case(f"{PL}_full_attention_f32")
    full.write_outputs(str(tmp_path / "base"), ne.plan_hf(full, bug="rope_theta_default"))
    d, name, top = _top(full, tmp_path / "base", b)
    assert name == "base" and top["fit"]["value"] == "10000", d["summary"]
    sliding = posenc.load_case(f"{PL}_sliding_attention_f32")
    sliding.write_outputs(str(tmp_path / "window"), ne.plan_hf(sliding, bug="window_plus_1"))
    d, name, top = _top(sliding, tmp_path / "window", b)
    assert name == "window" and top["fit"]["value"] == "W + 1 = 1025", d["summary"]


def _run(b, *args):
    p = subprocess.run([b, *args], capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def _gemma3_plan(tmp_path, b):
    """Gemma 3's plan as `generate --config` writes it into tmp_path/g3: plan.json and each
    layer type's case by type name."""
    rc, out = _run(b, "generate", "--config",
                   os.path.join(ROOT, "golden", "presets", "gemma-3-4b-it.json"),
                   "--out", str(tmp_path / "g3"))
    assert rc == 0, out
    plan = json.load(open(tmp_path / "g3" / "plan.json"))
    cases = {t["name"]: posenc.load_case(str(tmp_path / "g3" / t["manifest"])) for t in plan["types"]}
    return plan, cases


def test_gemma3_layer_pattern_off_by_one_is_caught_layer_by_layer(tmp_path, b):
    """The third: an engine whose Gemma 3 layer i is global when i % 6 == 0 (the rule is
    (i + 1) % 6 == 0). Each layer's own output (ACT/layers/NN, the layer run on its type's case
    inputs) fails per-layer verification on exactly the 11 wrong layers; diagnose names the other
    layer type on each and fits the pattern off by one; the engine's layer table names the same
    layers and keys. One output per type passes both types: the per-type check cannot see it."""
    plan, cases = _gemma3_plan(tmp_path, b)
    act = tmp_path / "act"
    for layer in plan["layers"]:
        i, t = layer["index"], layer["type"]
        engine = "full_attention" if i % 6 == 0 else "sliding_attention"
        case = cases[t]
        bug = None if engine == t else "other_type"
        case.write_outputs(str(act / "layers" / f"{i:02d}"), ne.plan_hf(case, bug=bug))
    for case in cases.values():  # one output per type, from a layer the engine gives that type
        case.write_outputs(str(act / "per_type"), ne.plan_hf(case))
    rc, out = _run(b, "verify", str(tmp_path / "g3" / "plan.json"), "--actual", str(act / "per_type"),
                   "--profile", "fp32")
    assert rc == 0 and "PASS, every layer" in out, out
    rc, out = _run(b, "verify", str(tmp_path / "g3" / "plan.json"), "--actual", str(act), "--profile", "fp32")
    assert rc == 1, out
    assert "plan gemma_3_4b_it: 11 of 34 layers fail: 0, 5-6, 11-12, 17-18, 23-24, 29-30" in out, out
    assert "sliding_attention  FAIL: layers 0, 6, 12, 18, 24, 30 (6 of 29 layers)" in out, out
    assert "full_attention     FAIL: layers 5, 11, 17, 23, 29 (5 of 5 layers)" in out, out
    rc, out = _run(b, "diagnose", str(tmp_path / "g3" / "plan.json"), "--actual", str(act), "--profile", "fp32")
    assert rc == 1, out
    assert "11 of 34 layers not correct" in out and "the layer pattern is off by +1" in out, out
    assert out.count("`other-layer-type`") == 11, out
    keys = ["rope", "base", "scaling", "mask", "window", "chunk", "temperature", "sinks", "qk_norm"]
    by_type = {}
    for layer in plan["layers"]:
        by_type.setdefault(layer["type"], {k: layer[k] for k in keys})
    rows = [dict(index=i, **by_type["full_attention" if i % 6 == 0 else "sliding_attention"])
            for i in range(34)]
    json.dump({"schema": "posenc-layer-table", "layers": rows}, open(tmp_path / "table.json", "w"))
    rc, out = _run(b, "verify", str(tmp_path / "g3" / "plan.json"), "--layer-table", str(tmp_path / "table.json"))
    assert rc == 1, out
    assert "11 of 34 layers differ from plan gemma_3_4b_it: 0, 5-6, 11-12, 17-18, 23-24, 29-30" in out, out
    assert "layer 5 (full_attention): base: engine 10000.0, plan 1000000.0" in out, out


def test_plan_json_report_carries_the_plan_verdict(tmp_path, b):
    """verify plan.json --format json with one type's output missing: exit 1 and a plan_summary
    that says FAIL with exactly that type's layers (the per-case summary alone read 1 passed, 0
    failed); the plan's folder verified as a folder gives the plan's verdict too (it exited 0);
    with both outputs, PASS and no failing layer. The report matches its schema."""
    jsonschema = pytest.importorskip("jsonschema")
    plan, cases = _gemma3_plan(tmp_path, b)
    schema = json.load(open(os.path.join(ROOT, "schemas", "verify-report.schema.json")))
    cases["sliding_attention"].write_outputs(str(tmp_path / "one"),
                                             ne.plan_hf(cases["sliding_attention"]))
    p = subprocess.run([b, "verify", str(tmp_path / "g3" / "plan.json"), "--actual",
                        str(tmp_path / "one"), "--profile", "fp32", "--format", "json"],
                       capture_output=True, text=True)
    assert p.returncode == 1, p.stdout + p.stderr
    rep = json.loads(p.stdout)
    jsonschema.validate(rep, schema)
    s = rep["plan_summary"]
    assert s["verdict"] == "FAIL" and s["layers_failing"] == [5, 11, 17, 23, 29], s
    assert {t["name"]: t["verdict"] for t in s["types"]} == {"sliding_attention": "PASS",
                                                            "full_attention": "NO OUTPUT"}, s
    # the folder (or its catalog.json) generate --config wrote is its plan: the same verdict
    for golden in (tmp_path / "g3", tmp_path / "g3" / "catalog.json"):
        rc, out = _run(b, "verify", str(golden), "--actual", str(tmp_path / "one"), "--profile",
                       "fp32")
        assert rc == 1, out
        assert "holds the cases of one plan" in out, out
        assert "1 layer type not passing (1 without output, which fails its layers)" in out, out
    cases["full_attention"].write_outputs(str(tmp_path / "one"), ne.plan_hf(cases["full_attention"]))
    p = subprocess.run([b, "verify", str(tmp_path / "g3" / "plan.json"), "--actual",
                        str(tmp_path / "one"), "--profile", "fp32", "--format", "json"],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    s = json.loads(p.stdout)["plan_summary"]
    assert s["verdict"] == "PASS" and s["layers_failing"] == [], s
