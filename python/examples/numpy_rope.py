"""RoPE in numpy, written the way a PyTorch / HF user writes it (float32 angles, half-split
`rotate_half`), checked against the posenc golden cases.

    python3 examples/numpy_rope.py --profile fp32   rope_half_d96_r24_b1e4_neox_20b_f32   # PASS
    python3 examples/numpy_rope.py --profile strict rope_half_d96_r24_b1e4_neox_20b_f32   # FAIL

It fails `strict` (its float32 tables are not correctly rounded) and passes `fp32`: it matches
the float32 pipeline of HF / Meta / vLLM. Interleaved (GPT-J) cases go through the layout
adapter: permute channels to half-split, rotate, permute back.
"""
import argparse
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import posenc  # noqa: E402
from posenc import layouts  # noqa: E402


def rotate_half(x):
    x1, x2 = np.split(x, 2, axis=-1)
    return np.concatenate([-x2, x1], axis=-1)


def rope_hf(q, k, positions, base, rotary_dim, attention_factor=1.0):
    """q, k: float32 [batch, heads, tokens, head_dim]; positions: int [tokens]."""
    inv_freq = 1.0 / (base ** (np.arange(0, rotary_dim, 2, dtype=np.int64).astype(np.float32) / rotary_dim))
    freqs = positions.astype(np.float32)[:, None] * inv_freq[None, :]  # [tokens, rotary_dim/2]
    emb = np.concatenate([freqs, freqs], axis=-1)                       # HF's duplicated halves
    cos = np.cos(emb) * np.float32(attention_factor)
    sin = np.sin(emb) * np.float32(attention_factor)
    out = []
    for x in (q, k):
        x_rot, x_pass = x[..., :rotary_dim], x[..., rotary_dim:]
        x_rot = x_rot * cos + rotate_half(x_rot) * sin
        out.append(np.concatenate([x_rot, x_pass], axis=-1))
    return inv_freq, cos, sin, out[0], out[1]


def outputs_for(case, rope=rope_hf):
    """Runs `rope` on a RoPE case and returns {expected name: array} in posenc's layouts."""
    p = case.params
    r = layouts.resolve_rotary_dim(p.get("rotary_dim"), p["head_dim"])
    interleaved = p.get("layout") == layouts.INTERLEAVED
    has_k = "k" in case.inputs

    def to_hf(name):  # posenc [tokens, heads, dim] -> HF [1, heads, tokens, dim], float32
        x = case.input_float(name).astype(np.float32)
        if interleaved:
            x = layouts.interleaved_to_half_split(x, r)
        return layouts.posenc_to_hf(x)

    q = to_hf("q")
    k = to_hf("k") if has_k else q
    inv_freq, cos, sin, q_rot, k_rot = rope(q, k, case.inputs["positions"], p["base"], r,
                                            p.get("attention_factor", 1.0))
    back = (lambda x: layouts.half_split_to_interleaved(layouts.hf_to_posenc(x), r)) if interleaved \
        else layouts.hf_to_posenc
    out = {"inv_freq": inv_freq, "cos": layouts.hf_table_to_posenc(cos),
           "sin": layouts.hf_table_to_posenc(sin), "q_rot": back(q_rot)}
    if has_k:
        out["k_rot"] = back(k_rot)
        if "scores" in case.expected:  # [q_heads, query, key], unscaled, float32 matmul
            qh, kh = out["q_rot"].transpose(1, 0, 2), out["k_rot"].transpose(1, 0, 2)
            kv = [layouts.kv_head_for(h, p["n_q_heads"], p["n_kv_heads"]) for h in range(qh.shape[0])]
            out["scores"] = np.stack([qh[h] @ kh[kv[h]].T for h in range(qh.shape[0])])
    return {n: a for n, a in out.items() if n in case.expected}


def check(case_ids, profile, rope=rope_hf, data_dir=None, posenc_bin="posenc"):
    """Writes the outputs of `rope` for each case and returns posenc.verify's result."""
    out_dir = tempfile.mkdtemp(prefix="numpy_rope_")
    cases = [posenc.load_case(c, data_dir) for c in case_ids]
    for case in cases:
        case.write_outputs(out_dir, outputs_for(case, rope))
    return posenc.verify(cases, out_dir, profile=profile, posenc=posenc_bin)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cases", nargs="+", help="case ids, e.g. rope_half_d96_r24_b1e4_neox_20b_f32")
    ap.add_argument("--profile", default="fp32")
    ap.add_argument("--posenc", default="posenc", help="the posenc binary (or set POSENC_BIN)")
    args = ap.parse_args()
    result = check(args.cases, args.profile, posenc_bin=args.posenc)
    print(result.describe())
    sys.exit(result.returncode)
