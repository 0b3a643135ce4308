"""posenc's RoPE (and ALiBi: check_alibi; T5 buckets: check_t5) properties on your own Python
kernel (numpy; torch tensors are accepted).

    import posenc.properties as pp

    def my_rope(q, k, positions, *, head_dim, rotary_dim, base, layout, inv_freq):
        ...                        # q [tokens, heads, head_dim], k [tokens, 1, head_dim], float32
        return q_rot, k_rot        # same shapes (numpy arrays or torch tensors)

    pp.check_rope(my_rope, profile="fp32")   # raises AssertionError with the shrunk counterexample

Each example draws a call (head_dim, rotary_dim, base, pairing layout, heads, token positions
from the hard positions and up to 2^24, q and k values) from a seeded generator, runs the kernel
and asks the `posenc` binary (`posenc oracle rope`) for the mp50 oracle values and the named
profile's per-element budgets, the same budgets `posenc verify` applies. Properties:

  oracle       every output element within its budget of the exact value
  pair_norm    | ||y_pair|| - ||x_pair|| | <= budget(y_a) + budget(y_b); tail channels copied exactly
  relative     <R(m)q, R(n)k> = <R(m+s)q, R(n+s)k> within the two scores' budgets
  composition  R(a) applied to the kernel's own R(b) x equals R(a+b) x, within both rotations'
               budgets plus the first rotation's actual error

The seed is printed; pass it back (seed=N, or POSENC_CHECK_SEED=N) to replay. A failure is shrunk
(fewer tokens and heads, smaller positions and head_dim) and reported with the property, the
call, the worst element with its budget, and a diagnosis when a known mistake explains the
output (positions off by one, the other pairing, float16 angles, sin sign).
"""
import os
import shutil
import subprocess
import tempfile
import time

import numpy as np

from . import constants as _constants
from .verify import find_binary, PosencError

# The hard positions of golden/cases/hard_positions.cpp (constants.json, never a copy here).
HARD_POSITIONS = _constants.HARD_POSITIONS
# The profiles that judge float32 kernels (bf16 and f16 judge 16-bit targets).
FLOAT32_PROFILES = tuple(p for p in _constants.PROFILES if p not in ("bf16", "f16"))
PROPERTIES = ("oracle", "pair_norm", "relative", "composition")
LAYOUTS = ("half_split", "interleaved")


class CheckResult:
    """What check_rope ran: the seed, the number of examples, and (on failure) the report."""

    def __init__(self, seed, examples, failure=None):
        self.seed, self.examples, self.failure = seed, examples, failure
        self.passed = failure is None

    def __repr__(self):
        return (f"CheckResult(passed={self.passed}, seed={self.seed}, examples={self.examples})"
                if self.passed else self.failure)


def _pairs(head_dim, rotary_dim, layout):
    np_ = rotary_dim // 2
    i = np.arange(np_)
    if layout == "interleaved":
        return 2 * i, 2 * i + 1
    return i, i + np_


def _to_numpy(x, name):
    if hasattr(x, "detach"):  # torch
        x = x.detach().cpu().numpy()
    a = np.asarray(x)
    if a.dtype != np.float32:
        raise TypeError(f"check_rope: the kernel returned {name} as {a.dtype}; float32 expected")
    return a


class _Oracle:
    def __init__(self, posenc, profile):
        self.bin = find_binary(posenc)
        self.profile = profile
        self.calls = 0

    def __call__(self, c, q, k):
        """Exact values and budgets of q_rot, k_rot, scores for call c with inputs q, k."""
        self.calls += 1
        d = tempfile.mkdtemp(prefix="posenc_oracle_")
        try:
            np.save(os.path.join(d, "q.npy"), q)
            np.save(os.path.join(d, "k.npy"), k)
            cmd = [self.bin, "oracle", "rope", "--positions", ",".join(str(int(p)) for p in c["pos"]),
                   "--head-dim", str(c["head_dim"]), "--rotary-dim", str(c["rotary_dim"]),
                   "--base", repr(float(c["base"])), "--layout", c["layout"],
                   "--heads", str(c["heads"]), "--kv-heads", "1", "--q", os.path.join(d, "q.npy"),
                   "--k", os.path.join(d, "k.npy"), "--profile", self.profile,
                   "--out", os.path.join(d, "out")]
            p = subprocess.run(cmd, capture_output=True, text=True)
            if p.returncode != 0:
                raise PosencError(f"posenc oracle failed (exit {p.returncode}): {p.stderr.strip()}")
            o = os.path.join(d, "out")
            return {f"{t}.{s}": np.load(os.path.join(o, f"{t}.{s}.npy"))
                    for t in ("q_rot", "k_rot", "scores") for s in ("exact", "budget")}
        finally:
            shutil.rmtree(d, ignore_errors=True)


