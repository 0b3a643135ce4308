import os

import numpy as np
import pytest

import posenc
from conftest import F32, BF16, F16


def test_load_by_id_and_by_path_agree():
    c = posenc.load_case(F32)
    assert c.id == F32 and c.scheme == "rope"
    assert c.params["head_dim"] == 96 and c.params["rotary_dim"] == 24
    assert c.params["layout"] == "half_split"
    c2 = posenc.load_case(c.manifest_path)
    assert c2.id == c.id and os.path.exists(c.tensors_path)


def test_inputs_and_expected_specs():
    c = posenc.load_case(BF16)
    inp = c.inputs
    assert sorted(inp) == ["k", "positions", "q"]
    assert inp["positions"].dtype == np.int64 and inp["positions"].shape == (19,)
    assert inp["q"].shape == (19, 2, 96)
    assert list(c.expected) == ["inv_freq", "cos", "sin", "q_rot", "k_rot", "scores"]
    q_rot = c.expected["q_rot"]
    assert (q_rot.dtype, q_rot.shape, q_rot.stage, q_rot.kind) == ("bf16", (19, 2, 96), "rotated", "conditioned")
    assert q_rot.profile("fp32-angles") == q_rot.profile("fp32")
    assert "not_applicable" in posenc.load_case(F32).expected["q_rot"].profile("bf16")
    with pytest.raises(ValueError, match="profile='nope'"):
        q_rot.profile("nope")


def test_find_cases_glob():
    ids = posenc.case_ids("rope_half_d96_r24_*")
    assert F32 in ids and BF16 in ids and F16 in ids
    assert all(i.startswith("rope_half_d96_r24_") for i in ids)
    assert [c.id for c in posenc.find_cases("rope_half_d96_r24_*")] == ids
    assert posenc.case_ids("no_such_case_*") == []


def test_load_case_unknown_id():
    with pytest.raises(KeyError, match="case_id_or_path='rope_nothing'"):
        posenc.load_case("rope_nothing")


@pytest.mark.parametrize("case_id", [F32, BF16, F16])
def test_write_outputs_round_trip_is_bit_exact(tmp_path, case_id):
    c = posenc.load_case(case_id)
    stored = {n: c.expected_values(n) for n in c.expected}
    path = c.write_outputs(str(tmp_path), stored)
    assert os.path.basename(path) == case_id + ".safetensors"
    back = posenc.read_safetensors(path)
    for n, a in stored.items():
        assert back[n].dtype == a.dtype and back[n].shape == a.shape
        assert back[n].tobytes() == a.tobytes(), n


def test_write_outputs_rounds_floats_to_bf16_nearest_even(tmp_path):
    c = posenc.load_case(BF16)
    exact = c.tensors["q_rot.exact"]  # float64 oracle values
    path = c.write_outputs(str(tmp_path), {"q_rot": exact, "k_rot": exact.astype(np.float32)})
    back = posenc.read_safetensors(path)
    # The float64 oracle rounded once is the stored expected tensor, bit for bit.
    assert np.array_equal(back["q_rot"], c.expected_values("q_rot"))
    assert np.array_equal(back["k_rot"], posenc.float32_to_bf16(exact.astype(np.float32)))


def test_write_outputs_errors_name_the_tensor(tmp_path):
    c = posenc.load_case(F32)
    with pytest.raises(ValueError, match=r"tensor 'q_rot' has shape \[19, 96\], expected \[19, 2, 96\]"):
        c.write_outputs(str(tmp_path), {"q_rot": np.zeros((19, 96))})
    with pytest.raises(KeyError, match="no expected tensor named \\['qrot'\\]"):
        c.write_outputs(str(tmp_path), {"qrot": np.zeros((19, 2, 96))})
    with pytest.raises(TypeError, match="tensor 'cos' has dtype <U1"):
        c.write_outputs(str(tmp_path), {"cos": np.full((19, 12), "x")})
    with pytest.raises(ValueError, match="outputs for case .* is empty"):
        c.write_outputs(str(tmp_path), {})
    assert not os.listdir(tmp_path)
