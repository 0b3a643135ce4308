"""Per-element errors in numpy: |actual - exact| / budget, from a case's companion tensors.

The budget is docs/profiles.md: conditioned `b eps c + r ulp(y*) + x` (0 where c = 0),
ulp `b ulp(y*) + x`, exact: bit equality. ulp(y*) is the spacing of the exact value rounded to
the target dtype. `posenc verify` stays the judge; this is for plotting error vs position.
"""
import numpy as np

from . import io as _io

EPS = {"f32": 2.0 ** -23, "bf16": 2.0 ** -7, "f16": 2.0 ** -10, "f64": 2.0 ** -52}
_PREC = {"f32": (24, -126), "bf16": (8, -126), "f16": (11, -14), "f64": (53, -1022)}


def _round_to(x, dtype):
    if dtype == "bf16":
        return _io.bf16_to_float32(_io.float64_to_bf16(x)).astype(np.float64)
    if dtype == "f16":
        return x.astype(np.float16).astype(np.float64)
    if dtype == "f32":
        return x.astype(np.float32).astype(np.float64)
    return x


def ulp(x, dtype):
    """Spacing of the target-dtype values at x (x rounded to the dtype first), as float64."""
    if dtype not in _PREC:
        raise ValueError(f"ulp: dtype={dtype!r} is not one of {sorted(_PREC)}")
    p, emin = _PREC[dtype]
    r = np.abs(_round_to(np.asarray(x, dtype=np.float64), dtype))
    _, e = np.frexp(r)  # r = m 2^e, m in [0.5, 1)
    e = np.maximum(e - 1, emin)  # exponent of the leading bit, clamped to the normal range
    return np.ldexp(1.0, e - (p - 1))


def budget(case, name, profile="strict"):
    """The per-element budget of expected tensor `name` under `profile` (float64 array)."""
    spec = case._spec(name, "budget")
    p = spec.profile(profile)
    if "not_applicable" in p:
        raise ValueError(f"budget: profile={profile!r} does not apply to tensor {name!r} of case "
                         f"{case.id!r}: {p['not_applicable']}")
    t = case.tensors
    exact = t[name + ".exact"].astype(np.float64)
    kind = spec.kind
    extra = t[p["extra"]].astype(np.float64) if "extra" in p else 0.0
    if kind == "conditioned":
        cond = t[name + ".cond"].astype(np.float64)
        b = np.where(cond > 0, p.get("bound", 0.0) * EPS[spec.dtype] * cond
                     + p.get("ulps", 0.0) * ulp(exact, spec.dtype), 0.0)
        return b + extra
    if kind == "ulp":
        return p.get("bound", 0.0) * ulp(exact, spec.dtype) + extra
    if kind == "exact":
        return np.zeros(exact.shape)
    raise ValueError(f"budget: tensor {name!r} of case {case.id!r} has check kind {kind!r}, "
                     f"not conditioned, ulp or exact")


def error_ratio(case, name, actual, profile="strict"):
    """|actual - exact| / budget per element (float64, same shape as the tensor).

    0/0 (an exact element reproduced exactly) is 0, x/0 is inf, NaN in actual is inf.
    `actual` may be float values or, for a bf16 tensor, uint16 bits. Elements pass at <= 1.
    For a negative control (case.result == "invalid") the expected values are the known-wrong
    output, so a small ratio there means the engine reproduces the mistake."""
    spec = case._spec(name, "error_ratio")
    a = np.asarray(actual)
    if tuple(a.shape) != spec.shape:
        raise ValueError(f"error_ratio: actual for tensor {name!r} of case {case.id!r} has shape "
                         f"{list(a.shape)}, expected {list(spec.shape)}")
    if spec.dtype == "bf16" and a.dtype == np.uint16:
        a = _io.bf16_to_float32(a)
    a = a.astype(np.float64)
    exact = case.tensors[name + ".exact"].astype(np.float64)
    err = np.abs(a - exact)
    if spec.kind == "exact":
        stored = _io.to_float64(case.tensors[name], spec.dtype)
        same = (a == stored) | (np.isnan(a) & np.isnan(stored))
        return np.where(same, 0.0, np.inf)
    b = budget(case, name, profile)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(err == 0, 0.0, err / b)
    return np.where(np.isnan(a), np.inf, r)


def _position_axes(case, name):
    spec = case._spec(name, "by_position")
    return [(i, ax["positions"]) for i, ax in enumerate(spec.axes) if ax.get("positions")]


def by_position(case, name, actual, profile="strict"):
    """(positions, worst ratio at each position) for a tensor with a position axis.

    Uses the first axis that names a positions input (token or query); returns the positions
    sorted ascending and the largest error ratio over every element at that position."""
    axes = _position_axes(case, name)
    if not axes:
        raise ValueError(f"by_position: tensor {name!r} of case {case.id!r} has no position axis")
    axis, pos_name = axes[0]
    pos = np.asarray(case.tensors[pos_name]).astype(np.int64).reshape(-1)
    r = error_ratio(case, name, actual, profile)
    per_row = np.moveaxis(r, axis, 0).reshape(r.shape[axis], -1).max(axis=1)
    order = np.argsort(pos, kind="stable")
    return pos[order], per_row[order]
