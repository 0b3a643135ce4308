"""The JSON reports of `posenc verify`, `posenc check` and `posenc diagnose` against the JSON
Schemas in schemas/ (Debian's python3-jsonschema): every kind of report posenc writes, and the
schemas shown to reject a report that breaks them."""
import copy
import json
import os
import subprocess

import jsonschema
import pytest

from conftest import F32

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
DATA = os.path.join(ROOT, "golden", "data")
KV = "kv_cache_rope_window8_ring_wrap_f32"


def schema(name):
    with open(os.path.join(ROOT, "schemas", name)) as f:
        s = json.load(f)
    jsonschema.Draft202012Validator.check_schema(s)
    return s


def run_json(binary, *args, codes=(0, 1)):
    p = subprocess.run([binary, *args, "--format", "json"], capture_output=True, text=True)
    assert p.returncode in codes, p.stderr
    return json.loads(p.stdout)


@pytest.fixture
def outputs(binary, tmp_path):
    """A correct engine's and a wrong engine's outputs for a RoPE case and a KV-cache trace."""
    out = {}
    for name, case, mistake in [("good", F32, None), ("offset", F32, "offset"),
                                ("kv_good", KV, None), ("kv_bad", KV, "cache-length-position")]:
        path = tmp_path / f"{name}.safetensors"
        cmd = [binary, "engine", case, "--out", str(path)]
        if mistake:
            cmd += ["--mistake", mistake]
        subprocess.run(cmd, check=True, capture_output=True)
        out[name] = str(path)
    return out


def manifest(case):
    scheme = "kv_cache" if case.startswith("kv_cache") else "rope"
    return os.path.join(DATA, scheme, case + ".json")


def no_nonfinite_text(j, path=""):
    """A number is a number or null, never the text inf / -inf / nan (that only as the value of
    KEY_nonfinite beside a null KEY)."""
    if isinstance(j, dict):
        for k, v in j.items():
            if k.endswith("_nonfinite"):
                assert j.get(k[:-len("_nonfinite")], 0) is None, (path, k, j)
            else:
                no_nonfinite_text(v, f"{path}/{k}")
    elif isinstance(j, list):
        for i, v in enumerate(j):
            no_nonfinite_text(v, f"{path}/{i}")
    else:
        assert j not in ("inf", "-inf", "nan"), (path, j)


def test_verify_reports_follow_the_schema(binary, outputs, tmp_path):
    s = schema("verify-report.schema.json")
    reports = [
        run_json(binary, "verify", manifest(F32), "--actual", outputs["good"]),
        run_json(binary, "verify", manifest(F32), "--actual", outputs["offset"], "--by-position"),
        run_json(binary, "verify", manifest(F32), "--actual", outputs["good"], "--profile", "bf16",
                 codes=(0, 1, 2)),
        run_json(binary, "verify", manifest(KV), "--actual", outputs["kv_bad"]),
        run_json(binary, "verify", manifest(KV), "--actual", outputs["kv_good"]),
    ]
    # A catalog with one output: every other case is NO OUTPUT.
    d = tmp_path / "dir"
    d.mkdir()
    os.link(outputs["good"], d / f"{F32}.safetensors")
    reports.append(run_json(binary, "verify", DATA, "--actual", str(d)))
    reports.append(run_json(binary, "check", "--scheme", "t5_bias"))
    for r in reports:
        jsonschema.validate(r, s)
        no_nonfinite_text(r)
    assert any("ratio_nonfinite" in t for r in reports for c in r["cases"] for t in c["tensors"])
    statuses = {c["status"] for r in reports for c in r["cases"]}
    assert {"PASS", "FAIL", "NO OUTPUT"} <= statuses, statuses
    assert any("trace" in c for r in reports for c in r["cases"])
    assert any("by_position" in t for r in reports for c in r["cases"] for t in c["tensors"])


