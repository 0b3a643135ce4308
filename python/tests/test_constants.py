"""The package's shared constants come from the C++ tables (posenc constants), never a copy."""
import json
import os
import re
import subprocess

import pytest

from posenc import constants, properties
from posenc.verify import find_binary, PosencError

PKG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "posenc")


def test_constants_json_is_what_the_binary_prints():
    try:
        exe = find_binary()
    except PosencError:
        pytest.skip("no posenc binary (set POSENC_BIN)")
    printed = json.loads(subprocess.run([exe, "constants"], check=True, capture_output=True,
                                        text=True).stdout)
    assert printed == constants.RAW, ("python/posenc/constants.json is stale: regenerate it with "
                                      "`posenc constants > python/posenc/constants.json`")


def test_hard_positions_are_sorted_and_cover_the_float_edges():
    hp = constants.HARD_POSITIONS
    assert list(hp) == sorted(set(hp))
    for edge in (0, 1, 256, 2048, (1 << 24) + 1):
        assert edge in hp
    assert properties.HARD_POSITIONS == hp


def test_profiles_and_aliases():
    assert constants.PROFILES[0] == "strict"
    assert constants.canonical_profile("fp32-angles") == "fp32"
    assert constants.canonical_profile("no-such-profile") is None
    assert set(properties.FLOAT32_PROFILES) == {"strict", "fp32", "fp32-recurrence"}
    assert "rope" in constants.SCHEMES and constants.MISTAKES["rope"]


def test_no_module_keeps_its_own_copy_of_a_constant_table():
    # 16777217 (2^24 + 1) and 1048575 (2^20 - 1) only ever appear in constants.json.
    for name in os.listdir(PKG):
        if name.endswith(".py"):
            with open(os.path.join(PKG, name), encoding="utf-8") as f:
                text = f.read()
            assert not re.search(r"\b(16777217|1048575)\b", text), name
