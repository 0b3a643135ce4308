"""Three deliberately wrong numpy RoPEs; each FAILS verify, even under the lenient `fp32` profile.

    python3 examples/wrong_ropes.py rope_half_d128_b5e5_llama3_8b_f32

- interleaved: GPT-J pairing (2i, 2i+1) applied to a half-split (NeoX / HF Llama) case;
- off_by_one: positions shifted by one (e.g. a cache index used as the position);
- fp16_angles: the angle table computed in float16 (an autocast region around the rotary code).
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from numpy_rope import rope_hf, check  # noqa: E402


def rope_interleaved(q, k, positions, base, rotary_dim, attention_factor=1.0):
    inv_freq, cos, sin, _, _ = rope_hf(q, k, positions, base, rotary_dim, attention_factor)
    half = rotary_dim // 2
    c, s = cos[:, :half], sin[:, :half]
    out = []
    for x in (q, k):
        y = x.copy()
        a, b = x[..., 0:rotary_dim:2], x[..., 1:rotary_dim:2]  # wrong pairs for this case
        y[..., 0:rotary_dim:2] = a * c - b * s
        y[..., 1:rotary_dim:2] = a * s + b * c
        out.append(y)
    return inv_freq, cos, sin, out[0], out[1]


def rope_off_by_one(q, k, positions, base, rotary_dim, attention_factor=1.0):
    return rope_hf(q, k, positions + 1, base, rotary_dim, attention_factor)


def rope_fp16_angles(q, k, positions, base, rotary_dim, attention_factor=1.0):
    inv_freq = (1.0 / (base ** (np.arange(0, rotary_dim, 2).astype(np.float32) / rotary_dim))).astype(np.float16)
    with np.errstate(over="ignore", invalid="ignore"):
        freqs = positions.astype(np.float16)[:, None] * inv_freq[None, :]
        emb = np.concatenate([freqs, freqs], axis=-1).astype(np.float32)
        cos, sin = np.cos(emb) * np.float32(attention_factor), np.sin(emb) * np.float32(attention_factor)
    half = rotary_dim // 2
    out = []
    for x in (q, k):
        x_rot, x_pass = x[..., :rotary_dim], x[..., rotary_dim:]
        rot = np.concatenate([-x_rot[..., half:], x_rot[..., :half]], axis=-1)
        out.append(np.concatenate([x_rot * cos + rot * sin, x_pass], axis=-1))
    return inv_freq.astype(np.float32), cos, sin, out[0], out[1]


WRONG = {"interleaved": rope_interleaved, "off_by_one": rope_off_by_one,
         "fp16_angles": rope_fp16_angles}

if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    rc = 0
    for label, fn in WRONG.items():
        result = check(sys.argv[1:], "fp32", rope=fn)
        print(f"== {label}: {'PASS (unexpected)' if result.passed else 'FAIL, as it should'}")
        print(result.describe())
        rc |= 0 if not result.passed else 1
    sys.exit(rc)
