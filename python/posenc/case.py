"""Golden cases: manifest + input tensors, and writing an engine's outputs for them."""
import fnmatch
import json
import os

import numpy as np

from . import io as _io

_NP_FOR = {"f64": np.float64, "f32": np.float32, "f16": np.float16, "i64": np.int64, "i32": np.int32}


def default_data_dir():
    """The catalog folder: $POSENC_DATA, else the source tree's golden/data next to python/."""
    env = os.environ.get("POSENC_DATA")
    if env:
        return env
    here = os.path.dirname(os.path.abspath(__file__))
    return os.path.normpath(os.path.join(here, "..", "..", "golden", "data"))


class TensorSpec:
    """One tensor the engine must produce: name, posenc dtype, shape, stage, and its check."""

    def __init__(self, entry):
        self.name = entry["name"]
        self.dtype = entry["dtype"]
        self.shape = tuple(entry["shape"])
        self.stage = entry.get("stage", "")
        self.check = entry.get("check", {})
        self.companions = entry.get("companions", {})
        self.axes = entry.get("axes", [])
        self.entry = entry

    @property
    def kind(self):
        return self.check.get("kind", "")

    def profile(self, profile):
        """The manifest's {bound, ulps, extra, ...} for `profile` (alias fp32-angles = fp32)."""
        profiles = self.check.get("profiles", {})
        key = "fp32" if profile == "fp32-angles" else profile
        if key not in profiles:
            raise ValueError(f"TensorSpec.profile: profile={profile!r} is not in tensor "
                             f"{self.name!r}'s check (known: {sorted(profiles)})")
        return profiles[key]

    def __repr__(self):
        return f"TensorSpec({self.name!r}, {self.dtype}, {list(self.shape)}, stage={self.stage!r})"