def _inputs(c, values_seed, n):
    rng = np.random.default_rng(values_seed)
    q = rng.uniform(-1, 1, (n, c["heads"], c["head_dim"])).astype(np.float32)
    k = rng.uniform(-1, 1, (n, 1, c["head_dim"])).astype(np.float32)
    return q, k


def _describe(c, prop):
    return (f"head_dim {c['head_dim']}, rotary_dim {c['rotary_dim']}, base {c['base']:g}, layout "
            f"{c['layout']}, heads {c['heads']} (kv 1), positions {list(map(int, c['pos']))}"
            + (f", relative (m, n, s) = {c['rel']}" if prop == "relative" else "")
            + (f", composition (a, b) = {c['comp']}" if prop == "composition" else "")
            + f", values seed {c['vseed']}")


def _run(fn, c, q, k):
    pos = np.asarray(c["pos"], dtype=np.int64)
    inv = np.power(float(c["base"]), -np.arange(0, c["rotary_dim"], 2) / c["rotary_dim"])
    out = fn(q.copy(), k.copy(), pos, head_dim=c["head_dim"], rotary_dim=c["rotary_dim"],
             base=float(c["base"]), layout=c["layout"], inv_freq=inv)
    qr, kr = (_to_numpy(x, n) for x, n in zip(out, ("q_rot", "k_rot")))
    if qr.shape != q.shape or kr.shape != k.shape:
        raise ValueError(f"check_rope: the kernel returned shapes {qr.shape}, {kr.shape}; expected "
                         f"{q.shape}, {k.shape}")
    return qr, kr


def _hypotheses(c, x):
    """float64 RoPE of x under known mistakes: name -> values (for the diagnosis)."""
    pos = np.asarray(c["pos"], dtype=np.float64)
    d, h = c["rotary_dim"], c["head_dim"]
    inv = np.power(float(c["base"]), -np.arange(0, d, 2) / d)

    def rope(layout, shift=0.0, f16=False, sign=1.0):
        ang = (pos[:, None] + shift) * inv[None, :]
        if f16:
            with np.errstate(over="ignore"):
                ang = (pos[:, None].astype(np.float32) * inv[None, :].astype(np.float32)) \
                    .astype(np.float16).astype(np.float64)
        with np.errstate(invalid="ignore"):
            cs, sn = np.cos(ang)[:, None, :], sign * np.sin(ang)[:, None, :]
        a, b = _pairs(h, d, layout)
        y = x.astype(np.float64).copy()
        xa, xb = y[..., a].copy(), y[..., b].copy()
        y[..., a] = xa * cs - xb * sn
        y[..., b] = xa * sn + xb * cs
        return y

    other = "interleaved" if c["layout"] == "half_split" else "half_split"
    return {"positions off by one (each token rotated to position + 1)": rope(c["layout"], 1.0),
            "positions off by one (each token rotated to position - 1)": rope(c["layout"], -1.0),
            f"the other pairing ({other} instead of {c['layout']})": rope(other),
            "float16 angles (the angle rounded to float16 before cos/sin)": rope(c["layout"], f16=True),
            "sin sign flipped (rotation by -angle)": rope(c["layout"], sign=-1.0)}


def _diagnosis(c, x, y, budget):
    best = None
    for name, v in _hypotheses(c, x).items():
        with np.errstate(invalid="ignore", divide="ignore"):
            r = np.where(budget > 0, np.abs(y - v) / budget, np.where(y == v, 0.0, np.inf))
        r = np.nan_to_num(r, nan=np.inf)
        worst = float(r.max()) if r.size else 0.0
        if best is None or worst < best[1]:
            best = (name, worst)
    if best and best[1] <= 2.0:
        return f"diagnosis: the output is {best[0]} (within {best[1]:.3g} of the budget)"
    return f"diagnosis: no known mistake explains it (closest: {best[0]}, {best[1]:.3g} budgets)"


def _where(c, name, idx):
    t, hh, ch = idx
    return f"{name}[token {t} (position {int(c['pos'][t])}), head {hh}, channel {ch}]"


