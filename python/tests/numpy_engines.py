"""Independent numpy engines for the golden catalog, written the way real engines compute:
none of them calls `posenc engine`; each reads a case's inputs and
parameters and computes its outputs in the arithmetic of the engine family it imitates.

  hf32   HF transformers in float32: inv_freq = 1 / base ** (arange(0, d, 2) / d) in float32
         (the scaled-RoPE rules of modeling_rope_utils `_compute_*_parameters`), float32
         positions, outer product, cos/sin in float32, outputs cast to the target; BLOOM's
         torch.pow slopes with the paper's bias form; sinusoids as tensor2tensor / fairseq
         (concat) and 1 / base ** (2i / d) (paper); float32 attention.
         M-RoPE as Qwen2-VL / Qwen3-VL / GLM-4.1V: get_rope_index on the prompt layout, each
         pair's angle at its stream's position (sectioned or interleaved map), rotate_half
         (GLM-4.1V: adjacent pairs over half the head), float32.
         Model plans: one attention layer of a layer type (its rope_parameters, proportional
         RoPE, the query temperature, soft cap, mask on the positions, sinks), float32.
         MLA as DeepseekV3Attention: q_pe / k_pe de-interleaved, rotated half-split with the
         YaRN tables, cat(nope, pe) per head, one float32 matmul times the softmax scale.
  ggml   ggml / llama.cpp: theta_scale = powf(base, -2/d), theta_i = theta_{i-1} * ts in
         float32 (rope_ext's scaling rules), ALiBi slopes powf(m0, h + 1).
  bloom  BLOOM's ALiBi bias form in float32: bias = slope x key index (the softmax equals the
         paper's slope x (key - query)).
  eager  PyTorch eager in bf16 / f16: float32 tables cast to the dtype, every multiply and add
         rounded to it, matmuls accumulated in float32, softmax in float32.

Each engine returns {expected name: array}, or raises Skip with the reason it cannot compute
the case (a scheme it does not model, a rule the engine family does not have)."""
import math

import numpy as np

from posenc import io as _io
from posenc import layouts

F32 = np.float32


class Skip(Exception):
    """The engine does not compute this case; the message says why."""


# ---- rounding to the compute dtype -------------------------------------------------------------

def rnd(x, dt):
    """x (float32 values) rounded once to dt ('f32', 'bf16', 'f16') and returned as float32."""
    x = np.asarray(x, dtype=F32)
    if dt == "bf16":
        return _io.bf16_to_float32(_io.float32_to_bf16(x))
    if dt == "f16":
        return x.astype(np.float16).astype(F32)
    return x


def expf(x):
    """A faithful float32 exp (glibc's expf, Sleef's u10 in PyTorch): exp in float64 rounded
    once. numpy's own float32 np.exp is not faithful on every CPU (its SIMD kernel is 1.64 ulp
    off on some of tensor2tensor's arguments here), which no float32 pipeline budget allows."""
    return np.exp(np.asarray(x, F32).astype(np.float64)).astype(F32)


def _f32(case, name):
    return case.input_float(name).astype(F32)


# ---- RoPE --------------------------------------------------------------------------------------

def _hf_default_inv_freq(base, d):
    return F32(1.0) / (F32(base) ** (np.arange(0, d, 2, dtype=np.int64).astype(F32) / F32(d)))


def _scaling(case):
    return case.manifest.get("scaling", {})


def hf_rope_parameters(case):
    """(inv_freq float32 [d/2], attention factor as a Python float, softmax scale or None):
    modeling_rope_utils' `_compute_*_parameters` in float32 with Python doubles."""
    p = case.params
    d = layouts.resolve_rotary_dim(p.get("rotary_dim"), p["head_dim"])
    base = p["base"]
    s = p.get("scaling")
    if not s:
        return _hf_default_inv_freq(base, d), p.get("attention_factor", 1.0), None
    derived = _scaling(case).get("derived", {})
    t, factor = s["type"], s.get("factor", 1.0)
    att, softmax = 1.0, None
    if t == "linear":
        inv = _hf_default_inv_freq(base, d) / F32(factor)
    elif t in ("ntk", "dynamic"):
        scale = factor
        if t == "dynamic":  # _compute_dynamic_ntk_parameters at the call's seq_len
            l, mp = max(derived["seq_len"], s["max_position_embeddings"]), s["max_position_embeddings"]
            scale = factor * l / mp - (factor - 1)
        inv = _hf_default_inv_freq(base * scale ** (d / (d - 2)), d)
    elif t == "llama3":
        inv0 = _hf_default_inv_freq(base, d)
        l0, lo, hi = s["original_max_position_embeddings"], s["low_freq_factor"], s["high_freq_factor"]
        wl = F32(2 * math.pi) / inv0
        inv_l = np.where(wl > F32(l0 / lo), inv0 / F32(factor), inv0)
        smooth = (F32(l0) / wl - F32(lo)) / F32(hi - lo)
        smoothed = (F32(1) - smooth) * inv_l / F32(factor) + smooth * inv_l
        medium = ~(wl < F32(l0 / hi)) & ~(wl > F32(l0 / lo))
        inv = np.where(medium, smoothed, inv_l).astype(F32)
    elif t == "yarn":
        if s.get("form", "hf_current") not in ("hf_current", "deepseek_official"):
            raise Skip(f"YaRN form {s.get('form')!r} not modelled")
        inv, att, softmax = _hf_yarn(s, base, d, case)
    elif t == "longrope":
        l0 = s["original_max_position_embeddings"]
        use_long = _longrope_uses_long(s, derived)
        ext = np.asarray(s["long_factor"] if use_long else s["short_factor"], dtype=F32)
        inv = F32(1) / (ext * (F32(base) ** (np.arange(0, d, 2, dtype=np.int64).astype(F32) / F32(d))))
        fac = s["max_position_embeddings"] / l0
        att = s.get("attention_factor") or (1.0 if fac <= 1 else math.sqrt(1 + math.log(fac) / math.log(l0)))
    else:
        raise Skip(f"scaling type {t!r} not modelled")
    return inv.astype(F32), att, softmax


