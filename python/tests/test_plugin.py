import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PKG = os.path.join(HERE, "..")
EXAMPLES = os.path.join(HERE, "..", "examples")

TEST_FILE = '''
import numpy as np
import posenc
import numpy_rope, wrong_ropes

@posenc.cases("rope_half_d96_r24_b1e4_neox_20b_[fb]*", profile="fp32")
def test_good(case):
    return numpy_rope.outputs_for(case)

@posenc.cases("rope_half_d96_r24_b1e4_neox_20b_f32", profile="fp32")
def test_writes_itself(case, posenc_out):
    case.write_outputs(posenc_out, numpy_rope.outputs_for(case))

@posenc.cases("rope_half_d96_r24_b1e4_neox_20b_f32", profile="fp32")
def test_off_by_one(case):
    return numpy_rope.outputs_for(case, wrong_ropes.rope_off_by_one)

@posenc.cases("rope_half_d96_r24_b1e4_neox_20b_f32", profile="bf16")
def test_not_applicable(case):
    return numpy_rope.outputs_for(case)
'''


def _env(binary):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([PKG, EXAMPLES, env.get("PYTHONPATH", "")])
    env["POSENC_BIN"] = binary
    return env


def test_plugin_in_process(pytester, binary, monkeypatch):
    monkeypatch.setenv("POSENC_BIN", binary)
    monkeypatch.syspath_prepend(EXAMPLES)
    pytester.makepyfile(test_engine=TEST_FILE)
    res = pytester.runpytest("-p", "posenc.pytest_plugin", "-rs")
    res.assert_outcomes(passed=4, failed=1, skipped=1)
    res.stdout.fnmatch_lines([
        "*test_off_by_one?rope_half_d96_r24_b1e4_neox_20b_f32?*",
        "*posenc verify --profile fp32:*",
        "*rope_half_d96_r24_b1e4_neox_20b_f32: FAIL (profile fp32)*",
        "*q_rot: FAIL worst * of budget * first_fail_position=0 worst=?token 0 (position 0)*",
        "*posenc diagnose: explained: fails fp32; the output has the rope mistake `offset`*",
        "*positions offset by +1 (fitted d = +1 of -4..+4, residual *",
    ])
    res.stdout.fnmatch_lines(["*profile 'bf16' does not apply*"])


def test_plugin_subprocess_lists_one_test_per_case(tmp_path, binary):
    (tmp_path / "test_engine.py").write_text(TEST_FILE)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "posenc.pytest_plugin", "-q",
                           "--collect-only", "-p", "no:cacheprovider", str(tmp_path)],
                          capture_output=True, text=True, env=_env(binary), cwd=str(tmp_path), timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = [l for l in proc.stdout.splitlines() if "::" in l]
    assert "test_engine.py::test_good[rope_half_d96_r24_b1e4_neox_20b_f32]" in lines
    assert "test_engine.py::test_good[rope_half_d96_r24_b1e4_neox_20b_bf16]" in lines
    assert "test_engine.py::test_good[rope_half_d96_r24_b1e4_neox_20b_f16]" in lines
    assert len(lines) == 6


def _run(tmp_path, binary, *extra):
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "posenc.pytest_plugin", "-q", "-rA",
                           "-p", "no:cacheprovider", *extra, str(tmp_path)],
                          capture_output=True, text=True, env=_env(binary), cwd=str(tmp_path),
                          timeout=180)


def test_plugin_unknown_pattern_fails_that_test_only(tmp_path, binary):
    """A pattern that matches nothing fails its own test, saying so; the other tests of the run
    still run and pass."""
    (tmp_path / "test_x.py").write_text(
        "import posenc, numpy_rope\n"
        "@posenc.cases('no_such_case_*')\ndef test_x(case):\n    return {}\n"
        "@posenc.cases('rope_half_d96_r24_b1e4_neox_20b_f32', profile='fp32')\n"
        "def test_y(case):\n    return numpy_rope.outputs_for(case)\n")
    proc = _run(tmp_path, binary)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "pattern='no_such_case_*' matches no case" in out
    assert "1 failed, 1 passed" in out, out
    assert "FAILED test_x.py::test_x[no-match]" in out, out


def test_plugin_data_per_decorator(tmp_path, binary):
    """Two catalogs in one session: the committed one and a folder `posenc generate` wrote, each
    named by its decorator's `data=`."""
    mine = tmp_path / "mine"
    subprocess.run([binary, "generate", "--scheme", "nope", "--out", str(mine)], check=True,
                   capture_output=True, timeout=120)
    tests = tmp_path / "t"
    tests.mkdir()
    (tests / "test_two.py").write_text(
        "import posenc, numpy_rope\n"
        f"@posenc.cases('nope_causal_*_f32', data={str(mine)!r})\n"
        "def test_mine(case):\n    assert case.manifest_path.startswith("
        f"{str(mine)!r}), case.manifest_path\n    return None\n"
        "@posenc.cases('rope_half_d96_r24_b1e4_neox_20b_f32', profile='fp32')\n"
        "def test_committed(case):\n    return numpy_rope.outputs_for(case)\n")
    proc = _run(tests, binary, "--collect-only")
    lines = [l for l in proc.stdout.splitlines() if "::" in l]
    assert "test_two.py::test_mine[nope_causal_h4_kv2_d64_t48_f32]" in lines, proc.stdout
    assert "test_two.py::test_committed[rope_half_d96_r24_b1e4_neox_20b_f32]" in lines
    assert len(lines) == 2, lines
    # test_mine returns nothing and writes nothing: it fails for that reason, from its own folder
    proc = _run(tests, binary)
    out = proc.stdout + proc.stderr
    assert "1 failed, 1 passed" in out, out
    assert "returned nothing and wrote no output" in out, out


