"""pytest plugin: one test per posenc golden case.

    import posenc

    @posenc.cases("rope_half_*_f32", profile="fp32")
    def test_my_rope(case):
        return {"q_rot": my_rope(case.inputs["q"], case.inputs["positions"])}

Each matching catalog case becomes a test (its id is the case id). A glob leaves out the
negative controls (result "invalid": their tensors are a known-wrong convention the engine must
differ from) unless `controls=True` or `result="invalid"` asks for them, or the pattern names one
case exactly. Each decorator may name its own catalog folder (`data=DIR`, e.g. the output of
`posenc generate --config`), so several catalogs are tested in one session. A pattern that
matches nothing fails that test alone ("matches no case"), not the run. The test returns its
outputs
({expected name: array}) or writes them itself with case.write_outputs(posenc_out, ...) when it
takes the `posenc_out` fixture (a fresh folder) and returns None. The outputs are checked by
`posenc verify --format json`; a failure shows verify's worst element, its position and the
profile, then `posenc diagnose`'s answer in words (which known mistake or pipeline explains the
output, with the fitted value: "positions offset by +1"). Cases whose tensors the profile does not apply to are skipped.

A model's plan (plan.json of `posenc generate --config`) gives one test per layer:

    @posenc.plan("gemma3/plan.json", profile="fp32", layer_table="engine_layers.json")
    def test_layer(case, layer):      # layer: plan.json's entry (index, type, rope, base, ...)
        return my_attention_layer(layer["index"], case.inputs)

Each layer runs on its type's case and is verified against it (test id `layer-NN`), so a layer
your engine treats as the wrong type fails by its index; with `layer_table` (a path, or a
callable returning the engine's table as a dict) one more test, `layer-table`, checks the
engine's per-layer table against plan.json (`posenc verify plan.json --layer-table`).

Enable it with the `pytest11` entry point (pip install), `-p posenc.pytest_plugin`, or
`pytest_plugins = ["posenc.pytest_plugin"]` in a conftest. Options: --posenc-bin (else
$POSENC_BIN, else posenc on PATH), --posenc-data (else $POSENC_DATA, else the source tree's
golden/data; a decorator's `data=` comes first), --posenc-profile (overrides every decorator's
profile).
"""
import functools
import inspect
import json
import os
import subprocess
import tempfile
import shutil

import pytest

from .case import find_cases, default_data_dir
from .verify import verify, diagnose, find_binary, PosencError

_MARK = "posenc_cases"
_GLOB = set("*?[")


class _NoMatch:
    """The one parameter of a decorator whose pattern matches no case: its test fails with why."""

    def __init__(self, message):
        self.message = message
        self.id = "no-match"
_settings = {"bin": None, "data": None, "profile": None}


def pytest_addoption(parser):
    g = parser.getgroup("posenc")
    g.addoption("--posenc-bin", default=None, help="the posenc binary (default $POSENC_BIN or PATH)")
    g.addoption("--posenc-data", default=None, help="the golden catalog folder (default $POSENC_DATA)")
    g.addoption("--posenc-profile", default=None, help="profile for every posenc test")


_PLAN_MARK = "posenc_plan"
_LAYER_TABLE = "layer-table"


def pytest_configure(config):
    config.addinivalue_line("markers", f"{_MARK}(pattern, ...): one test per matching posenc case")
    config.addinivalue_line("markers", f"{_PLAN_MARK}(plan, ...): one test per layer of a plan")
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


def _plan_params(metafunc, mark):
    """(case, layer) per layer of the plan, plus the layer-table check when asked for."""
    from .case import Case
    path = mark.kwargs["plan"]
    try:
        with open(path, encoding="utf-8") as f:
            plan = json.load(f)
        by_type = {t["name"]: t for t in plan["types"]}
        folder = os.path.dirname(os.path.abspath(path))
        cases = {n: Case(os.path.join(folder, t["manifest"])) for n, t in by_type.items()}
        params = [(cases[l["type"]], l) for l in plan["layers"]]
    except (OSError, ValueError, KeyError, TypeError) as e:
        metafunc.parametrize(("case", "layer"), [(_NoMatch(f"posenc.plan: cannot read the plan "
                                                           f"{path!r}: {e}"), None)],
                             ids=["no-plan"])
        return
    width = 3 if len(params) > 100 else 2
    ids = [f"layer-{l['index']:0{width}d}" for _, l in params]
    if mark.kwargs.get("layer_table") is not None:
        params.append((None, _LAYER_TABLE))
        ids.append(_LAYER_TABLE)
    metafunc.parametrize(("case", "layer"), params, ids=ids)


