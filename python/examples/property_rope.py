"""posenc's RoPE properties on a numpy RoPE (python/posenc/properties.py).

    python3 python/examples/property_rope.py              # the correct kernel: passes fp32
    python3 python/examples/property_rope.py offset       # a broken one: AssertionError, exit 1

The kernel is written the way a PyTorch user writes HF's (float32 inv_freq = 1/base^(2i/d),
float32 angles, cos/sin in float32). The broken variants: `pairing` (GPT-J pairs on a NeoX call),
`offset` (positions off by one), `float16` (angles rounded to float16).
"""
import sys

import numpy as np

import posenc.properties as pp


def make_rope(bug=None):
    def rope(q, k, positions, *, head_dim, rotary_dim, base, layout, inv_freq):
        d = rotary_dim
        inv = (1.0 / np.power(np.float32(base), np.arange(0, d, 2, dtype=np.float32) / np.float32(d))
               ).astype(np.float32)
        pos = positions + (1 if bug == "offset" else 0)
        ang = pos.astype(np.float32)[:, None] * inv[None, :]            # [tokens, d/2], float32
        if bug == "float16":
            with np.errstate(over="ignore"):
                ang = ang.astype(np.float16).astype(np.float32)
        with np.errstate(invalid="ignore"):  # float16 angles overflow to inf above 65504
            cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]  # broadcast over heads
        interleaved = (layout == "interleaved") != (bug == "pairing")
        a = np.arange(0, d, 2) if interleaved else np.arange(d // 2)
        b = a + 1 if interleaved else a + d // 2

        def rotate(x):
            y = x.copy()
            y[..., a] = x[..., a] * cos - x[..., b] * sin
            y[..., b] = x[..., a] * sin + x[..., b] * cos
            return y

        return rotate(q), rotate(k)
    return rope


if __name__ == "__main__":
    bug = sys.argv[1] if len(sys.argv) > 1 else None
    result = pp.check_rope(make_rope(bug), profile="fp32", seed=1)
    print(result)