def test_plugin_globs_leave_controls_out_unless_asked(tmp_path, binary):
    """A glob over a scheme's cases collects no negative control; controls=True, result='invalid'
    or the control's exact id collect them; a glob that matches only controls fails saying so."""
    with open(os.path.join(HERE, "..", "..", "golden", "data", "catalog.json")) as f:
        entries = [e for e in json.load(f)["cases"] if e["id"].startswith("rope_scaling_")]
    controls = [e["id"] for e in entries if e.get("result") == "invalid"]
    assert controls, "the catalog has rope_scaling controls"
    n_valid = len(entries) - len(controls)
    (tmp_path / "test_c.py").write_text(
        "import posenc\n"
        "@posenc.cases('rope_scaling_*')\ndef test_glob(case):\n    return {}\n"
        "@posenc.cases('rope_scaling_*', controls=True)\ndef test_with(case):\n    return {}\n"
        "@posenc.cases('rope_scaling_*', result='invalid')\ndef test_only(case):\n    return {}\n"
        f"@posenc.cases({controls[0]!r})\ndef test_named(case):\n    return {{}}\n"
        f"@posenc.cases({controls[0][:-3] + '*'!r})\ndef test_ctl_glob(case):\n    return {{}}\n")
    proc = _run(tmp_path, binary, "--collect-only")
    lines = [l for l in proc.stdout.splitlines() if "::" in l]
    glob = [l for l in lines if "::test_glob[" in l]
    assert len(glob) == n_valid and not any(c in l for l in glob for c in controls), glob[:5]
    assert len([l for l in lines if "::test_with[" in l]) == n_valid + len(controls)
    assert len([l for l in lines if "::test_only[" in l]) == len(controls)
    assert f"test_c.py::test_named[{controls[0]}]" in lines
    assert "test_c.py::test_ctl_glob[no-match]" in lines, lines[-3:]
    proc = _run(tmp_path, binary, "-k", "test_ctl_glob")
    assert "but negative controls (1); pass controls=True or result='invalid'" in proc.stdout, \
        proc.stdout


PLAN_TEST = '''
import json, os
import posenc
import numpy_engines as ne

PLAN = os.environ["G3_PLAN"]
KEYS = ["rope", "base", "scaling", "mask", "window", "chunk", "temperature", "sinks", "qk_norm"]


def engine_type(i, wrong):
    """The engine's layer type: Gemma 3's rule (i + 1) % 6 == 0, or i % 6 == 0 when wrong."""
    return "full_attention" if (i % 6 == 0 if wrong else (i + 1) % 6 == 0) else "sliding_attention"


def table(wrong):
    plan = json.load(open(PLAN))
    by_type = {}
    for l in plan["layers"]:
        by_type.setdefault(l["type"], {k: l[k] for k in KEYS})
    return {"schema": "posenc-layer-table",
            "layers": [dict(index=i, **by_type[engine_type(i, wrong)]) for i in range(34)]}


@posenc.plan(PLAN, profile="fp32", layer_table=lambda: table(False))
def test_right(case, layer):
    assert case.id == layer["case"], (case.id, layer)  # each layer gets its own type's case
    return ne.plan_hf(case)


@posenc.plan(PLAN, profile="fp32", layer_table=lambda: table(True))
def test_pattern_off_by_one(case, layer):
    wrong = engine_type(layer["index"], True) != layer["type"]
    return ne.plan_hf(case, bug="other_type" if wrong else None)
'''


def test_plugin_plan_one_test_per_layer(tmp_path, binary):
    """@posenc.plan on Gemma 3's plan: 34 layer tests and the layer-table test. The right engine
    passes all 35; the engine with the layer pattern off by one fails exactly its 11 wrong layers
    (named by index) and the layer table."""
    g3 = tmp_path / "g3"
    subprocess.run([binary, "generate", "--config",
                    os.path.join(HERE, "..", "..", "golden", "presets", "gemma-3-4b-it.json"),
                    "--out", str(g3)], check=True, capture_output=True, timeout=300)
    tests = tmp_path / "t"
    tests.mkdir()
    (tests / "test_g3.py").write_text(PLAN_TEST)
    env = _env(binary)
    env["G3_PLAN"] = str(g3 / "plan.json")
    env["PYTHONPATH"] = os.pathsep.join([HERE, env["PYTHONPATH"]])
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "posenc.pytest_plugin", "-q", "-rf",
                           "-p", "no:cacheprovider", str(tests)],
                          capture_output=True, text=True, env=env, cwd=str(tests), timeout=600)
    out = proc.stdout + proc.stderr
    assert "12 failed, 58 passed" in out, out[-3000:]
    failed = sorted(l.split("[")[1].split("]")[0] for l in out.splitlines()
                    if l.startswith("FAILED test_g3.py::test_pattern_off_by_one["))
    assert failed == ["layer-00", "layer-05", "layer-06", "layer-11", "layer-12", "layer-17",
                      "layer-18", "layer-23", "layer-24", "layer-29", "layer-30",
                      "layer-table"], failed
    assert not any("::test_right[" in l for l in out.splitlines() if l.startswith("FAILED")), out
    assert "layer 5 (full_attention): posenc verify --profile fp32:" in out, out
    assert "11 of 34 layers differ from plan gemma_3_4b_it" in out, out