def _check_oracle(c, x, y, exact, budget, name, profile):
    with np.errstate(invalid="ignore", divide="ignore"):
        err = np.abs(y.astype(np.float64) - exact)
        r = np.where(budget > 0, err / budget, np.where(err == 0, 0.0, np.inf))
    r = np.nan_to_num(r, nan=np.inf)
    if r.size == 0 or r.max() <= 1.0:
        return None
    over = np.argwhere(r > 1.0)
    first = min(int(c["pos"][i[0]]) for i in over)
    idx = tuple(int(v) for v in np.unravel_index(int(np.argmax(r)), r.shape))
    return (f"oracle: {name} leaves the {profile} budget at {len(over)}/{r.size} elements, first "
            f"at position {first}; worst {_where(c, name, idx)} = {float(y[idx])!r}, exact "
            f"{float(exact[idx])!r}, |error| {float(err[idx]):.3g} > budget "
            f"{float(budget[idx]):.3g} ({float(r[idx]):.3g} budgets)\n"
            + _diagnosis(c, x, y.astype(np.float64), budget))


def _evaluate(fn, oracle, c, prop):
    """'' or what property `prop` (and the oracle at the same inputs) finds wrong at call c."""
    T0 = len(c["pos"])
    cc = dict(c)
    extra = []
    if prop == "relative":
        m, n, s = c["rel"]
        extra = [m, n, m + s, n + s]
    if prop == "composition":
        a, b = c["comp"]
        extra = [b, a + b]
    cc["pos"] = list(c["pos"]) + extra
    q, k = _inputs(cc, c["vseed"], len(cc["pos"]))
    if prop == "relative":
        q[T0 + 2], k[T0 + 3] = q[T0], k[T0 + 1]
    if prop == "composition":
        q[T0 + 1], k[T0 + 1] = q[T0], k[T0]
    qr, kr = _run(fn, cc, q, k)
    o = oracle(cc, q, k)
    prof = oracle.profile
    for name, x, y in (("q_rot", q, qr), ("k_rot", k, kr)):
        f = _check_oracle(cc, x, y, o[f"{name}.exact"], o[f"{name}.budget"], name, prof)
        if f:
            return f
    if prop == "pair_norm":
        a, b = _pairs(c["head_dim"], c["rotary_dim"], c["layout"])
        for name, x, y in (("q_rot", q, qr), ("k_rot", k, kr)):
            bud = o[f"{name}.budget"]
            nx = np.hypot(x[..., a].astype(np.float64), x[..., b])
            ny = np.hypot(y[..., a].astype(np.float64), y[..., b])
            tol = bud[..., a] + bud[..., b]
            bad = ~(np.abs(ny - nx) <= tol)
            if bad.any():
                t, hh, i = (int(v) for v in np.argwhere(bad)[0])
                return (f"pair_norm: {name} token {t} (position {int(cc['pos'][t])}), head {hh}, "
                        f"pair {i} (channels {int(a[i])}, {int(b[i])}): norm {ny[t, hh, i]:.9g} vs "
                        f"input norm {nx[t, hh, i]:.9g} > the {prof} budget {tol[t, hh, i]:.3g}\n"
                        + _diagnosis(cc, x, y.astype(np.float64), bud))
            tail = slice(c["rotary_dim"], c["head_dim"])
            if not np.array_equal(y[..., tail], x[..., tail]):
                return f"pair_norm: {name}: tail channels (>= rotary_dim {c['rotary_dim']}) changed"
    if prop == "relative":
        bud = o["scores.budget"]
        for hh in range(c["heads"]):
            s1 = float(np.dot(qr[T0, hh].astype(np.float64), kr[T0 + 1, 0]))
            s2 = float(np.dot(qr[T0 + 2, hh].astype(np.float64), kr[T0 + 3, 0]))
            tol = bud[hh, T0, T0 + 1] + bud[hh, T0 + 2, T0 + 3]
            if not abs(s1 - s2) <= tol:
                m, n, s = c["rel"]
                return (f"relative: head {hh}: q.k at positions ({m}, {n}) = {s1:.9g} but at "
                        f"({m + s}, {n + s}) = {s2:.9g} (exact {o['scores.exact'][hh, T0, T0 + 1]:.9g}); "
                        f"|difference| {abs(s1 - s2):.3g} > the {prof} budget {tol:.3g}")
    if prop == "composition":
        a_pos, b_pos = c["comp"]
        c2 = dict(c, pos=[a_pos])
        y1q, y1k = qr[T0:T0 + 1].copy(), kr[T0:T0 + 1].copy()
        if not (np.isfinite(y1q).all() and np.isfinite(y1k).all()):
            return "composition: the first rotation returned non-finite values"
        zq, zk = _run(fn, c2, y1q, y1k)
        o2 = oracle(c2, y1q, y1k)
        pa, pb = _pairs(c["head_dim"], c["rotary_dim"], c["layout"])
        for name, y1, z, w, e1, b2, b3 in (
                ("q_rot", y1q, zq, qr[T0 + 1:T0 + 2], o["q_rot.exact"][T0:T0 + 1],
                 o2["q_rot.budget"], o["q_rot.budget"][T0 + 1:T0 + 2]),
                ("k_rot", y1k, zk, kr[T0 + 1:T0 + 2], o["k_rot.exact"][T0:T0 + 1],
                 o2["k_rot.budget"], o["k_rot.budget"][T0 + 1:T0 + 2])):
            err1 = np.hypot(y1[..., pa] - e1[..., pa], y1[..., pb] - e1[..., pb])
            tol = err1 + b2[..., pa] + b2[..., pb] + b3[..., pa] + b3[..., pb]
            dist = np.hypot(z[..., pa].astype(np.float64) - w[..., pa], z[..., pb].astype(np.float64) - w[..., pb])
            bad = ~(dist <= tol)
            if bad.any():
                _, hh, i = (int(v) for v in np.argwhere(bad)[0])
                return (f"composition: {name} head {hh} pair {i}: R({a_pos}) R({b_pos}) x and "
                        f"R({a_pos + b_pos}) x differ by {dist[0, hh, i]:.3g} > the {prof} budget "
                        f"{tol[0, hh, i]:.3g}")
    return ""


