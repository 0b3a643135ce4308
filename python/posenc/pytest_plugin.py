"""pytest plugin: one test per posenc golden case.

    import posenc

    @posenc.cases("rope_half_*_f32", profile="fp32")
    def test_my_rope(case):
        return {"q_rot": my_rope(case.inputs["q"], case.inputs["positions"])}

Each matching catalog case becomes a test (its id is the case id). The test returns its outputs
({expected name: array}) or writes them itself with case.write_outputs(posenc_out, ...) when it
takes the `posenc_out` fixture (a fresh folder) and returns None. The outputs are checked by
`posenc verify --format json`; a failure shows verify's worst element, its position and the
profile, then `posenc diagnose`'s answer in words (which known mistake or pipeline explains the
output, with the fitted value: "positions offset by +1"). Cases whose tensors the profile does not apply to are skipped.

Enable it with the `pytest11` entry point (pip install), `-p posenc.pytest_plugin`, or
`pytest_plugins = ["posenc.pytest_plugin"]` in a conftest. Options: --posenc-bin (else
$POSENC_BIN, else posenc on PATH), --posenc-data (else $POSENC_DATA, else the source tree's
golden/data), --posenc-profile (overrides every decorator's profile).
"""
import functools
import inspect
import os
import tempfile
import shutil

import pytest

from .case import find_cases, default_data_dir
from .verify import verify, diagnose, PosencError

_MARK = "posenc_cases"
_settings = {"bin": None, "data": None, "profile": None}


def pytest_addoption(parser):
    g = parser.getgroup("posenc")
    g.addoption("--posenc-bin", default=None, help="the posenc binary (default $POSENC_BIN or PATH)")
    g.addoption("--posenc-data", default=None, help="the golden catalog folder (default $POSENC_DATA)")
    g.addoption("--posenc-profile", default=None, help="profile for every posenc test")


def pytest_configure(config):
    config.addinivalue_line("markers", f"{_MARK}(pattern, ...): one test per matching posenc case")
    _settings["bin"] = config.getoption("posenc_bin", None)
    _settings["data"] = config.getoption("posenc_data", None)
    _settings["profile"] = config.getoption("posenc_profile", None)


def _applicable(case, profile):
    key = "fp32" if profile == "fp32-angles" else profile
    for spec in case.expected.values():
        p = spec.check.get("profiles", {}).get(key)
        if p is not None and "not_applicable" not in p:
            return True
    return False


def pytest_generate_tests(metafunc):
    mark = metafunc.definition.get_closest_marker(_MARK)
    if mark is None or "case" not in metafunc.fixturenames:
        return
    opts = mark.kwargs
    data = opts.get("data_dir") or _settings["data"] or default_data_dir()
    found = find_cases(opts["pattern"], data_dir=data, scheme=opts.get("scheme"),
                       result=opts.get("result"))
    if not found:
        raise pytest.UsageError(f"posenc.cases: pattern={opts['pattern']!r} matches no case in "
                                f"{data!r}")
    metafunc.parametrize("case", found, ids=[c.id for c in found])


def _diagnosis_text(case, out, profile, binary):
    """`posenc diagnose` of a failing case in words: the verdict, the answer, the best
    hypotheses (with a fitted value where there is one). Never raises: a diagnosis that cannot
    run says why."""
    try:
        found = [d for d in diagnose(case, out, profile=profile, posenc=binary)
                 if d.get("id") == case.id]
    except (PosencError, ValueError, OSError) as e:
        return f"posenc diagnose could not run: {e}"
    if not found:
        return "posenc diagnose: no diagnosis for this case"
    d = found[0]
    lines = [f"posenc diagnose: {d['verdict']}: {d['summary']}"]
    for i, h in enumerate(d.get("hypotheses", [])[:3]):
        res = h["residual"]
        res = f"{res:.3g}" if isinstance(res, (int, float)) else res
        what = h.get("fit", {}).get("words") or h["words"]
        lines.append(f"  {i + 1}. residual {res} ({'confirmed' if h['confirmed'] else 'no'}): {what}")
    return "\n".join(lines)


def cases(pattern="*", profile="strict", data_dir=None, scheme=None, result=None, posenc=None):
    """Decorator: parametrize a test over the catalog cases matching the glob `pattern` and
    verify what it returns (or writes into `posenc_out`) under `profile`."""
    if not isinstance(pattern, str) or not pattern:
        raise ValueError(f"posenc.cases: pattern={pattern!r} must be a non-empty glob string")

    def decorate(fn):
        wants_out = "posenc_out" in inspect.signature(fn).parameters

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            case = kwargs.get("case")
            if case is None:
                raise TypeError(f"posenc.cases: test {fn.__name__} must take a `case` argument")
            prof = _settings["profile"] or profile
            if not _applicable(case, prof):
                pytest.skip(f"profile {prof!r} does not apply to any tensor of {case.id}")
            out = kwargs.get("posenc_out") if wants_out else tempfile.mkdtemp(prefix="posenc_out_")
            try:
                returned = fn(*args, **kwargs)
                if returned is not None:
                    if not isinstance(returned, dict):
                        raise TypeError(f"posenc.cases: test {fn.__name__} returned "
                                        f"{type(returned).__name__}; return {{name: array}} or None")
                    case.write_outputs(out, returned)
                elif not os.path.exists(os.path.join(out, case.id + ".safetensors")) and \
                        not os.path.isdir(os.path.join(out, case.id)):
                    pytest.fail(f"{case.id}: the test returned nothing and wrote no output in "
                                f"{out} (return {{name: array}} or call case.write_outputs(posenc_out, ...))",
                                pytrace=False)
                binary = posenc or _settings["bin"] or "posenc"
                try:
                    res = verify(case, out, profile=prof, posenc=binary)
                except PosencError as e:
                    pytest.fail(f"{case.id}: posenc verify could not judge the output: {e}",
                                pytrace=False)
                cr = res.case(case.id)
                if cr.inconclusive:  # neither a pass nor a failure: say which stages would tell
                    pytest.skip(f"{case.id}: INCONCLUSIVE under {prof}: {cr.get('message', '')}")
                if not res.passed:
                    pytest.fail(f"posenc verify --profile {prof}:\n{cr.describe()}\n"
                                f"{_diagnosis_text(case, out, prof, binary)}", pytrace=False)
                return None
            finally:
                if not wants_out:
                    shutil.rmtree(out, ignore_errors=True)

        opts = dict(pattern=pattern, data_dir=data_dir, scheme=scheme, result=result)
        return getattr(pytest.mark, _MARK)(**opts)(wrapper)

    return decorate


@pytest.fixture
def posenc_out(tmp_path):
    """A fresh folder for case.write_outputs in a @posenc.cases test."""
    d = tmp_path / "posenc_out"
    d.mkdir()
    return str(d)
