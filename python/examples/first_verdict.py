"""First verdict in five minutes: a float32 numpy RoPE, written as a PyTorch / HF user writes it,
run on one posenc case; its outputs go to OUT/<case>.safetensors for `posenc verify`.

    python3 python/examples/first_verdict.py out
    build/posenc verify golden/data/rope/rope_half_d128_b5e5_llama3_8b_f32.json --actual out
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import posenc  # noqa: E402

case = posenc.load_case("rope_half_d128_b5e5_llama3_8b_f32")  # Llama 3 8B: base 500000, d 128
base, d = case.params["base"], case.params["head_dim"]
pos = case.inputs["positions"]                                # int64 [tokens]
q, k = case.inputs["q"], case.inputs["k"]                     # float32 [tokens, heads, d]

inv_freq = 1.0 / (base ** (np.arange(0, d, 2).astype(np.float32) / d))   # float32, as HF
freqs = pos.astype(np.float32)[:, None] * inv_freq[None, :]              # float32 angles
cos, sin = np.cos(freqs), np.sin(freqs)                                  # [tokens, d/2]


def rope(x):  # half-split pairs (i, i + d/2), HF's rotate_half
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    c, s = cos[:, None, :], sin[:, None, :]
    return np.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], axis=-1)


case.write_outputs(sys.argv[1] if len(sys.argv) > 1 else "out",
                   {"inv_freq": inv_freq, "cos": cos, "sin": sin, "q_rot": rope(q), "k_rot": rope(k)})
