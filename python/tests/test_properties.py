"""posenc.properties.check_rope on a correct numpy RoPE and on broken ones."""
import pytest

import property_rope
import posenc.properties as pp

SEED = 20261130


def test_correct_rope_passes_fp32(binary, capsys):
    r = pp.check_rope(property_rope.make_rope(), profile="fp32", seed=SEED, posenc=binary,
                      examples=4)
    assert r.passed and r.examples == 4
    assert f"seed={SEED}" in capsys.readouterr().out  # the seed is printed, for replay


def test_correct_rope_fails_strict(binary):
    with pytest.raises(AssertionError, match=r"property oracle fails \(profile strict"):
        pp.check_rope(property_rope.make_rope(), profile="strict", seed=SEED, posenc=binary,
                      properties=("oracle",), max_shrinks=5)


@pytest.mark.parametrize("bug, words", [
    ("offset", "positions off by one"),
    ("pairing", "the other pairing"),
    ("float16", "float16 angles"),
])
def test_broken_ropes_are_caught_and_diagnosed(binary, bug, words):
    with pytest.raises(AssertionError) as e:
        pp.check_rope(property_rope.make_rope(bug), profile="fp32", seed=SEED, posenc=binary)
    msg = str(e.value)
    assert "property oracle fails" in msg and f"seed {SEED}" in msg
    assert f"diagnosis: the output is {words}" in msg, msg


def test_offset_shrinks_to_one_token_at_position_0(binary):
    with pytest.raises(AssertionError) as e:
        pp.check_rope(property_rope.make_rope("offset"), profile="fp32", seed=SEED, posenc=binary)
    assert "positions [0]" in str(e.value) and "heads 1" in str(e.value), str(e.value)


def test_pair_norm_catches_the_other_pairing_by_itself(binary):
    with pytest.raises(AssertionError, match="property pair_norm fails"):
        # the oracle runs at every property's inputs: pair_norm alone still fails
        pp.check_rope(property_rope.make_rope("pairing"), profile="fp32", seed=SEED,
                      posenc=binary, properties=("pair_norm",))


def test_bad_arguments():
    with pytest.raises(ValueError, match="profile must be"):
        pp.check_rope(property_rope.make_rope(), profile="bf16")
    with pytest.raises(ValueError, match="unknown property"):
        pp.check_rope(property_rope.make_rope(), properties=("norm",))


def test_oracle_subcommand_rejects_bad_input_with_exit_2(binary, tmp_path):
    import subprocess
    import numpy as np
    np.save(tmp_path / "q.npy", np.zeros((2, 1, 8), np.float32))
    np.save(tmp_path / "k.npy", np.zeros((2, 1, 8), np.float32))
    base = [binary, "oracle", "rope", "--head-dim", "8", "--heads", "1", "--q",
            str(tmp_path / "q.npy"), "--k", str(tmp_path / "k.npy"), "--out", str(tmp_path / "o")]
    p = subprocess.run(base + ["--positions", "0,x"], capture_output=True, text=True)
    assert p.returncode == 2 and "--positions must be integers" in p.stderr
    p = subprocess.run(base + ["--positions", "0"], capture_output=True, text=True)
    assert p.returncode == 2 and "--q must have shape [1, 1, 8]" in p.stderr
    assert not (tmp_path / "o").exists()  # nothing written
    p = subprocess.run(base + ["--positions", "0,3", "--layout", "neox"], capture_output=True, text=True)
    assert p.returncode == 2 and "--layout must be half_split or interleaved" in p.stderr
    p = subprocess.run(base + ["--positions", "0,3"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    exact = np.load(tmp_path / "o" / "q_rot.exact.npy")
    assert exact.shape == (2, 1, 8) and exact.dtype == np.float64
