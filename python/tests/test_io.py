import numpy as np
import pytest

import posenc
from posenc import io


def test_bf16_every_bit_pattern_widens_and_rounds_back_exactly():
    bits = np.arange(65536, dtype=np.uint32).astype(np.uint16)
    f = posenc.bf16_to_float32(bits)
    back = posenc.float32_to_bf16(f)
    finite = np.isfinite(f)
    assert np.array_equal(back[finite], bits[finite])
    assert np.all(np.isnan(posenc.bf16_to_float32(back[np.isnan(f)])))
    with np.errstate(invalid="ignore"):  # signalling NaN patterns warn when widened
        back64 = posenc.float64_to_bf16(f.astype(np.float64))
    assert np.array_equal(back64[finite], bits[finite])


def test_float32_to_bf16_rounds_to_nearest_even():
    # 1 + 2^-8 is halfway between bf16 1.0 and 1 + 2^-7: ties go to the even one (1.0);
    # 1 + 3 * 2^-8 is halfway between 1 + 2^-7 and 1 + 2^-6: to 1 + 2^-6 (even).
    x = np.array([1 + 2.0 ** -8, 1 + 3 * 2.0 ** -8, 1 + 2.0 ** -8 + 2.0 ** -20, -(1 + 2.0 ** -8)],
                 dtype=np.float32)
    got = posenc.bf16_to_float32(posenc.float32_to_bf16(x))
    assert got.tolist() == [1.0, 1 + 2.0 ** -6, 1 + 2.0 ** -7, -1.0]


def test_float64_to_bf16_rounds_once():
    # Rounding through float32 first makes 1 + 2^-8 + 2^-40 a tie and sends it to 1.0.
    x = np.array([1 + 2.0 ** -8 + 2.0 ** -40])
    assert posenc.bf16_to_float32(posenc.float64_to_bf16(x)).tolist() == [1 + 2.0 ** -7]
    assert posenc.bf16_to_float32(posenc.float32_to_bf16(x)).tolist() == [1.0]
    rng = np.random.default_rng(7)
    y = rng.standard_normal(20000) * 10.0 ** rng.integers(-20, 20, 20000)
    b = posenc.float64_to_bf16(y)
    v = posenc.bf16_to_float32(b).astype(np.float64)
    for nb in ((b - 1).astype(np.uint16), (b + 1).astype(np.uint16)):
        w = posenc.bf16_to_float32(nb).astype(np.float64)
        assert np.all(np.abs(v - y) <= np.abs(w - y))


def test_bf16_to_float32_refuses_floats():
    with pytest.raises(TypeError, match="bf16_to_float32: bits has dtype float32"):
        posenc.bf16_to_float32(np.zeros(3, dtype=np.float32))


def test_safetensors_round_trip(tmp_path):
    t = {"a": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.array([1, 2], dtype=np.int64),
         "c": np.array([0x3F80, 0x7FC0], dtype=np.uint16), "d": np.ones((1, 2), dtype=np.float16)}
    p = tmp_path / "x.safetensors"
    posenc.write_safetensors(str(p), t)
    header, base = io.read_header(str(p))
    assert base % 8 == 0 and header["c"]["dtype"] == "BF16" and header["b"]["dtype"] == "I64"
    back = posenc.read_safetensors(str(p))
    assert sorted(back) == sorted(t)
    for k in t:
        assert back[k].dtype == t[k].dtype and np.array_equal(back[k], t[k])


def test_read_safetensors_truncated(tmp_path):
    p = tmp_path / "x.safetensors"
    posenc.write_safetensors(str(p), {"a": np.zeros(100, dtype=np.float64)})
    data = p.read_bytes()
    p.write_bytes(data[:-8])
    with pytest.raises(ValueError, match="truncated in tensor 'a'"):
        posenc.read_safetensors(str(p))
