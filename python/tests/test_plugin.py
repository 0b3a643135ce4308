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


def test_plugin_unknown_pattern_is_a_usage_error(tmp_path, binary):
    (tmp_path / "test_x.py").write_text(
        "import posenc\n@posenc.cases('no_such_case_*')\ndef test_x(case):\n    return {}\n")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "posenc.pytest_plugin", "-q",
                           "-p", "no:cacheprovider", str(tmp_path)],
                          capture_output=True, text=True, env=_env(binary), cwd=str(tmp_path), timeout=120)
    assert proc.returncode != 0
    assert "pattern='no_such_case_*' matches no case" in proc.stdout + proc.stderr
