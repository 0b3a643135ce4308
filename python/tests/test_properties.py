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
    if bug == "offset":  # shrunk to one token and one head at position 0
        assert "positions [0]" in msg and "heads 1" in msg, msg


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


# ---- ALiBi ----------------------------------------------------------------------------------------

def _paper_slopes(n):
    import numpy as np
    c = 1 << (n.bit_length() - 1)
    s = [2.0 ** (-8.0 * (h + 1) / c) for h in range(c)]
    s += [2.0 ** (-4.0 * (2 * k + 1) / c) for k in range(n - c)]
    return np.array(s, dtype=np.float32)


def make_alibi(bug=None):
    import numpy as np

    def alibi(n, qp, kp):
        m = _paper_slopes(n)
        if bug == "naive":
            m = np.exp2(-8.0 * np.arange(1, n + 1) / n).astype(np.float32)
        if bug == "reversed":
            m = m[::-1].copy()
        d = (qp[:, None] - kp[None, :]).astype(np.float32)
        sign = np.float32(1 if bug == "sign" else -1)
        return m, (sign * m[:, None, None] * d[None]).astype(np.float32)
    return alibi


def test_alibi_correct_passes_strict_and_fp32(binary):
    for profile in ("strict", "fp32"):
        assert pp.check_alibi(make_alibi(), profile=profile, seed=SEED, posenc=binary,
                              examples=5).passed


@pytest.mark.parametrize("bug, prop, words", [
    ("naive", "slopes", "naive slopes"),
    ("reversed", "slopes", "the slopes in reversed head order"),
    ("sign", "ratios", "the bias sign is flipped"),
])
def test_alibi_broken_are_caught_and_diagnosed(binary, bug, prop, words):
    with pytest.raises(AssertionError) as e:
        pp.check_alibi(make_alibi(bug), profile="fp32", seed=SEED, posenc=binary)
    assert f"property {prop} fails" in str(e.value) and f"diagnosis: {words}" in str(e.value), str(e.value)