def pytest_generate_tests(metafunc):
    plan_mark = metafunc.definition.get_closest_marker(_PLAN_MARK)
    if plan_mark is not None and {"case", "layer"} <= set(metafunc.fixturenames):
        _plan_params(metafunc, plan_mark)
        return
    mark = metafunc.definition.get_closest_marker(_MARK)
    if mark is None or "case" not in metafunc.fixturenames:
        return
    opts = mark.kwargs
    data = opts.get("data_dir") or _settings["data"] or default_data_dir()
    pattern, result = opts["pattern"], opts.get("result")
    try:
        found = find_cases(pattern, data_dir=data, scheme=opts.get("scheme"), result=result)
    except (OSError, ValueError) as e:  # no catalog there, or an unreadable one
        found, why = [], f"posenc.cases: cannot read the catalog in {data!r}: {e}"
    else:
        why = f"posenc.cases: pattern={pattern!r} matches no case in {data!r}"
    n_all = len(found)
    if result is None and not opts.get("controls") and _GLOB & set(pattern):
        found = [c for c in found if c.result != "invalid"]
        if n_all and not found:
            why += (f" but negative controls ({n_all}); pass controls=True or result='invalid' "
                    f"to test them")
    if not found:
        metafunc.parametrize("case", [_NoMatch(why)], ids=["no-match"])
        return
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


def cases(pattern="*", profile="strict", data=None, scheme=None, result=None, posenc=None,
          controls=False, data_dir=None):
    """Decorator: parametrize a test over the cases of the catalog folder `data` (default
    --posenc-data, $POSENC_DATA, the source tree's golden/data) matching the glob `pattern`, and
    verify what it returns (or writes into `posenc_out`) under `profile`. A glob leaves out the
    negative controls unless `controls=True` or `result="invalid"`; `data_dir` is the older name
    of `data`."""
    if not isinstance(pattern, str) or not pattern:
        raise ValueError(f"posenc.cases: pattern={pattern!r} must be a non-empty glob string")
    if data is not None and data_dir is not None and data != data_dir:
        raise ValueError(f"posenc.cases: data={data!r} and data_dir={data_dir!r} disagree; "
                         f"give one")
    data_dir = data if data is not None else data_dir

    def decorate(fn):
        wants_out = "posenc_out" in inspect.signature(fn).parameters

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            case = kwargs.get("case")
            if case is None:
                raise TypeError(f"posenc.cases: test {fn.__name__} must take a `case` argument")
            if isinstance(case, _NoMatch):
                pytest.fail(case.message, pytrace=False)
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

        opts = dict(pattern=pattern, data_dir=data_dir, scheme=scheme, result=result,
                    controls=controls)
        return getattr(pytest.mark, _MARK)(**opts)(wrapper)

    return decorate


def _check_layer_table(plan_path, table, binary):
    """Fails the test unless `posenc verify PLAN --layer-table T` says every layer is as the
    plan says (exit 0); the table is a path or a callable returning the table's dict."""
    tmp = None
    try:
        if callable(table):
            got = table()
            if not isinstance(got, dict):
                pytest.fail(f"posenc.plan: layer_table() returned {type(got).__name__}, not the "
                            f"table's dict", pytrace=False)
            fd, tmp = tempfile.mkstemp(prefix="posenc_layer_table_", suffix=".json")
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(got, f)
            table = tmp
        cmd = [find_binary(binary), "verify", str(plan_path), "--layer-table", str(table)]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        if proc.returncode != 0:
            pytest.fail(f"{' '.join(cmd)}: exit {proc.returncode}\n"
                        f"{(proc.stdout + proc.stderr).strip()}", pytrace=False)
    finally:
        if tmp:
            os.unlink(tmp)


def plan(plan_path, profile="strict", layer_table=None, posenc=None):
    """Decorator: one test per layer of the plan manifest `plan_path` (plan.json): the test takes
    `case` (its layer type's case) and `layer` (plan.json's entry for the layer) and returns that
    layer's outputs on the case's inputs (or writes them into `posenc_out`); each is verified
    against the case under `profile`. `layer_table` (a path or a callable returning a dict) adds
    the `layer-table` test: the engine's table checked against the plan, layer by layer."""
    if not isinstance(plan_path, (str, os.PathLike)) or not str(plan_path):
        raise ValueError(f"posenc.plan: plan_path={plan_path!r} must be the path of a plan.json")

    def decorate(fn):
        params = inspect.signature(fn).parameters
        if "case" not in params or "layer" not in params:
            raise TypeError(f"posenc.plan: test {fn.__name__} must take `case` and `layer`")
        checked = cases(profile=profile, posenc=posenc)(fn)  # the per-case verification

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            layer = kwargs.get("layer")
            if layer == _LAYER_TABLE:
                _check_layer_table(plan_path, layer_table, posenc or _settings["bin"] or "posenc")
                return None
            try:
                return checked(*args, **kwargs)
            except pytest.fail.Exception as e:  # name the layer first
                index = layer.get("index") if isinstance(layer, dict) else None
                if index is None:
                    raise
                pytest.fail(f"layer {index} ({layer.get('type')}): {e.msg}", pytrace=False)

        return getattr(pytest.mark, _PLAN_MARK)(plan=str(plan_path),
                                                layer_table=layer_table)(wrapper)

    return decorate


@pytest.fixture
def posenc_out(tmp_path):
    """A fresh folder for case.write_outputs in a @posenc.cases test."""
    d = tmp_path / "posenc_out"
    d.mkdir()
    return str(d)
