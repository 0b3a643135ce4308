import numpy as np
import pytest

from posenc import layouts


def test_hf_posenc_round_trip():
    x = np.arange(5 * 3 * 8, dtype=np.float32).reshape(5, 3, 8)  # [tokens, heads, dim]
    hf = layouts.posenc_to_hf(x)
    assert hf.shape == (1, 3, 5, 8) and hf[0, 2, 4, 7] == x[4, 2, 7]
    assert np.array_equal(layouts.hf_to_posenc(hf), x)
    assert np.array_equal(layouts.hf_to_posenc(hf[0]), x)
    with pytest.raises(ValueError, match="hf_to_posenc: x has batch 2"):
        layouts.hf_to_posenc(np.zeros((2, 3, 5, 8)))


@pytest.mark.parametrize("layout", ["half_split", "interleaved"])
def test_tables(layout):
    t = np.arange(12, dtype=np.float32).reshape(3, 4)
    hf = layouts.posenc_table_to_hf(t, layout)
    assert hf.shape == (3, 8)
    assert np.array_equal(layouts.hf_table_to_posenc(hf, layout), t)
    assert np.array_equal(layouts.hf_table_to_posenc(hf[None], layout), t)
    other = "interleaved" if layout == "half_split" else "half_split"
    with pytest.raises(ValueError, match="two copies of each column differ"):
        layouts.hf_table_to_posenc(hf, other)
    with pytest.raises(ValueError, match="layout='neox'"):
        layouts.posenc_table_to_hf(t, "neox")


def test_resolve_rotary_dim():
    assert layouts.resolve_rotary_dim(None, 128) == 128
    assert layouts.resolve_rotary_dim(24, 96) == 24
    with pytest.raises(ValueError, match="rotary_dim=130"):
        layouts.resolve_rotary_dim(130, 128)


def _rotate(x, cos, sin, a, b):
    y = x.copy()
    y[..., a] = x[..., a] * cos - x[..., b] * sin
    y[..., b] = x[..., a] * sin + x[..., b] * cos
    return y


def test_interleaved_equals_permuted_half_split():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 2, 10))  # head_dim 10, rotary_dim 6: channels 6..9 pass through
    ang = rng.standard_normal((4, 1, 3))
    cos, sin = np.cos(ang), np.sin(ang)
    a_i, b_i = layouts.pair_channels(6, "interleaved")
    a_h, b_h = layouts.pair_channels(6, "half_split")
    assert a_i.tolist() == [0, 2, 4] and b_h.tolist() == [3, 4, 5]
    direct = _rotate(x, cos, sin, a_i, b_i)
    via = layouts.half_split_to_interleaved(
        _rotate(layouts.interleaved_to_half_split(x, 6), cos, sin, a_h, b_h), 6)
    assert np.array_equal(direct, via)
    assert np.array_equal(layouts.half_split_to_interleaved(layouts.interleaved_to_half_split(x, 6), 6), x)
    assert np.array_equal(layouts.interleaved_to_half_split(x, 6)[..., 6:], x[..., 6:])


def test_kv_head_for():
    assert [layouts.kv_head_for(h, 8, 2) for h in range(8)] == [0, 0, 0, 0, 1, 1, 1, 1]
    with pytest.raises(ValueError, match="n_q_heads=6 is not a multiple of n_kv_heads=4"):
        layouts.kv_head_for(0, 6, 4)