def _draw(rng, o):
    hd = int(rng.choice(o["head_dims"]))
    rd = hd // 2 if o["partial_rotary"] and hd % 4 == 0 and rng.random() < 0.3 else hd
    top = min(o["max_position"], 1 << 24)
    hard = [p for p in HARD_POSITIONS if p <= o["max_position"]]

    def pos():
        u = rng.random()
        if u < 0.4:
            return int(rng.choice(hard))
        if u < 0.6:
            return int(rng.integers(0, 65))
        return int(rng.integers(0, top + 1))

    c = {"head_dim": hd, "rotary_dim": rd, "base": float(rng.choice(o["bases"])),
         "layout": str(rng.choice(o["layouts"])), "heads": int(rng.integers(1, 3)),
         "pos": [pos() for _ in range(int(rng.integers(1, o["max_tokens"] + 1)))],
         "vseed": int(rng.integers(0, 2 ** 31))}
    m, n = pos(), pos()
    c["rel"] = (m, n, min(pos(), max(o["max_position"] - max(m, n), 0)))
    b = pos()
    c["comp"] = (min(pos(), max(o["max_position"] - b, 0)), b)
    return c


def _smaller(c, o, prop):
    """Candidate simplifications of a failing call for property `prop`, simplest first."""
    out = []
    if c["heads"] > 1:
        out.append(dict(c, heads=1))
    for hd in sorted(o["head_dims"]):
        if hd < c["head_dim"]:
            out.append(dict(c, head_dim=hd, rotary_dim=hd))
    if len(c["pos"]) > 1:
        for i in range(len(c["pos"])):
            out.append(dict(c, pos=c["pos"][:i] + c["pos"][i + 1:]))
    for i, p in enumerate(c["pos"]):
        for q in sorted({0, 1, p // 2, p - 1} | {h for h in HARD_POSITIONS if h < p}):
            if 0 <= q < p:
                out.append(dict(c, pos=c["pos"][:i] + [q] + c["pos"][i + 1:]))
    if prop == "relative":
        m, n, s = c["rel"]
        for r in ((0, n, s), (m, 0, s), (m, n, s // 2), (m // 2, n, s), (m, n // 2, s)):
            if r != c["rel"]:
                out.append(dict(c, rel=r))
    if prop == "composition":
        a, b = c["comp"]
        for r in ((0, b), (a, 0), (a // 2, b), (a, b // 2), (1, b), (a, 1)):
            if r != c["comp"]:
                out.append(dict(c, comp=r))
    return out


def check_rope(fn, profile="fp32", *, examples=8, seed=None, layouts=LAYOUTS, head_dims=(8, 64),
               bases=(1e4, 5e5), partial_rotary=True, max_tokens=3, max_position=(1 << 24) + 1,
               properties=PROPERTIES, max_shrinks=40, posenc="posenc", raise_on_failure=True):
    """Runs the RoPE properties on fn (see the module docstring for its signature).

    profile: strict, fp32 (fp32-angles) or fp32-recurrence (float32 kernels). Returns a
    CheckResult; on a failure raises AssertionError with the shrunk counterexample (or returns
    the failing CheckResult when raise_on_failure is False).
    """
    profile = _constants.canonical_profile(profile) or profile
    if profile not in FLOAT32_PROFILES:
        raise ValueError(f"check_rope: profile must be strict, fp32 or fp32-recurrence (got "
                         f"{profile!r}; bf16 and f16 judge 16-bit targets)")
    for p in properties:
        if p not in PROPERTIES:
            raise ValueError(f"check_rope: unknown property {p!r} (known: {', '.join(PROPERTIES)})")
    bad_layouts = [x for x in layouts if x not in LAYOUTS]
    if bad_layouts or not layouts:
        raise ValueError(f"check_rope: layouts must be a non-empty subset of {LAYOUTS} (got {layouts!r})")
    if seed is None:
        seed = int(os.environ.get("POSENC_CHECK_SEED", time.time_ns() % (2 ** 31)))
    print(f"posenc.properties.check_rope: seed={seed} profile={profile} (replay: seed={seed})")
    o = {"head_dims": tuple(head_dims), "bases": tuple(bases), "layouts": tuple(layouts),
         "partial_rotary": partial_rotary, "max_tokens": max_tokens, "max_position": max_position}
    oracle = _Oracle(posenc, profile)
    for e in range(examples):
        c = _draw(np.random.default_rng([seed, e]), o)
        for prop in properties:
            f = _evaluate(fn, oracle, c, prop)
            if not f:
                continue
            shrinks = 0
            improved = True
            while improved and shrinks < max_shrinks:
                improved = False
                for cand in _smaller(c, o, prop):
                    shrinks += 1
                    g = _evaluate(fn, oracle, cand, prop)
                    if g:
                        c, f, improved = cand, g, True
                        break
                    if shrinks >= max_shrinks:
                        break
            msg = (f"posenc.properties.check_rope: property {prop} fails (profile {profile}, seed "
                   f"{seed}, example {e}, shrunk in {shrinks} steps, {oracle.calls} oracle calls)"
                   f"\ncall: {_describe(c, prop)}\n{f}")
            r = CheckResult(seed, e + 1, msg)
            if raise_on_failure:
                raise AssertionError(msg)
            return r
    return CheckResult(seed, examples)


# ---- ALiBi ---------------------------------------------------------------------------------------

ALIBI_PROPERTIES = ("slopes", "ratios")


def _alibi_oracle(binary, n, profile, cache):
    key = (n, profile)
    if key not in cache:
        d = tempfile.mkdtemp(prefix="posenc_oracle_")
        try:
            p = subprocess.run([binary, "oracle", "alibi", "--heads", str(n), "--profile", profile,
                                "--out", d], capture_output=True, text=True)
            if p.returncode != 0:
                raise PosencError(f"posenc oracle failed (exit {p.returncode}): {p.stderr.strip()}")
            cache[key] = (np.load(os.path.join(d, "slopes.exact.npy")),
                          np.load(os.path.join(d, "slopes.budget.npy")))
        finally:
            shutil.rmtree(d, ignore_errors=True)
    return cache[key]


def _alibi_slope_diagnosis(s, exact, budget):
    n = len(s)
    h = np.arange(n)
    tol = 2 * budget + 4 * np.spacing(np.abs(exact).astype(np.float32)).astype(np.float64)
    for name, v in (("naive slopes: 2^(-8(h+1)/n) for a head count that is not a power of two",
                     np.exp2(-8.0 * (h + 1) / n)),
                    ("the slopes in reversed head order", exact[::-1]),
                    ("the slopes with the sign flipped", -exact)):
        if np.all(np.abs(s - v) <= tol):
            return f"\ndiagnosis: {name}"
    return ""


def _alibi_evaluate(fn, binary, profile, cache, c, prop):
    n, qp, kp = c["heads"], np.asarray(c["q"], np.int64), np.asarray(c["k"], np.int64)
    exact, budget = _alibi_oracle(binary, n, profile, cache)
    slopes, bias = fn(n, qp, kp)
    slopes = _to_numpy(slopes, "slopes").astype(np.float64)
    bias = _to_numpy(bias, "bias").astype(np.float64)
    if slopes.shape != (n,) or bias.shape != (n, len(qp), len(kp)):
        raise ValueError(f"check_alibi: the producer returned shapes {slopes.shape}, {bias.shape}; "
                         f"expected ({n},), ({n}, {len(qp)}, {len(kp)})")
    err = np.abs(slopes - exact)
    bad = ~(err <= budget)
    if bad.any():
        h = int(np.argmax(bad))
        return (f"slopes: head {h} of {n} = {slopes[h]!r}, exact {exact[h]!r}, |error| "
                f"{err[h]:.3g} > the {profile} budget {budget[h]:.3g}"
                + _alibi_slope_diagnosis(slopes, exact, budget))
    if prop == "slopes":
        return ""
    ulp = lambda x: np.spacing(np.abs(x).astype(np.float32)).astype(np.float64)
    for h in range(n):
        for i, q in enumerate(qp):
            for j, a in enumerate(kp):
                for j2, b in enumerate(kp):
                    if a > q or b > q:
                        continue
                    diff = bias[h, i, j] - bias[h, i, j2]
                    want = exact[h] * float(a - b)
                    tol = budget[h] * abs(float(a - b)) + 0.5 * ulp(bias[h, i, j]) + 0.5 * ulp(bias[h, i, j2])
                    if abs(diff - want) <= tol:
                        continue
                    dg = "\ndiagnosis: the bias sign is flipped" if abs(diff + want) <= tol else ""
                    return (f"ratios: head {h} of {n}, query {i} (position {int(q)}): bias[key {j} "
                            f"(position {int(a)})] - bias[key {j2} (position {int(b)})] = {diff:.9g}, "
                            f"exact m (j - j') = {want:.9g} (probability ratio exp({diff:.6g}) instead "
                            f"of exp({want:.6g})); |error| {abs(diff - want):.3g} > the {profile} "
                            f"budget {tol:.3g}" + dg)
    return ""


def check_alibi(fn, profile="fp32", *, examples=10, seed=None, max_heads=64, max_position=4096,
                max_keys=6, properties=ALIBI_PROPERTIES, max_shrinks=20, posenc="posenc",
                raise_on_failure=True):
    """ALiBi properties on fn(n_heads, q_positions, k_positions) -> (slopes [n_heads], bias
    [n_heads, len(q_positions), len(k_positions)]), float32, causal (only keys at positions <= the
    query's are read; any bias form that adds m (j - i) up to a per-row constant passes).

    slopes: every slope within the profile's budget of the exact one (the committed case
            alibi_slopes_h1_to_256_f32, via `posenc oracle alibi`)
    ratios: p_ij / p_ij' = exp(m (j - j')): bias differences within the slope's budget times the
            distance plus half an ulp of each bias value
    Seeded and shrinking as check_rope; raises AssertionError on a failure.
    """
    profile = _constants.canonical_profile(profile) or profile
    if profile not in FLOAT32_PROFILES:
        raise ValueError(f"check_alibi: profile must be strict, fp32 or fp32-recurrence (got {profile!r})")
    if not 1 <= max_heads <= 256:
        raise ValueError(f"check_alibi: max_heads must be in 1..256 (got {max_heads})")
    for p in properties:
        if p not in ALIBI_PROPERTIES:
            raise ValueError(f"check_alibi: unknown property {p!r} (known: {', '.join(ALIBI_PROPERTIES)})")
    if seed is None:
        seed = int(os.environ.get("POSENC_CHECK_SEED", time.time_ns() % (2 ** 31)))
    print(f"posenc.properties.check_alibi: seed={seed} profile={profile} (replay: seed={seed})")
    binary, cache = find_binary(posenc), {}
    for e in range(examples):
        rng = np.random.default_rng([seed, e])
        q = int(rng.integers(0, max_position + 1))
        c = {"heads": int(rng.integers(1, max_heads + 1)), "q": [q],
             "k": [int(x) for x in rng.integers(0, q + 1, int(rng.integers(2, max_keys + 1)))]}
        for prop in properties:
            f = _alibi_evaluate(fn, binary, profile, cache, c, prop)
            if not f:
                continue
            shrinks, improved = 0, True
            while improved and shrinks < max_shrinks:
                improved = False
                cands = [dict(c, heads=m) for m in sorted({1, 2, 3, c["heads"] // 2, c["heads"] - 1})
                         if 1 <= m < c["heads"]]
                if prop == "ratios" and len(c["k"]) > 2:
                    cands += [dict(c, k=c["k"][:i] + c["k"][i + 1:]) for i in range(len(c["k"]))]
                if prop == "ratios" and c["q"][0] > 1:
                    cands.append(dict(c, q=[c["q"][0] // 2], k=[x // 2 for x in c["k"]]))
                for cand in cands:
                    shrinks += 1
                    g = _alibi_evaluate(fn, binary, profile, cache, cand, prop)
                    if g:
                        c, f, improved = cand, g, True
                        break
            msg = (f"posenc.properties.check_alibi: property {prop} fails (profile {profile}, seed "
                   f"{seed}, example {e}, shrunk in {shrinks} steps)\ncall: n_heads {c['heads']}, "
                   f"q_positions {c['q']}, k_positions {c['k']}\n{f}")
            if raise_on_failure:
                raise AssertionError(msg)
            return CheckResult(seed, e + 1, msg)
    return CheckResult(seed, examples)


# ---- T5 buckets ----------------------------------------------------------------------------------

T5_PROPERTIES = ("buckets", "monotonic")


def _t5_oracle(binary, p, rel, cache):
    """Exact buckets of the relative positions rel (key - query), from `posenc oracle t5`."""
    key = (p["num_buckets"], p["max_distance"], p["bidirectional"], tuple(rel))
    if key not in cache:
        d = tempfile.mkdtemp(prefix="posenc_oracle_")
        try:
            args = [binary, "oracle", "t5", "--positions=" + ",".join(str(int(x)) for x in rel),
                    "--num-buckets", str(p["num_buckets"]),
                    "--max-distance", str(p["max_distance"]), "--out", d]
            if not p["bidirectional"]:
                args.append("--causal")
            r = subprocess.run(args, capture_output=True, text=True)
            if r.returncode != 0:
                raise PosencError(f"posenc oracle failed (exit {r.returncode}): {r.stderr.strip()}")
            cache[key] = np.load(os.path.join(d, "buckets.npy"))
        finally:
            shutil.rmtree(d, ignore_errors=True)
    return cache[key]


def _t5_run(fn, p, rel):
    b = fn(np.asarray(rel, np.int64), num_buckets=p["num_buckets"], max_distance=p["max_distance"],
           bidirectional=p["bidirectional"])
    if hasattr(b, "detach"):  # torch
        b = b.detach().cpu().numpy()
    b = np.asarray(b)
    if b.shape != (len(rel),) or not np.issubdtype(b.dtype, np.integer):
        raise ValueError(f"check_t5: the bucket function returned {b.dtype} {b.shape}; integers of "
                         f"shape ({len(rel)},) expected")
    return b.astype(np.int64)


def _t5_diagnosis(binary, p, rel, b, cache):
    """Every known mistake the buckets are (one call may not tell them apart)."""
    fits = []
    if np.array_equal(b, _t5_oracle(binary, p, [-x for x in rel], cache)):
        fits.append("the direction is flipped (relative position taken as query - key instead of "
                    "key - query)")
    other = dict(p, bidirectional=not p["bidirectional"])
    if np.array_equal(b, _t5_oracle(binary, other, rel, cache)):
        a, c = ("bidirectional", "causal") if p["bidirectional"] else ("causal", "bidirectional")
        fits.append(f"{c} buckets for a {a} call")
    if not fits:
        return ""
    s = "\ndiagnosis: " + "; or ".join(fits)
    return s + " (this call cannot tell them apart)" if len(fits) > 1 else s


def _t5_evaluate(fn, binary, p, rel, prop, cache):
    b = _t5_run(fn, p, rel)
    exact = _t5_oracle(binary, p, rel, cache)
    bad = np.nonzero(b != exact)[0]
    if len(bad):
        i = int(bad[0])
        return (f"bucket of relative position {rel[i]} (key - query) = {int(b[i])}, exact "
                f"{int(exact[i])}" + _t5_diagnosis(binary, p, rel, b, cache))
    if prop == "buckets":
        return ""
    half = p["num_buckets"] // 2
    for r0 in rel:  # sweep each drawn r's direction from 0 outwards, in steps
        n = abs(r0)
        step = max(1, n // 64)
        sweep = [(-x if r0 < 0 else x) for x in range(0, n + 1, step)]
        s = _t5_run(fn, p, sweep)
        for i, r in enumerate(sweep):
            if r > 0 and not p["bidirectional"] and s[i] != 0:
                return (f"causal call: future key at relative position {r} has bucket "
                        f"{int(s[i])}, not 0")
            if r > 0 and p["bidirectional"] and s[i] < half:
                return (f"bidirectional call: future key at relative position {r} has bucket "
                        f"{int(s[i])}, below the upper half (>= {half})")
            if i > 0 and s[i] < s[i - 1]:
                return (f"the bucket decreases with the distance: relative position "
                        f"{sweep[i - 1]} -> bucket {int(s[i - 1])}, {r} -> bucket {int(s[i])}")
    return ""


def check_t5(fn, *, examples=10, seed=None, num_buckets=(8, 32, 64), max_distances=(128, 256, 1000),
             max_positions=16, properties=T5_PROPERTIES, posenc="posenc", raise_on_failure=True):
    """T5 relative-position bucket properties on fn(relative_positions, *, num_buckets,
    max_distance, bidirectional) -> buckets (integers, one per relative position r = key - query).

    buckets:    every bucket equals the exact one (`posenc oracle t5`, reference/t5_bias.hpp), at
                drawn r in both directions, around max_exact and max_distance, up to 4 max_distance
    monotonic:  past keys (r <= 0): the bucket does not decrease as -r grows; bidirectional future
                keys (r > 0): in the upper half (>= num_buckets / 2), not decreasing in r; causal
                future keys: bucket 0
    Buckets are integers, so every profile judges them alike (no budget). Seeded as check_rope; a
    failure is shrunk to the one relative position that fails and names the known mistake when it
    explains the buckets (direction flipped, the other bidirectional flag). Raises AssertionError.
    """
    for p in properties:
        if p not in T5_PROPERTIES:
            raise ValueError(f"check_t5: unknown property {p!r} "
                             f"(known: {', '.join(T5_PROPERTIES)})")
    if not num_buckets or not max_distances or max_positions < 1:
        raise ValueError("check_t5: num_buckets and max_distances must be non-empty and "
                         f"max_positions >= 1 (got max_positions={max_positions})")
    if seed is None:
        seed = int(os.environ.get("POSENC_CHECK_SEED", time.time_ns() % (2 ** 31)))
    print(f"posenc.properties.check_t5: seed={seed} (replay: seed={seed})")
    binary, cache = find_binary(posenc), {}
    for e in range(examples):
        rng = np.random.default_rng([seed, e])
        p = {"num_buckets": int(rng.choice(num_buckets)),
             "max_distance": int(rng.choice(max_distances)),
             "bidirectional": bool(rng.integers(0, 2))}
        nb = p["num_buckets"] // 2 if p["bidirectional"] else p["num_buckets"]
        exact_max, dm = nb // 2, p["max_distance"]
        edges = [0, 1, exact_max - 1, exact_max, exact_max + 1, dm - 1, dm, dm + 1]
        rel = []
        for _ in range(int(rng.integers(1, max_positions + 1))):
            kind = int(rng.integers(0, 3))
            x = int(rng.choice(edges)) if kind < 2 else int(rng.integers(-4 * dm, 4 * dm + 1))
            rel.append(-x if kind == 1 else x)
        for prop in properties:
            f = _t5_evaluate(fn, binary, p, rel, prop, cache)
            if not f:
                continue
            shrinks = 0
            for r in rel:  # the first single relative position that still fails
                shrinks += 1
                g = _t5_evaluate(fn, binary, p, [r], prop, cache)
                if g:
                    rel, f = [r], g
                    break
            kind = "bidirectional" if p["bidirectional"] else "causal"
            msg = (f"posenc.properties.check_t5: property {prop} fails (seed {seed}, example {e}, "
                   f"shrunk in {shrinks} steps)\ncall: num_buckets {p['num_buckets']}, "
                   f"max_distance {p['max_distance']}, {kind}, "
                   f"relative_positions {rel}\n{f}")
            if raise_on_failure:
                raise AssertionError(msg)
            return CheckResult(seed, e + 1, msg)
    return CheckResult(seed, examples)