def test_diagnose_reports_follow_the_schema(binary, outputs):
    s = schema("diagnose-report.schema.json")
    for name, profile in [("offset", "strict"), ("good", "strict"), ("kv_bad", "fp32")]:
        case = KV if name.startswith("kv") else F32
        r = run_json(binary, "diagnose", manifest(case), "--actual", outputs[name], "--profile",
                     profile)
        jsonschema.validate(r, s)
        no_nonfinite_text(r)
        assert r["cases"] and r["cases"][0]["verdict"] in ("correct", "explained"), r
        if name == "offset":  # the fitted offset rides on the `offset` hypothesis
            fits = [h["fit"] for h in r["cases"][0]["hypotheses"] if "fit" in h]
            assert any(f["parameter"] == "offset" and f["value"] == "+1" for f in fits), r


def test_the_schemas_reject_broken_reports(binary, outputs):
    s = schema("verify-report.schema.json")
    good = run_json(binary, "verify", manifest(F32), "--actual", outputs["offset"])
    for breakage in ("drop_status", "unknown_status", "extra_key", "ratio_text", "ratio_inf_text",
                     "null_without_flag", "flag_beside_a_number"):
        bad = copy.deepcopy(good)
        t = bad["cases"][0]["tensors"][0]
        if breakage == "drop_status":
            del t["status"]
        elif breakage == "unknown_status":
            t["status"] = "OK"
        elif breakage == "extra_key":
            t["max_err"] = 1.0
        elif breakage == "ratio_inf_text":
            t["ratio"] = "inf"
        elif breakage == "null_without_flag":
            t["ratio"] = None
            t.pop("ratio_nonfinite", None)
        elif breakage == "flag_beside_a_number":
            t["ratio"] = 1.0
            t["ratio_nonfinite"] = "inf"
        else:
            t["ratio"] = "big"
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, s)
    d = schema("diagnose-report.schema.json")
    r = run_json(binary, "diagnose", manifest(F32), "--actual", outputs["offset"])
    fitted = copy.deepcopy(r)
    r["cases"][0]["verdict"] = "probably fine"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(r, d)
    for h in fitted["cases"][0]["hypotheses"]:
        if "fit" in h:
            h["fit"]["value"] = 1  # a number where the schema says a string
            break
    else:
        pytest.fail("no fitted hypothesis in the offset diagnosis")
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(fitted, d)


def test_plan_manifest_follows_the_schema(binary, tmp_path):
    """plan.json of `generate --config` on a model with several layer types (Gemma 3 4B, Llama 4
    Scout: NoPE with a temperature, chunks) follows schemas/plan.schema.json, which rejects a
    layer without its case and an unknown mask."""
    s = schema("plan.schema.json")
    for preset in ("gemma-3-4b-it", "llama-4-scout-17b-16e-instruct"):
        out = tmp_path / preset
        subprocess.run([binary, "generate", "--config", os.path.join(ROOT, "golden", "presets", preset + ".json"),
                        "--out", str(out)], check=True, capture_output=True)
        with open(out / "plan.json") as f:
            plan = json.load(f)
        jsonschema.validate(plan, s)
        assert len(plan["layers"]) == plan["n_layers"]
        assert {l["case"] for l in plan["layers"]} == {t["case"] for t in plan["types"]}
    bad = copy.deepcopy(plan)
    del bad["layers"][0]["case"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, s)
    bad = copy.deepcopy(plan)
    bad["types"][0]["type"]["mask"] = "banded"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, s)
    # an engine's layer table in the plan's machine form (schemas/layer_table.schema.json)
    t = schema("layer_table.schema.json")
    resolver = jsonschema.RefResolver.from_schema(t, store={s["$id"]: s})
    keys = ["rope", "base", "scaling", "mask", "window", "chunk", "temperature", "sinks", "qk_norm"]
    table = {"schema": "posenc-layer-table",
             "layers": [dict(index=l["index"], **{k: l[k] for k in keys}) for l in plan["layers"]]}
    jsonschema.validate(table, t, resolver=resolver)
    table["layers"][1]["rotary"] = True
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(table, t, resolver=resolver)
