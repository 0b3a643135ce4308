"""posenc.properties.check_t5 on a correct T5 bucket function and on broken ones."""
import numpy as np
import pytest

import posenc.properties as pp

SEED = 20261130


def _bucket(r, num_buckets, max_distance, bidirectional):
    """T5's relative-position bucket of r = key - query, with the log step decided in integers:
    the largest k <= M - 1 with (n / E)^M >= (D / E)^k."""
    nb = num_buckets // 2 if bidirectional else num_buckets
    offset = nb if bidirectional and r > 0 else 0
    n = abs(r) if bidirectional else max(-r, 0)
    e, m = nb // 2, nb - nb // 2
    if n < e:
        return offset + n
    if n >= max_distance:
        return offset + nb - 1
    k = 0
    while k + 1 <= m - 1 and n ** m * e ** (k + 1) >= max_distance ** (k + 1) * e ** m:
        k += 1
    return offset + e + k


def make_buckets(bug=None):
    def fn(rel, *, num_buckets, max_distance, bidirectional):
        if bug == "flipped":
            rel = -rel  # query - key
        if bug == "always-bidirectional":
            bidirectional = True
        return np.array([_bucket(int(r), num_buckets, max_distance, bidirectional) for r in rel],
                        np.int64)
    return fn


def test_correct_buckets_pass(binary, capsys):
    r = pp.check_t5(make_buckets(), seed=SEED, posenc=binary, examples=6)
    assert r.passed and r.examples == 6
    assert f"seed={SEED}" in capsys.readouterr().out


def test_flipped_direction_is_caught_and_diagnosed(binary):
    with pytest.raises(AssertionError) as e:
        pp.check_t5(make_buckets("flipped"), seed=SEED, posenc=binary, properties=("buckets",))
    msg = str(e.value)
    assert "property buckets fails" in msg and f"seed {SEED}" in msg, msg
    assert "diagnosis: the direction is flipped" in msg, msg
    shrunk = msg.split("relative_positions [")[1].split("]")[0]
    assert "," not in shrunk, msg  # shrunk to the one relative position that fails


def test_bidirectional_buckets_on_a_causal_call_are_caught(binary):
    with pytest.raises(AssertionError) as e:
        pp.check_t5(make_buckets("always-bidirectional"), seed=SEED, posenc=binary,
                    properties=("monotonic",))
    assert "property monotonic fails" in str(e.value), str(e.value)
    assert "diagnosis: bidirectional buckets for a causal call" in str(e.value), str(e.value)


def test_bad_arguments(binary):
    with pytest.raises(ValueError, match="unknown property 'x'"):
        pp.check_t5(make_buckets(), properties=("x",), posenc=binary)


def test_oracle_t5_bad_input_is_exit_2_and_writes_nothing(binary, tmp_path):
    import subprocess
    p = subprocess.run([binary, "oracle", "t5", "--positions=-3,5", "--num-buckets", "3",
                        "--out", str(tmp_path / "o")], capture_output=True, text=True)
    assert p.returncode == 2, p.stderr
    assert "posenc oracle t5: num_buckets must lie in" in p.stderr and "(got 3)" in p.stderr
    assert not (tmp_path / "o" / "buckets.npy").exists()