def _longrope_uses_long(s, derived):
    """HF switches per call on its seq_len; vLLM (max_model_len switch) uses the long factors
    for every call once max_model_len (here max_position_embeddings) exceeds the original."""
    l0 = s["original_max_position_embeddings"]
    if s.get("switch") == "vllm_max_model_len":
        return s["max_position_embeddings"] > l0
    if s.get("switch") != "hf_seq_len":
        raise Skip(f"LongRoPE switch {s.get('switch')!r} not modelled")
    return derived["seq_len"] > l0


def _yarn_mscale(scale, mscale=1.0):
    return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0


def _hf_yarn(s, base, d, case):
    factor = s["factor"]
    mscale, mscale_all = s.get("mscale") or 0.0, s.get("mscale_all_dim") or 0.0
    att = s.get("attention_factor") or 0.0
    if not att:
        att = (_yarn_mscale(factor, mscale) / _yarn_mscale(factor, mscale_all)
               if mscale and mscale_all else _yarn_mscale(factor))
    l0 = s["original_max_position_embeddings"]

    def corr(rot):
        return (d * math.log(l0 / (rot * 2 * math.pi))) / (2 * math.log(base))
    low, high = corr(s["beta_fast"]), corr(s["beta_slow"])
    if s.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, d - 1)
    if low == high:
        high += 0.001
    pos_freqs = F32(base) ** (np.arange(0, d, 2, dtype=np.int64).astype(F32) / F32(d))
    extrap, interp = F32(1) / pos_freqs, F32(1) / (F32(factor) * pos_freqs)
    ramp = np.clip((np.arange(d // 2, dtype=F32) - F32(low)) / F32(high - low), 0, 1).astype(F32)
    mask = F32(1) - ramp
    inv = interp * (F32(1) - mask) + extrap * mask
    softmax = None
    if s.get("mla"):  # DeepSeek: softmax_scale = q_head_dim^-0.5 * mscale(factor, mscale_all)^2
        q_head_dim = case.params.get("softmax_head_dim", case.params["head_dim"])
        m = _yarn_mscale(factor, mscale_all)
        if s.get("form") == "deepseek_official":  # inference/model.py: args.mscale (1 if unset)
            m = _yarn_mscale(factor, mscale or 1.0)
        softmax = q_head_dim ** -0.5 * m * m
        att = 1.0  # DeepSeek's HF code folds the multiplier into the softmax scale
    return inv, att, softmax


def hf_angles(case, inv_freq):
    return case.inputs["positions"].astype(F32)[:, None] * inv_freq[None, :]


def ggml_theta_scale(base, d):
    return F32(base) ** (F32(-2.0) / F32(d))


def ggml_angles(case, dynamic_base=False):
    """(angles float32 [tokens, d/2], attention factor): ggml_rope_ext's recurrence and rules.
    dynamic_base: a dynamic-NTK case is run with the adjusted base the caller passes llama.cpp
    as freq_base (HF's rule in Python double at the call's seq_len)."""
    p = case.params
    d = layouts.resolve_rotary_dim(p.get("rotary_dim"), p["head_dim"])
    base = p["base"]
    s = p.get("scaling") or {}
    t = s.get("type")
    if t == "dynamic":
        if not dynamic_base:
            raise Skip("llama.cpp has no dynamic NTK rule: engine ggml-dynamic passes the "
                       "adjusted base")
        f, mp = s["factor"], s["max_position_embeddings"]
        scale = f * max(_scaling(case)["derived"]["seq_len"], mp) / mp - (f - 1)
        base = base * scale ** (d / (d - 2))
    if t == "ntk":
        base = base * s["factor"] ** (d / (d - 2))
    if t == "yarn" and s.get("mla"):
        raise Skip("DeepSeek MLA under llama.cpp: its kq_scale convention is not modelled here")
    ts = ggml_theta_scale(base, d)
    pos = case.inputs["positions"]
    theta = np.empty((len(pos), d // 2), F32)
    cur = pos.astype(F32)
    for i in range(d // 2):
        theta[:, i] = cur
        cur = (cur * ts).astype(F32)
    att = p.get("attention_factor", 1.0)
    if t == "linear":
        theta = F32(1.0 / s["factor"]) * theta
    elif t == "llama3":  # convert_hf_to_gguf's rope_freqs, float64 then stored float32
        l0, lo, hi, f = (s["original_max_position_embeddings"], s["low_freq_factor"],
                         s["high_freq_factor"], s["factor"])
        ff = []
        for i in range(d // 2):
            wl = 2 * math.pi / base ** (-2.0 * i / d)
            if wl < l0 / hi:
                ff.append(1.0)
            elif wl > l0 / lo:
                ff.append(f)
            else:
                g = (l0 / wl - lo) / (hi - lo)
                ff.append(1.0 / ((1 - g) / f + g))
        theta = theta / np.asarray(ff, dtype=F32)
    elif t == "longrope":
        use_long = _longrope_uses_long(s, _scaling(case)["derived"])
        theta = theta / np.asarray(s["long_factor"] if use_long else s["short_factor"], dtype=F32)
        fac = s["max_position_embeddings"] / s["original_max_position_embeddings"]
        att = s.get("attention_factor") or math.sqrt(1 + math.log(fac) / math.log(s["original_max_position_embeddings"]))
    elif t == "yarn":
        theta, att = _ggml_yarn(s, base, d, theta)
    return theta.astype(F32), att


def _ggml_yarn(s, base, d, theta):
    def corr(rot):  # ggml_rope_yarn_corr_dim, float32
        return F32(d) * np.log(F32(s["original_max_position_embeddings"]) / (F32(rot) * F32(2) * F32(math.pi))) \
            / (F32(2) * np.log(F32(base)))
    low = max(F32(0), np.floor(corr(s["beta_fast"])))
    high = min(F32(d - 1), np.ceil(corr(s["beta_slow"])))
    freq_scale = F32(1.0 / s["factor"])
    extrap = theta
    interp = freq_scale * extrap
    y = (np.arange(d // 2, dtype=F32) - low) / max(F32(0.001), F32(high - low))
    mix = F32(1) - np.minimum(F32(1), np.maximum(F32(0), y))
    theta = interp * (F32(1) - mix) + extrap * mix
    # the converter stores attn_factor = a / (1 + 0.1 ln s); rope_yarn multiplies it back
    a = s.get("attention_factor") or _yarn_mscale(s["factor"])
    m = F32(1) + F32(0.1) * np.log(F32(1) / freq_scale)
    return theta, float(F32(a / _yarn_mscale(s["factor"])) * m)


def _rotate(x, cos, sin, layout, r, dt):
    """x float32 [tokens, heads, head_dim]; cos, sin [tokens, r/2] already in dt."""
    c, s = cos[:, None, :], sin[:, None, :]
    if layout == "interleaved":
        a, b = x[..., 0:r:2], x[..., 1:r:2]
    else:
        a, b = x[..., : r // 2], x[..., r // 2: r]
    ya = rnd(rnd(a * c, dt) - rnd(b * s, dt), dt)
    yb = rnd(rnd(b * c, dt) + rnd(a * s, dt), dt)
    y = x.copy()
    if layout == "interleaved":
        y[..., 0:r:2], y[..., 1:r:2] = ya, yb
    else:
        y[..., : r // 2], y[..., r // 2: r] = ya, yb
    return y


def _scores(case, q_rot, k_rot, dt):
    p = case.params
    qh, kh = q_rot.transpose(1, 0, 2), k_rot.transpose(1, 0, 2)
    kv = [layouts.kv_head_for(h, p["n_q_heads"], p["n_kv_heads"]) for h in range(qh.shape[0])]
    return rnd(np.stack([qh[h] @ kh[kv[h]].T for h in range(qh.shape[0])]).astype(F32), dt)


def rope_outputs(case, angles, inv_freq, att, softmax, dt):
    """Tables from float32 angles (times the attention factor in float32, cast to dt), rotation
    and scores in dt."""
    p = case.params
    r = layouts.resolve_rotary_dim(p.get("rotary_dim"), p["head_dim"])
    cos, sin = np.cos(angles), np.sin(angles)
    if att != 1.0:
        cos, sin = cos * F32(att), sin * F32(att)
    cos, sin = rnd(cos, dt), rnd(sin, dt)
    out = {"inv_freq": inv_freq, "cos": cos, "sin": sin,
           "attention_factor": np.asarray([att], F32)}
    if softmax is not None:
        out["softmax_scale"] = np.asarray([softmax], F32)
    out["q_rot"] = _rotate(_f32(case, "q"), cos, sin, p["layout"], r, dt)
    if "k" in case.inputs:
        out["k_rot"] = _rotate(_f32(case, "k"), cos, sin, p["layout"], r, dt)
        out["scores"] = _scores(case, out["q_rot"], out["k_rot"], dt)
    return {n: a for n, a in out.items() if n in case.expected}


def _rope_dt(case, mode):
    dt = case.params["dtype"]
    if mode in ("bf16", "f16") and dt != mode:
        raise Skip(f"the eager {mode} engine computes in {mode}; the case's target is {dt}")
    return mode if mode in ("bf16", "f16") else "f32"


def rope_hf(case, mode="f32"):
    dt = _rope_dt(case, mode)
    inv, att, softmax = hf_rope_parameters(case)
    return rope_outputs(case, hf_angles(case, inv), inv, att, softmax, dt)


def mla_hf(case):
    """HF's DeepseekV3Attention in float32 (scheme mla): YaRN inv_freq on the qk_rope_head_dim
    channels, q_pe and the one k_pe head de-interleaved (rope_interleave: even channels, then
    odd) and rotated half-split, query = cat(q_nope, q_pe_rot), key = cat(k_nope, k_pe_rot
    expanded to every head), scores = query @ key^T (float32) * softmax_scale, the scale
    q_head_dim^-0.5 * mscale(factor, mscale_all_dim)^2 as a Python double rounded to float32."""
    p = case.params
    dn, dr = p["qk_nope_head_dim"], p["qk_rope_head_dim"]
    holder = type("P", (), {"params": {"softmax_head_dim": dn + dr, "head_dim": dr}})
    inv, att, softmax = _hf_yarn(p["scaling"], p["base"], dr, holder)
    angles = hf_angles(case, inv)
    cos, sin = np.cos(angles) * F32(att), np.sin(angles) * F32(att)

    def rope(x):  # x [heads, tokens, dr] -> rotated, same layout
        if p["rope_interleave"]:
            x = np.concatenate([x[..., 0::2], x[..., 1::2]], axis=-1)
        return _rotate(x.transpose(1, 0, 2), cos, sin, "half_split", dr, "f32").transpose(1, 0, 2)
    q_pe_rot, k_pe_rot = rope(_f32(case, "q_pe")), rope(_f32(case, "k_pe"))
    q = np.concatenate([_f32(case, "q_nope"), q_pe_rot], axis=-1)
    k_nope = _f32(case, "k_nope")
    k = np.concatenate([k_nope, np.broadcast_to(k_pe_rot, k_nope.shape[:2] + (dr,))], axis=-1)
    scale = F32(softmax if softmax is not None else (dn + dr) ** -0.5)
    scores = np.stack([(q[h] @ k[h].T).astype(F32) * scale for h in range(q.shape[0])])
    out = {"softmax_scale": np.asarray([scale], F32), "q_pe_rot": q_pe_rot,
           "k_pe_rot": k_pe_rot, "scores": scores.astype(F32)}
    return {n: a for n, a in out.items() if n in case.expected}


def rope_ggml(case, dynamic_base=False, kv16=False):
    """ggml's rope_ext. kv16: llama.cpp's 16-bit KV cache: q and k rotated in float32 and
    stored in the case's 16-bit dtype, scores from the stored q and k (float32 accumulation)."""
    if kv16 and case.params["dtype"] == "f32":
        raise Skip("the 16-bit KV path stores q and k in f16/bf16; the case's target is f32")
    angles, att = ggml_angles(case, dynamic_base)
    p = case.params
    d = layouts.resolve_rotary_dim(p.get("rotary_dim"), p["head_dim"])
    out = rope_outputs(case, angles, None, att, None, "f32")
    if kv16 and "scores" in out:
        dt = case.params["dtype"]
        out["scores"] = _scores(case, rnd(out["q_rot"], dt), rnd(out["k_rot"], dt), dt)
    out.pop("inv_freq", None)  # ggml has no inv_freq table (theta_scale powers, not stored)
    out.pop("attention_factor", None) if "attention_factor" not in case.expected else None
    if "inv_freq" in case.expected and not p.get("scaling"):
        ts = ggml_theta_scale(p["base"], d)
        w = np.empty(d // 2, F32)
        cur = F32(1)
        for i in range(d // 2):
            w[i], cur = cur, F32(cur * ts)
        out["inv_freq"] = w
    return out


# ---- ALiBi -------------------------------------------------------------------------------------

def bloom_slopes(n):
    """HF build_alibi_tensor: base = float32(2^(-2^-(log2 c - 3))), torch.pow(base, 1..c); the
    extra heads use 2^(-2^-(log2 2c - 3)) and the odd powers."""
    c = 2 ** int(math.floor(math.log2(n)))
    base = F32(2 ** (-(2 ** -(math.log2(c) - 3))))
    slopes = list(np.power(base, np.arange(1, c + 1, dtype=np.int32).astype(F32)))
    if c != n:
        extra = F32(2 ** (-(2 ** -(math.log2(2 * c) - 3))))
        k = np.arange(1, 1 + 2 * min(c, n - c), 2, dtype=np.int32).astype(F32)
        slopes += list(np.power(extra, k))
    return np.asarray(slopes, F32)


def ggml_slopes(n):
    c = 2 ** int(math.floor(math.log2(n)))
    m0 = F32(2.0) ** (F32(-8.0) / F32(c))
    m1 = F32(2.0) ** (F32(-4.0) / F32(c))
    h = np.arange(n)
    return np.where(h < c, m0 ** (h + 1).astype(F32), m1 ** (2 * (h - c) + 1).astype(F32)).astype(F32)


def slopes_outputs(case, slopes_of):
    n, h = case.inputs["n_heads"], case.inputs["head"]
    by_n = {int(k): slopes_of(int(k)) for k in np.unique(n)}
    return {"slopes": np.asarray([by_n[int(a)][int(b)] for a, b in zip(n, h)], F32)}


def _alibi_bias(case, slopes, form, dt):
    """float32 bias [H, Tq, Tk] of the engine's form, cast to dt."""
    p = case.params
    qpos = case.inputs["query_positions"].astype(np.int64)
    kpos = case.inputs["key_positions"].astype(np.int64)
    m = slopes[:, None, None]
    if form == "bloom":
        dist = np.broadcast_to(kpos[None, :], (len(qpos), len(kpos)))
    elif form == "mpt":
        dist = np.broadcast_to(kpos[None, :] - (p["tk"] - 1), (len(qpos), len(kpos)))
    elif form == "symmetric":
        dist = -np.abs(qpos[:, None] - kpos[None, :])
    else:
        dist = kpos[None, :] - qpos[:, None]
    return rnd(m * dist.astype(F32)[None], dt)


def attention_outputs(case, dt, bias=None):
    """Eager attention: scores = q.k (float32 accumulation, rounded to dt), * scale (dt), + bias
    (dt), masked, softmax in float32, probs cast to dt, out = probs . v (float32 accumulation)."""
    p = case.params
    H, Hkv = p["n_heads"], p["n_kv_heads"]
    q, k, v = _f32(case, "q"), _f32(case, "k"), _f32(case, "v")
    kv = [h // (H // Hkv) for h in range(H)]
    s = np.stack([q[:, h, :] @ k[:, kv[h], :].T for h in range(H)]).astype(F32)  # [H, Tq, Tk]
    s = rnd(s, dt)
    if p.get("scale_kind") == "inv_sqrt_head_dim":
        s = rnd(s * F32(1.0 / math.sqrt(p["head_dim"])), dt)
    elif p.get("scale_kind") not in ("none", None):
        raise Skip(f"scale_kind {p.get('scale_kind')!r} not modelled")
    if bias is not None:
        s = rnd(s + bias, dt)
    qpos = p["query_offset"] + np.arange(p["tq"])
    j = np.arange(p["tk"])
    visible = np.ones((p["tq"], p["tk"]), bool)
    if p.get("causal"):
        visible &= j[None, :] <= qpos[:, None]
    if p.get("window", 0) > 0:
        visible &= qpos[:, None] - p["window"] < j[None, :]
    if "key_padding" in case.inputs:
        visible &= (case.inputs["key_padding"] == 0)[None, :]
    s = np.where(visible[None], s, -np.inf).astype(F32)
    mx = np.max(s, axis=-1, keepdims=True)
    mx = np.where(np.isfinite(mx), mx, F32(0))
    e = np.exp(s - mx).astype(F32)
    tot = np.sum(e, axis=-1, keepdims=True, dtype=F32)
    probs = np.where(tot > 0, e / np.where(tot > 0, tot, F32(1)), F32(0)).astype(F32)
    probs = rnd(probs, dt)
    out = np.stack([probs[h] @ v[:, kv[h], :] for h in range(H)]).astype(F32)  # [H, Tq, dv]
    return {"probs": probs, "out": rnd(out.transpose(1, 0, 2), dt)}


def _attn_dt(case, mode):
    dt = case.params["dtype"]
    if mode in ("bf16", "f16"):
        if dt != mode:
            raise Skip(f"the eager {mode} engine computes in {mode}; the case's target is {dt}")
        return mode
    return "f32"


def alibi_attention(case, slopes, form, mode):
    dt = _attn_dt(case, mode)
    return attention_outputs(case, dt, _alibi_bias(case, slopes, form, dt))


def _alibi_form(case):
    return case.manifest["alibi"]["form"]


def alibi_hf(case, mode="f32"):
    if case.variant == "slopes":
        if mode != "f32":
            raise Skip("slopes are an f32 table; the eager engines compute them in float32 (hf32)")
        return slopes_outputs(case, bloom_slopes)
    return alibi_attention(case, bloom_slopes(case.params["n_heads"]), _alibi_form(case), mode)


def alibi_ggml(case):
    if case.variant == "slopes":
        return slopes_outputs(case, ggml_slopes)
    if _alibi_form(case) == "symmetric":
        raise Skip("ggml's ALiBi is causal (key - query); the symmetric form is not a ggml mode")
    return alibi_attention(case, ggml_slopes(case.params["n_heads"]), "paper", "f32")


def alibi_bloom(case):
    if case.variant == "slopes":
        raise Skip("slope tables: the BLOOM engine's slopes are hf32's")
    if _alibi_form(case) not in ("paper", "bloom"):
        raise Skip(f"the {_alibi_form(case)} form's softmax differs from slope x key index")
    return alibi_attention(case, bloom_slopes(case.params["n_heads"]), "bloom", "f32")


# ---- sinusoids ---------------------------------------------------------------------------------

def sinusoid_outputs(case, mode="f32", paper_inv="reciprocal"):
    """paper: inv_freq = 1 / base ** (2i / d) (paper_inv 'reciprocal') or base ** (-2i / d)
    ('negpow'), interleaved sin / cos; concat: tensor2tensor's exp(i * -ln(base) / (n - 1))."""
    p = case.params
    dt = _attn_dt(case, mode)
    d, n, base = p["d_model"], p["n_freq"], p["base"]
    i = np.arange(n, dtype=F32)
    if p["variant"] == "paper":
        e = (F32(2) * i) / F32(d)
        inv = F32(1) / (F32(base) ** e) if paper_inv == "reciprocal" else F32(base) ** (-e)
    else:
        inc = F32(math.log(base) / max(n - 1, 1))
        inv = expf((i * -inc).astype(F32))
    ang = case.inputs["positions"].astype(F32)[:, None] * inv[None, :]
    sin, cos = np.sin(ang), np.cos(ang)
    pe = np.zeros((len(ang), d), F32)
    if p["variant"] == "paper":
        pe[:, 0::2] = sin[:, : (d + 1) // 2]
        pe[:, 1::2] = cos[:, : d // 2]
    else:
        pe[:, :n], pe[:, n: 2 * n] = sin, cos
    pe = rnd(pe, dt)
    return {"inv_freq": inv, "pe": pe, "h": rnd(_f32(case, "e") + pe, dt)}


# ---- M-RoPE (Qwen2-VL, Qwen2.5-VL, Qwen3-VL) ---------------------------------------------------

def _mrope_prompt(spans, index, release="v4", temporal=None, tps=None, grid_hw_swap=False):
    """HF's get_rope_index on one prompt: int64 positions [3, L] and rope_delta.

    release "v4" (HF <= 4.57, Qwen's code): every span starts at max(positions so far) + 1;
    "v5" (HF 5.x, PR #43972): a span starts where the previous one's run ends, text after a
    visual span at its start + max(h, w) (the temporal extent ignored), rope_delta still from the
    overall max. temporal overrides the case's rule: "frame_index" (Qwen2-VL's t = f),
    "scaled_float32" (trunc(f * s * tps) on float32 tensors), "scaled_int_seconds" (HF 4.52-5.15:
    int(s) before the product). tps overrides tokens_per_second; grid_hw_swap reads each grid
    as (t, w, h) (a planted bug)."""
    m = index["spatial_merge_size"]
    tps = index.get("tokens_per_second", 2.0) if tps is None else tps
    rule = temporal or index.get("temporal", "frame_index")
    cols, nxt, cur = [], 0, 0
    for s in spans:
        start = cur if release == "v5" else nxt
        if s["type"] == "text":
            n = s["tokens"]
            cols.append(np.tile(np.arange(n, dtype=np.int64) + start, (3, 1)))
            cur = start + n
        else:
            t, h, w = (int(x) for x in s["grid_thw"])
            if grid_hw_swap:
                h, w = w, h
            h, w = h // m, w // m
            ti = np.arange(t, dtype=np.int64)
            if s["type"] == "video" and rule == "scaled_float32":
                spg = F32(s.get("second_per_grid", 1.0))
                ti = (ti.astype(F32) * spg * F32(tps)).astype(np.int64)
            elif s["type"] == "video" and rule == "scaled_int_seconds":
                ti = ti * int(s.get("second_per_grid", 1.0)) * int(tps)
            tt = np.repeat(ti, h * w)
            hh = np.tile(np.repeat(np.arange(h, dtype=np.int64), w), t)
            ww = np.tile(np.arange(w, dtype=np.int64), t * h)
            cols.append(np.stack([tt, hh, ww]) + start)
            cur = start + max(h, w)
        nxt = max(nxt, int(cols[-1].max()) + 1)
    pos = np.concatenate(cols, axis=1)
    return pos, nxt - pos.shape[1]


def mrope_hf_vision(case):
    """Qwen2-VL's vision tower in float32 (HF): rot_pos_emb's (h, w) of each patch (merge
    windows of m x m, row by row), VisionRotaryEmbedding(head_dim / 2)'s frequencies for each
    axis, the h and w angles concatenated, rotate_half over the whole head."""
    p = case.params
    t, h, w = p["grid"]["grid_thw"]
    m = p["grid"]["spatial_merge_size"]
    hpos = np.arange(h)[:, None].repeat(w, 1).reshape(h // m, m, w // m, m).transpose(0, 2, 1, 3)
    wpos = np.arange(w)[None, :].repeat(h, 0).reshape(h // m, m, w // m, m).transpose(0, 2, 1, 3)
    pos = np.tile(np.stack([hpos.reshape(-1), wpos.reshape(-1)]), (1, t)).astype(np.int64)
    inv = _hf_default_inv_freq(p["base"], p["head_dim"] // 2)
    angles = np.concatenate([pos[0][:, None].astype(F32) * inv[None, :],
                             pos[1][:, None].astype(F32) * inv[None, :]], axis=1)
    out = rope_outputs(case, angles.astype(F32), inv, 1.0, None, "f32")
    out["positions"] = pos
    return {n: a for n, a in out.items() if n in case.expected}


def mrope_hf_trace(case, rule=None):
    """An HF-style engine replaying an M-RoPE KV-cache trace (docs/verifying-vl.md): each
    request's prompt positions from get_rope_index, tokens after the prompt at cache position
    + that prompt's rope_delta; keys rotated in float32 when written and stored in the lowest
    empty slot; truncate drops cache positions >= keep; a shift drops the RoPE positions
    [p0, p0 + n_discard), moves later tokens down and re-rotates their keys by -n_discard."""
    p, tr = case.params, case.manifest["trace"]
    d = layouts.resolve_rotary_dim(p.get("rotary_dim"), p["head_dim"])
    inv = _hf_default_inv_freq(p["base"], d)
    stream = mrope_stream_of_pair(case, rule)
    hq, hk, C = p["n_q_heads"], p["n_kv_heads"], p["cache_rows"]
    kv = [layouts.kv_head_for(h, hq, hk) for h in range(hq)]
    prompts = [_mrope_prompt(r["spans"], p["index"]) for r in tr["requests"]]

    def rotate(x, pos):  # x [n, heads, d], pos [3, n]
        ang = pos[stream, :].T.astype(F32) * inv[None, :]
        return _rotate(x, np.cos(ang), np.sin(ang), p["layout"], d, "f32")

    slots = [None] * C  # {"index", "pos", "key"}
    req, consumed, shifted, out = 0, 0, 0, {}
    for st in tr["steps"]:
        sn, kind = st["name"], st["kind"]
        if kind == "truncate":
            req, consumed = st["request"], st["keep"] + shifted
            slots = [e if e and e["index"] < st["keep"] else None for e in slots]
        elif kind == "shift":
            lo, n = st["p0"], st["n_discard"]
            for i, e in enumerate(slots):
                if e and lo <= e["pos"][0] < lo + n:
                    slots[i] = None
                elif e and e["pos"][0] >= lo + n:
                    e["pos"], e["index"] = e["pos"] - n, e["index"] - n
                    e["key"] = rotate(e["key"][None], np.full((3, 1), -n, np.int64))[0]
            shifted += n
        else:
            n = st["tokens"]
            prompt, delta = prompts[req]
            idx = np.arange(consumed, consumed + n, dtype=np.int64) - shifted
            pos = np.empty((3, n), np.int64)
            for i in range(n):
                j = consumed + i
                pos[:, i] = prompt[:, j] - shifted if j < prompt.shape[1] else idx[i] + delta
            consumed += n
            q = case.input_float(sn + ".q").astype(F32)[0]
            k = case.input_float(sn + ".k").astype(F32)[0]
            q_rot, k_rot = rotate(q, pos), rotate(k, pos)
            used = []
            for i in range(n):
                s = next(x for x in range(C) if slots[x] is None)
                slots[s] = {"index": int(idx[i]), "pos": pos[:, i].copy(), "key": k_rot[i]}
                used.append(s)
            listed = sorted((e["index"], x) for x, e in enumerate(slots) if e)
            keys = np.zeros((C, hk, p["head_dim"]), F32)
            for r, (_, x) in enumerate(listed):
                keys[r] = slots[x]["key"]
            sc = np.stack([q_rot[:, h, :] @ keys[:, kv[h], :].T for h in range(hq)], axis=1)
            out.update({sn + ".positions": idx[None], sn + ".rope_positions": pos.T[None],
                        sn + ".slots": np.asarray(used, np.int64)[None],
                        sn + ".q_rot": q_rot[None], sn + ".k_rot": k_rot[None],
                        sn + ".scores": sc.astype(F32)[None]})
        listed = sorted((e["index"], x) for x, e in enumerate(slots) if e)
        cpos = np.full((1, C), -1, np.int64)
        crope = np.full((1, C, 3), -1, np.int64)
        ck = np.zeros((1, C, hk, p["head_dim"]), F32)
        for r, (i, x) in enumerate(listed):
            cpos[0, r], crope[0, r], ck[0, r] = i, slots[x]["pos"], slots[x]["key"]
        out.update({sn + ".cache_positions": cpos, sn + ".cache_rope_positions": crope,
                    sn + ".cache_k": ck})
    return {n: a for n, a in out.items() if n in case.expected}


def mrope_positions(case, **release):
    """HF's get_rope_index on the case's prompt layout (params.prompt.spans): text positions run
    on from max(previous) + 1 in all three streams; a visual span of grid (t, h, w) takes
    (t_index, h / m, w / m) after the text before it, with Qwen2.5-VL's t_index =
    long(arange(t) * second_per_grid * tokens_per_second) in float32; decode tokens at their
    cache position + rope_delta (max + 1 - prompt length). Returns int64 [3, T]. `release`:
    _mrope_prompt's release, temporal, tps and grid_hw_swap."""
    p = case.params
    pos, delta = _mrope_prompt(p["prompt"]["spans"], p["index"], **release)
    n_prompt = pos.shape[1]
    dec = np.arange(n_prompt, n_prompt + p.get("n_decode", 0), dtype=np.int64) + delta
    return np.concatenate([pos, np.tile(dec, (3, 1))], axis=1)


def mrope_stream_of_pair(case, rule=None):
    """The stream each of the d/2 pairs reads: `sectioned` (contiguous mrope_section blocks, as
    apply_multimodal_rotary_pos_emb splits the table) or `interleaved` (Qwen3-VL's
    apply_interleaved_mrope: pair i reads h when i % 3 == 1 and i < 3 sec[1], w when i % 3 == 2
    and i < 3 sec[2], else t)."""
    p = case.params
    sec = p["map"]["mrope_section"]
    rule = rule or p["map"]["rule"]
    half = layouts.resolve_rotary_dim(p.get("rotary_dim"), p["head_dim"]) // 2
    if rule == "sectioned":
        return np.repeat(np.arange(3), sec)[:half]
    s = np.zeros(half, dtype=np.int64)
    for axis in (1, 2):
        idx = np.arange(axis, 3 * sec[axis], 3)
        s[idx[idx < half]] = axis
    return s


class _ParamsOverride:
    """A case whose params differ in a few keys (an engine told something else)."""

    def __init__(self, case, **params):
        self._case = case
        self.params = {**case.params, **params}

    def __getattr__(self, name):
        return getattr(self._case, name)


def mrope_hf(case, rule=None, layout=None, order=(0, 1, 2), write_right_positions=False,
             base=None, **release):
    """HF float32 M-RoPE: float32 inv_freq (over the rotary_dim channels: GLM-4.1V rotates half
    the head) and positions, the angle of each pair at its stream's position, float32 cos/sin,
    the case's pairs (rotate_half; GLM-4.1V's adjacent channels, `interleaved`), float32
    scores. `rule` overrides the case's map (a wrong-map engine), `layout` its pairs (an engine
    rotating GLM-4.1V with Qwen2-VL's rotate_half). `release` (release="v5", temporal=...,
    tps=..., grid_hw_swap=True) computes the positions as another HF release (or a planted bug)
    does; `order` feeds the streams to the rotation in another order (position_ids rows
    permuted: (1, 2, 0) is (h, w, t)), the positions written as fed unless
    `write_right_positions`; `base` replaces rope_theta."""
    if layout is not None:
        case = _ParamsOverride(case, layout=layout)
    if case.variant == "trace":
        return mrope_hf_trace(case, rule)
    if case.variant == "vision":
        return mrope_hf_vision(case)
    p = case.params
    d = layouts.resolve_rotary_dim(p.get("rotary_dim"), p["head_dim"])
    inv = _hf_default_inv_freq(p["base"] if base is None else base, d)
    right = mrope_positions(case, **release)
    pos = right[list(order), :]
    stream = mrope_stream_of_pair(case, rule)
    angles = pos[stream, :].T.astype(F32) * inv[None, :]
    out = rope_outputs(case, angles.astype(F32), inv, 1.0, None, "f32")
    out["positions"] = right if write_right_positions else pos
    return {n: a for n, a in out.items() if n in case.expected}


# ---- model plans (one layer type) --------------------------------------------------------------

class _RopeOf:
    """A layer type's rotation as hf_rope_parameters reads a rope case's params."""

    def __init__(self, t):
        s = t.get("scaling") or {"type": "default"}
        self.params = {"head_dim": t["head_dim"], "rotary_dim": t["rotary_dim"], "base": t["base"],
                       "scaling": None if s["type"] in ("default", "none") else s}
        self.manifest = {}


def _plan_rotation(t):
    """(inv_freq float32 [h/2], attention factor) of a layer type, as HF computes it: the type's
    rope_parameters through modeling_rope_utils, proportional RoPE as the rotated frequencies
    of base ** (arange(0, 2k, 2) / h) and zeros after them."""
    if t["rope"] == "proportional":
        h = t["head_dim"]
        k = int(t["proportional"]["partial_rotary_factor"] * h // 2)
        inv = np.zeros(h // 2, F32)
        inv[:k] = _hf_default_inv_freq(t["base"], h)[:k] / F32(t["proportional"]["factor"])
        return inv, 1.0
    with np.errstate(divide="ignore", invalid="ignore"):  # llama3 with high == low factor
        inv, att, softmax = hf_rope_parameters(_RopeOf(t))  # (Llama 4): no smoothed band
    if softmax is not None:
        raise Skip("an MLA softmax factor is not a plan case's")
    return inv, att


def _hf_qk_norm(x, n, w):
    """HF's per-head q/k norm in float32: x * rsqrt(mean(x^2) + eps) (Llama4TextL2Norm, no
    weights), times (1 + w) (Gemma3RMSNorm) or w (Qwen3RMSNorm, Gemma 4) where it has them."""
    ms = np.mean(x * x, axis=-1, keepdims=True, dtype=F32).astype(F32)
    y = (x * (F32(1) / np.sqrt(ms + F32(n["eps"])))).astype(F32)
    if n["kind"] == "rms":
        y = (y * (F32(n["weight_offset"]) + w)).astype(F32)
    return y


# Bugs an engine author plants (diagnose's test, test_plan_diagnose.py): each one type's field
# changed the way a newcomer's engine gets it wrong.
PLAN_BUGS = ("global_rope_on_sliding", "rope_theta_default", "window_plus_1", "window_minus_1",
             "window_plus_2", "other_type", "qk_norm_missing", "temperature_p",
             "temperature_p_plus_1", "temperature_offset", "temperature_scale", "yarn_truncate_flip",
             "sinks_dropped", "rope_on_nope")


def _plan_bug(t, types, bug):
    """The type dict an engine with `bug` computes instead of `t` (Skip where it cannot apply)."""
    t = dict(t)
    if bug is None:
        return t
    rot = ("rope", "base", "rotary_dim", "layout", "scaling", "proportional")

    def other(pred):
        for o in types:
            if o["name"] != t["name"] and o["head_dim"] == t["head_dim"] and pred(o):
                return o
        raise Skip(f"{bug}: no other layer type to take")

    if bug == "global_rope_on_sliding":
        if t["mask"] != "sliding" or t["rope"] == "none":
            raise Skip("global_rope_on_sliding: a sliding RoPE type only")
        g = other(lambda o: o["mask"] != "sliding" and o["rope"] != "none")
        for key in rot:
            t.pop(key, None)
            if key in g:
                t[key] = g[key]
    elif bug == "rope_on_nope":
        if t["rope"] != "none":
            raise Skip("rope_on_nope: a NoPE type only")
        g = other(lambda o: o["rope"] != "none")
        for key in rot:
            if key in g:
                t[key] = g[key]
    elif bug == "rope_theta_default":
        if t["rope"] == "none" or t["base"] == 10000.0:
            raise Skip("rope_theta_default: a rotating type whose base is not 10000")
        t["base"] = 10000.0
    elif bug.startswith("window_"):
        if t["mask"] != "sliding":
            raise Skip("window bugs: a sliding type only")
        t["window"] = t["window"] + {"window_plus_1": 1, "window_minus_1": -1, "window_plus_2": 2}[bug]
    elif bug == "other_type":
        o = other(lambda o: True)
        t = dict(o)
    elif bug == "qk_norm_missing":
        if not t.get("qk_norm"):
            raise Skip("qk_norm_missing: a type with a q/k norm only")
        t["qk_norm"] = None
    elif bug.startswith("temperature_"):
        tt = dict(t.get("temperature") or {})
        if not tt:
            raise Skip("temperature bugs: a type with a query temperature only")
        if bug == "temperature_p":
            if tt["rule"] != "llama4":
                raise Skip("temperature_p: Llama 4's rule only")
            tt["rule"] = "mistral"
        elif bug == "temperature_p_plus_1":
            if tt["rule"] != "mistral":
                raise Skip("temperature_p_plus_1: Mistral's rule only")
            tt["rule"] = "llama4"
        elif bug == "temperature_offset":  # floor((p + 2) / F): two tokens early
            tt["offset"] = 2
        elif bug == "temperature_scale":  # the coefficient doubled
            tt["coefficient"] = 2 * tt["coefficient"]
        t["temperature"] = tt
    elif bug == "yarn_truncate_flip":
        sc = dict(t.get("scaling") or {})
        if t["rope"] != "rope" or sc.get("type") != "yarn":
            raise Skip("yarn_truncate_flip: a YaRN type only")
        sc["truncate"] = not sc["truncate"]
        t["scaling"] = sc
    elif bug == "sinks_dropped":
        if not t.get("sinks"):
            raise Skip("sinks_dropped: a type with sinks only")
        t["sinks"] = False
    else:
        raise ValueError(bug)
    return t


def plan_hf(case, global_on_sliding=False, bug=None):
    """One attention layer of a plan's type, the way HF transformers computes it in float32:
    the q/k norm where the type has one and the case's q, k are projections (before the rotation
    for Gemma 3, after it for Llama 4), the type's inv_freq, float32 angles at the tokens'
    positions, cos/sin times the attention factor, rotate_half (interleaved pairs where the type
    says), Llama 4's temperature log1p(floor((p + 1) / F)) * c + 1 (Mistral's: floor(p / L0)) on
    the rotated q, scores q . k * 1/sqrt(query_pre_attn_scalar or head_dim) (soft-capped as Gemma
    2), the mask on the positions, softmax with the sink logit concatenated and dropped,
    probs @ v; all float32. `global_on_sliding`: a sliding type rotated with the plan's global
    RoPE (Gemma 3's bug); `bug`: one of PLAN_BUGS."""
    p = case.params
    t = dict(p["type"])
    if global_on_sliding:
        bug = "global_rope_on_sliding"
    t = _plan_bug(t, p["plan"]["types"], bug)
    pos = case.inputs["positions"].astype(np.int64)
    q, k, v = _f32(case, "q"), _f32(case, "k"), _f32(case, "v")
    norm = t.get("qk_norm") if p.get("qk_inputs") == "projections" else None
    wq = _f32(case, "q_norm_weight") if norm and norm["kind"] == "rms" else None
    wk = _f32(case, "k_norm_weight") if norm and norm["kind"] == "rms" else None
    if norm and norm["position"] == "before_rope":
        q, k = _hf_qk_norm(q, norm, wq), _hf_qk_norm(k, norm, wk)
    if t["rope"] != "none":
        inv, att = _plan_rotation(t)
        angles = pos.astype(F32)[:, None] * inv[None, :]
        cos, sin = np.cos(angles), np.sin(angles)
        if att != 1.0:
            cos, sin = cos * F32(att), sin * F32(att)
        q = _rotate(q, cos, sin, t["layout"], t["rotary_dim"], "f32")
        k = _rotate(k, cos, sin, t["layout"], t["rotary_dim"], "f32")
    if norm and norm["position"] == "after_rope":
        q, k = _hf_qk_norm(q, norm, wq), _hf_qk_norm(k, norm, wk)
    if t.get("temperature"):
        tt = t["temperature"]
        o = tt.get("offset", 0)
        n = (pos + 1 + o) // tt["length"] if tt["rule"] == "llama4" else (pos + o) // tt["length"]
        tau = np.log1p(n.astype(F32)) * F32(tt["coefficient"]) + F32(1)
        q = (q * tau.astype(F32)[:, None, None]).astype(F32)
    hq, hk = p["n_q_heads"], p["n_kv_heads"]
    kv = [layouts.kv_head_for(h, hq, hk) for h in range(hq)]
    s = np.stack([q[:, h, :] @ k[:, kv[h], :].T for h in range(hq)]).astype(F32)
    radicand = t["query_pre_attn_scalar"] or t["head_dim"]
    s = (s * F32(radicand ** -0.5)).astype(F32)
    if t.get("logit_softcap"):
        cap = F32(t["logit_softcap"])
        s = (np.tanh(s / cap) * cap).astype(F32)
    out = {"q_rot": q, "k_rot": k, "scores": s}
    m, j = pos[:, None], pos[None, :]
    visible = j <= m
    if t["mask"] == "sliding":
        visible &= m - j < t["window"]
    if t["mask"] == "chunked":
        visible &= j // t["chunk"] == m // t["chunk"]
    s = np.where(visible[None], s, -np.inf).astype(F32)
    if t.get("sinks"):
        sink = _f32(case, "sinks")[:, None, None] * np.ones((1, s.shape[1], 1), F32)
        s = np.concatenate([s, sink], axis=-1)
    e = expf(s - np.max(s, axis=-1, keepdims=True))
    probs = (e / np.sum(e, axis=-1, keepdims=True, dtype=F32)).astype(F32)[..., : len(pos)]
    out["probs"] = probs
    o = np.stack([probs[h] @ v[:, kv[h], :] for h in range(hq)]).astype(F32)
    out["out"] = o.transpose(1, 0, 2)
    return {n: a for n, a in out.items() if n in case.expected}
