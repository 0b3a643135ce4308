"""Layout adapters between common engine layouts and posenc's.

posenc's RoPE manifests declare: q, k, q_rot, k_rot are [tokens, heads, head_dim]; cos, sin are
[tokens, rotary_dim/2] (one column per pair); scores are [q_heads, query token, key token].
HF (transformers) uses [batch, heads, tokens, head_dim] and cos/sin tables of
[tokens, rotary_dim] (or [batch, tokens, rotary_dim]) whose two halves repeat each other
(half-split, NeoX style) or whose columns repeat pairwise (interleaved, GPT-J style).
"""
import numpy as np

HALF_SPLIT = "half_split"
INTERLEAVED = "interleaved"


def _check_layout(fn, layout):
    if layout not in (HALF_SPLIT, INTERLEAVED):
        raise ValueError(f"{fn}: layout={layout!r} is not {HALF_SPLIT!r} or {INTERLEAVED!r}")


def resolve_rotary_dim(rotary_dim, head_dim):
    """`rotary_dim=None` (HF's default, and partial_rotary_factor 1) means the whole head."""
    if rotary_dim is None:
        return int(head_dim)
    r = int(rotary_dim)
    if r <= 0 or r > head_dim or r % 2:
        raise ValueError(f"resolve_rotary_dim: rotary_dim={rotary_dim!r} must be even and in "
                         f"(0, head_dim={head_dim}]")
    return r


def hf_to_posenc(x):
    """[batch=1, heads, tokens, dim] (or [heads, tokens, dim]) -> [tokens, heads, dim]."""
    a = np.asarray(x)
    if a.ndim == 4:
        if a.shape[0] != 1:
            raise ValueError(f"hf_to_posenc: x has batch {a.shape[0]} (shape {list(a.shape)}); a "
                             f"posenc case is one sequence, pass x[b] for one batch row")
        a = a[0]
    if a.ndim != 3:
        raise ValueError(f"hf_to_posenc: x has shape {list(a.shape)}, expected "
                         f"[1, heads, tokens, dim] or [heads, tokens, dim]")
    return np.ascontiguousarray(a.transpose(1, 0, 2))


def posenc_to_hf(x, batch_dim=True):
    """[tokens, heads, dim] -> [1, heads, tokens, dim] ([heads, tokens, dim] if not batch_dim)."""
    a = np.asarray(x)
    if a.ndim != 3:
        raise ValueError(f"posenc_to_hf: x has shape {list(a.shape)}, expected [tokens, heads, dim]")
    a = np.ascontiguousarray(a.transpose(1, 0, 2))
    return a[None] if batch_dim else a


def hf_table_to_posenc(table, layout=HALF_SPLIT, check=True):
    """HF's duplicated cos or sin table [..., tokens, rotary_dim] -> posenc's [tokens, rotary_dim/2].

    half_split: columns i and i + rotary_dim/2 repeat each other (torch.cat((freqs, freqs)));
    interleaved: columns 2i and 2i+1 (repeat_interleave). check=True raises if they differ."""
    _check_layout("hf_table_to_posenc", layout)
    t = np.asarray(table)
    while t.ndim > 2:
        if t.shape[0] != 1:
            raise ValueError(f"hf_table_to_posenc: table has shape {list(np.shape(table))}; "
                             f"leading axes must be 1 (one sequence)")
        t = t[0]
    if t.ndim != 2 or t.shape[1] % 2:
        raise ValueError(f"hf_table_to_posenc: table has shape {list(np.shape(table))}, expected "
                         f"[tokens, rotary_dim] with rotary_dim even")
    h = t.shape[1] // 2
    a, b = (t[:, :h], t[:, h:]) if layout == HALF_SPLIT else (t[:, 0::2], t[:, 1::2])
    if check and not np.array_equal(a, b, equal_nan=True):
        raise ValueError(f"hf_table_to_posenc: the two copies of each column differ for "
                         f"layout={layout!r}; is the table {'interleaved' if layout == HALF_SPLIT else 'half-split'}?")
    return np.ascontiguousarray(a)


def posenc_table_to_hf(table, layout=HALF_SPLIT):
    """posenc's [tokens, rotary_dim/2] -> HF's duplicated [tokens, rotary_dim]."""
    _check_layout("posenc_table_to_hf", layout)
    t = np.asarray(table)
    if t.ndim != 2:
        raise ValueError(f"posenc_table_to_hf: table has shape {list(t.shape)}, expected [tokens, pairs]")
    if layout == HALF_SPLIT:
        return np.concatenate([t, t], axis=1)
    return np.repeat(t, 2, axis=1)


def pair_channels(rotary_dim, layout):
    """(a, b): channel index arrays of each pair i for a layout (half_split: i, i + r/2;
    interleaved: 2i, 2i + 1)."""
    _check_layout("pair_channels", layout)
    r = resolve_rotary_dim(rotary_dim, rotary_dim)
    i = np.arange(r // 2)
    return (i, i + r // 2) if layout == HALF_SPLIT else (2 * i, 2 * i + 1)


def interleaved_to_half_split(x, rotary_dim=None):
    """Permutes the last axis's first rotary_dim channels from GPT-J pairing (2i, 2i+1) to NeoX
    pairing (i, i + r/2); channels past rotary_dim stay. Rotating the result half-split and
    applying half_split_to_interleaved equals rotating x interleaved."""
    a = np.asarray(x)
    r = resolve_rotary_dim(rotary_dim, a.shape[-1])
    perm = np.concatenate([np.arange(0, r, 2), np.arange(1, r, 2), np.arange(r, a.shape[-1])])
    return a[..., perm]


def half_split_to_interleaved(x, rotary_dim=None):
    """Inverse of interleaved_to_half_split."""
    a = np.asarray(x)
    r = resolve_rotary_dim(rotary_dim, a.shape[-1])
    h = r // 2
    perm = np.empty(a.shape[-1], dtype=np.int64)
    perm[0:r:2] = np.arange(h)
    perm[1:r:2] = np.arange(h, r)
    perm[r:] = np.arange(r, a.shape[-1])
    return a[..., perm]


def kv_head_for(q_head, n_q_heads, n_kv_heads):
    """The kv head a q head reads in posenc's scores (GQA): q_head // (n_q_heads / n_kv_heads)."""
    if n_kv_heads <= 0 or n_q_heads % n_kv_heads:
        raise ValueError(f"kv_head_for: n_q_heads={n_q_heads} is not a multiple of "
                         f"n_kv_heads={n_kv_heads}")
    return q_head // (n_q_heads // n_kv_heads)
