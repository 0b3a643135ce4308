"""Run `posenc verify --format json` and return its result as Python objects."""
import glob as _glob
import json
import os
import shutil
import subprocess

from .case import Case, default_data_dir, case_ids, _catalog


def _nonfinite_back(obj):
    """posenc's JSON writes a non-finite number KEY as null with KEY_nonfinite "inf", "-inf" or
    "nan" beside it: put float('inf') etc. back in KEY (in place, at every depth)."""
    if isinstance(obj, dict):
        for key, value in list(obj.items()):
            if key.endswith("_nonfinite") and value in ("inf", "-inf", "nan"):
                obj[key[:-len("_nonfinite")]] = float(value)
            else:
                _nonfinite_back(value)
    elif isinstance(obj, list):
        for value in obj:
            _nonfinite_back(value)
    return obj


class PosencError(RuntimeError):
    """posenc exited 2 (usage or input error) or could not be run."""


def find_binary(posenc="posenc"):
    """The posenc executable: $POSENC_BIN, else `posenc` (a path or a name on PATH)."""
    env = os.environ.get("POSENC_BIN")
    candidates = [env] if env and posenc == "posenc" else []
    candidates.append(posenc)
    for c in candidates:
        if os.path.sep in c and os.access(c, os.X_OK):
            return os.path.abspath(c)
        found = shutil.which(c)
        if found:
            return found
    raise PosencError(f"verify: posenc={posenc!r} not found (tried {candidates}); put the posenc "
                      f"binary on PATH, set POSENC_BIN, or pass posenc='/path/to/posenc'")


class TensorResult(dict):
    """One checked tensor: a dict of verify's JSON (name, status, ratio, worst, first_fail_position,
    passes_up_to_position, n_over, ...) with attribute access for the common keys."""
    name = property(lambda self: self.get("name"))
    status = property(lambda self: self.get("status"))
    ratio = property(lambda self: self.get("ratio"))
    worst = property(lambda self: self.get("worst") or {})
    first_fail_position = property(lambda self: self.get("first_fail_position"))
    passes_up_to_position = property(lambda self: self.get("passes_up_to_position"))

    def describe(self):
        w = self.worst
        r = self.ratio
        r = f"{r:.3g}" if isinstance(r, (int, float)) else str(r)
        s = f"{self.name}: {self.status} worst {r} of budget"
        if self.get("n") is not None:
            s += f" over={self.get('n_over')}/{self.get('n')}"
        if self.first_fail_position is not None:
            s += f" first_fail_position={self.first_fail_position}"
        if w.get("where"):
            s += (f" worst=[{w['where']}] exact={w.get('exact')!r} actual={w.get('actual')!r}"
                  f" budget={w.get('budget')!r}")
        if self.get("message"):
            s += f" ({self.get('message')})"
        return s


class CaseResult(dict):
    """One case of verify's JSON: id, status (PASS, FAIL, INCONCLUSIVE, NO OUTPUT, ...), profile,
    tensors, notes. A negative control whose given stages cannot tell its right convention from
    the known-wrong one is INCONCLUSIVE (neither passed nor failed); telling_stages names the
    stages that would tell."""
    id = property(lambda self: self.get("id"))
    status = property(lambda self: self.get("status"))
    profile = property(lambda self: self.get("profile"))
    passed = property(lambda self: self.get("status") == "PASS")
    failed = property(lambda self: self.get("status") == "FAIL")
    inconclusive = property(lambda self: self.get("status") == "INCONCLUSIVE")
    telling_stages = property(lambda self: list(self.get("telling_stages", [])))

    @property
    def tensors(self):
        return [TensorResult(t) for t in self.get("tensors", [])]

    def tensor(self, name):
        for t in self.tensors:
            if t.name == name:
                return t
        raise KeyError(f"CaseResult.tensor: name={name!r} not checked in case {self.id!r} "
                       f"(checked: {[t.name for t in self.tensors]})")

    def describe(self):
        lines = [f"{self.id}: {self.status} (profile {self.profile})"]
        if self.get("message"):
            lines.append("  " + self["message"])
        lines += ["  " + t.describe() for t in self.tensors]
        lines += ["  note: " + n for n in self.get("notes", [])]
        return "\n".join(lines)