class Case:
    """A golden case: `id`, `scheme`, `params`, `conventions`, `inputs` (name -> numpy array,
    bf16 as uint16 bits), `expected` (name -> TensorSpec, in manifest order), `manifest` (the
    whole JSON), `manifest_path`, `tensors_path`."""

    def __init__(self, manifest_path):
        self.manifest_path = os.path.abspath(manifest_path)
        with open(manifest_path) as f:
            m = json.load(f)
        for key in ("id", "scheme", "inputs", "expected", "tensors_file"):
            if key not in m:
                raise ValueError(f"Case: manifest_path={manifest_path!r} lacks the key {key!r}")
        tf = m["tensors_file"]
        if os.sep in tf or "/" in tf or tf in ("", ".", ".."):
            raise ValueError(f"Case: manifest_path={manifest_path!r} has tensors_file={tf!r}, "
                             f"which is not a plain file name")
        self.manifest = m
        self.id = m["id"]
        self.scheme = m["scheme"]
        self.variant = m.get("variant", "")
        self.result = m.get("result", "valid")
        self.params = m.get("params", {})
        self.conventions = m.get("conventions", {})
        self.tensors_path = os.path.join(os.path.dirname(self.manifest_path), tf)
        self.expected = {e["name"]: TensorSpec(e) for e in m["expected"]}
        self.input_specs = {e["name"]: TensorSpec(e) for e in m["inputs"]}
        self._tensors = None

    @property
    def tensors(self):
        """Every tensor of the case's safetensors file (inputs, expected values, companions)."""
        if self._tensors is None:
            self._tensors = _io.read_safetensors(self.tensors_path)
        return self._tensors

    @property
    def inputs(self):
        t = self.tensors
        missing = [n for n in self.input_specs if n not in t]
        if missing:
            raise ValueError(f"Case.inputs: case {self.id!r}: {self.tensors_path!r} lacks input "
                             f"tensors {missing}")
        return {n: t[n] for n in self.input_specs}

    def input_float(self, name):
        """Input `name` as float64 values (bf16 widened exactly)."""
        if name not in self.input_specs:
            raise KeyError(f"Case.input_float: name={name!r} is not an input of case {self.id!r} "
                           f"(inputs: {list(self.input_specs)})")
        return _io.to_float64(self.tensors[name], self.input_specs[name].dtype)

    def expected_values(self, name):
        """The stored expected tensor `name` (target dtype, bf16 as bits)."""
        self._spec(name, "Case.expected_values")
        return self.tensors[name]

    def _spec(self, name, where):
        if name not in self.expected:
            raise KeyError(f"{where}: name={name!r} is not an expected tensor of case {self.id!r} "
                           f"(expected: {list(self.expected)})")
        return self.expected[name]

    def convert_output(self, name, array):
        """`array` converted to tensor `name`'s dtype (bf16: bits, rounded to nearest even) after
        checking its shape; a clear ValueError/TypeError naming the tensor otherwise."""
        spec = self._spec(name, "Case.convert_output")
        if hasattr(array, "detach"):  # a torch tensor, without importing torch
            array = array.detach().cpu()
            if str(getattr(array, "dtype", "")) == "torch.bfloat16":
                array = array.float()
            array = array.numpy()
        a = np.asarray(array)
        if tuple(a.shape) != spec.shape:
            raise ValueError(f"Case.write_outputs: case {self.id!r} tensor {name!r} has shape "
                             f"{list(a.shape)}, expected {list(spec.shape)}")
        if a.dtype.kind not in "fiub":
            raise TypeError(f"Case.write_outputs: case {self.id!r} tensor {name!r} has dtype "
                            f"{a.dtype}, not a number")
        if spec.dtype == "bf16":
            if a.dtype == np.uint16:
                return a  # already bf16 bit patterns
            if a.dtype == np.float64:
                return _io.float64_to_bf16(a)
            return _io.float32_to_bf16(a.astype(np.float32))
        if spec.dtype in ("i64", "i32") and a.dtype.kind == "f":
            if not np.all(np.isfinite(a)) or np.any(a != np.round(a)):
                raise ValueError(f"Case.write_outputs: case {self.id!r} tensor {name!r} must hold "
                                 f"integers ({spec.dtype}); got non-integral values")
        if spec.dtype == "f16" and a.dtype == np.uint16:
            raise TypeError(f"Case.write_outputs: case {self.id!r} tensor {name!r} is f16; give "
                            f"float values, not uint16 bits")
        return a.astype(_NP_FOR[spec.dtype])

    def write_outputs(self, out_dir, outputs):
        """Writes {name: array} as OUT_DIR/<id>.safetensors in the expected dtypes and shapes.

        Any subset of the expected tensors is allowed; an unknown name, a wrong shape or a
        non-numeric array raises an error naming the tensor. Returns the file's path."""
        if not outputs:
            raise ValueError(f"Case.write_outputs: outputs for case {self.id!r} is empty "
                             f"(expected any of {list(self.expected)})")
        unknown = [n for n in outputs if n not in self.expected]
        if unknown:
            raise KeyError(f"Case.write_outputs: case {self.id!r} has no expected tensor named "
                           f"{unknown} (expected: {list(self.expected)})")
        converted = {n: self.convert_output(n, a) for n, a in outputs.items()}
        dtypes = {n: self.expected[n].dtype for n in converted}
        os.makedirs(out_dir, exist_ok=True)
        path = os.path.join(out_dir, self.id + ".safetensors")
        _io.write_safetensors(path, converted, dtypes=dtypes)
        return path

    def __repr__(self):
        return f"Case({self.id!r}, scheme={self.scheme!r})"


def load_case(case_id_or_path, data_dir=None):
    """A Case from a manifest path, or from a case id looked up in the catalog of `data_dir`."""
    s = str(case_id_or_path)
    if s.endswith(".json") and os.path.exists(s):
        return Case(s)
    for entry in _catalog(data_dir):
        if entry["id"] == s:
            return Case(os.path.join(data_dir or default_data_dir(), entry["manifest"]))
    raise KeyError(f"load_case: case_id_or_path={s!r} is neither a manifest file nor a case id of "
                   f"the catalog in {data_dir or default_data_dir()!r}")


def _catalog(data_dir):
    d = data_dir or default_data_dir()
    path = os.path.join(d, "catalog.json")
    if not os.path.exists(path):
        raise FileNotFoundError(f"posenc: no catalog.json in data_dir={d!r} (set POSENC_DATA or "
                                f"pass data_dir)")
    with open(path) as f:
        return json.load(f)["cases"]


def case_ids(pattern="*", data_dir=None, scheme=None, result=None):
    """Catalog case ids matching a glob `pattern` (fnmatch), in catalog order."""
    return [e["id"] for e in _catalog(data_dir)
            if fnmatch.fnmatchcase(e["id"], pattern)
            and (scheme is None or e["scheme"] == scheme)
            and (result is None or e.get("result") == result)]


def find_cases(pattern="*", data_dir=None, scheme=None, result=None):
    """Case objects for the catalog cases matching `pattern` (tensors are read lazily)."""
    d = data_dir or default_data_dir()
    by_id = {e["id"]: e for e in _catalog(d)}
    return [Case(os.path.join(d, by_id[i]["manifest"]))
            for i in case_ids(pattern, d, scheme, result)]