class VerifyResult:
    """`cases` (CaseResult list, only the cases that had output unless include_missing),
    `summary`, `profile`, `returncode`, `raw` (the whole JSON), `passed` (returncode 0),
    `inconclusive` (the INCONCLUSIVE cases; returncode 3 when nothing else was judged)."""

    def __init__(self, raw, returncode, command):
        self.raw = _nonfinite_back(raw)
        self.returncode = returncode
        self.command = command
        self.profile = raw.get("profile")
        self.summary = raw.get("summary", {})
        self.all_cases = [CaseResult(c) for c in raw.get("cases", [])]
        self.cases = [c for c in self.all_cases if c.status != "NO OUTPUT"]

    @property
    def passed(self):
        return self.returncode == 0

    @property
    def inconclusive(self):
        return [c for c in self.cases if c.inconclusive]

    def case(self, case_id):
        for c in self.all_cases:
            if c.id == case_id:
                return c
        raise KeyError(f"VerifyResult.case: case_id={case_id!r} not in the result "
                       f"(cases: {[c.id for c in self.cases]})")

    def describe(self):
        return "\n".join(c.describe() for c in self.cases) + f"\nsummary: {self.summary}"

    def __repr__(self):
        return f"VerifyResult(profile={self.profile!r}, returncode={self.returncode}, summary={self.summary})"


def _golden_args(case_or_glob, data_dir):
    if isinstance(case_or_glob, Case):
        return [case_or_glob.manifest_path]
    if isinstance(case_or_glob, (list, tuple)):
        out = []
        for c in case_or_glob:
            out += _golden_args(c, data_dir)
        return out
    s = str(case_or_glob)
    if os.path.exists(s):
        return [s]
    d = data_dir or default_data_dir()
    by_id = {e["id"]: e for e in _catalog(d)}
    ids = case_ids(s, d)
    if not ids:
        files = sorted(_glob.glob(s))
        if files:
            return files
        raise ValueError(f"verify: case_or_glob={s!r} matches no case of the catalog in {d!r} "
                         f"and no file")
    return [os.path.join(d, by_id[i]["manifest"]) for i in ids]


def verify(case_or_glob, outputs_dir, profile="strict", posenc="posenc", data_dir=None,
           extra_args=(), timeout=600):
    """Runs `posenc verify GOLDEN... --actual OUTPUTS_DIR --profile PROFILE --format json`.

    case_or_glob: a Case, a manifest or folder path, a case id or glob over catalog ids
    ("rope_*"), or a list of these. Returns a VerifyResult; raises PosencError when posenc exits
    2 (input error) or prints no JSON. Exit 1 (a mismatch) and exit 3 (nothing judged but
    INCONCLUSIVE negative controls) are results, not exceptions."""
    binary = find_binary(posenc)
    if not os.path.isdir(outputs_dir) and not os.path.isfile(outputs_dir):
        raise ValueError(f"verify: outputs_dir={outputs_dir!r} does not exist")
    cmd = ([binary, "verify"] + _golden_args(case_or_glob, data_dir)
           + ["--actual", str(outputs_dir), "--profile", profile, "--format", "json"]
           + list(extra_args))
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if proc.returncode not in (0, 1, 3):
        raise PosencError(f"verify: posenc exited {proc.returncode}: "
                          f"{(proc.stderr or proc.stdout).strip()}\ncommand: {' '.join(cmd)}")
    try:
        raw = json.loads(proc.stdout)
    except json.JSONDecodeError as e:
        raise PosencError(f"verify: posenc printed no JSON ({e}); stderr: {proc.stderr.strip()}"
                          f"\ncommand: {' '.join(cmd)}") from None
    return VerifyResult(raw, proc.returncode, cmd)


def diagnose(case_or_glob, outputs_dir, profile="strict", posenc="posenc", data_dir=None,
             timeout=600):
    """Runs `posenc diagnose GOLDEN... --actual OUTPUTS_DIR --profile PROFILE --format json`: which
    emulated pipeline and which known mistake explain the outputs
    (docs/verifying.md, "What went wrong").

    Returns a list of dicts, one per valid case with output: id, verdict ("correct",
    "explained", "unexplained"), summary (the answer in words) and hypotheses (best first:
    pipeline, profile, mistake, residual, confirmed, words). Raises PosencError on exit 2."""
    binary = find_binary(posenc)
    if not os.path.isdir(outputs_dir) and not os.path.isfile(outputs_dir):
        raise ValueError(f"diagnose: outputs_dir={outputs_dir!r} does not exist")
    cmd = ([binary, "diagnose"] + _golden_args(case_or_glob, data_dir)
           + ["--actual", str(outputs_dir), "--profile", profile, "--format", "json"])
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if proc.returncode not in (0, 1):
        raise PosencError(f"diagnose: posenc exited {proc.returncode}: "
                          f"{(proc.stderr or proc.stdout).strip()}\ncommand: {' '.join(cmd)}")
    try:
        return _nonfinite_back(json.loads(proc.stdout))["cases"]
    except (json.JSONDecodeError, KeyError) as e:
        raise PosencError(f"diagnose: posenc printed no JSON ({e}); stderr: {proc.stderr.strip()}"
                          f"\ncommand: {' '.join(cmd)}") from None
