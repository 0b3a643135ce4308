import os
import shutil
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "examples"))

pytest_plugins = ["pytester"]

# Small cases that cover f32 / bf16 / f16 targets, partial rotary and interleaved pairing.
F32 = "rope_half_d96_r24_b1e4_neox_20b_f32"
BF16 = "rope_half_d96_r24_b1e4_neox_20b_bf16"
F16 = "rope_half_d96_r24_b1e4_neox_20b_f16"
GPTJ = "rope_inter_d256_r64_b1e4_gptj_6b_f32"


def posenc_bin():
    b = os.environ.get("POSENC_BIN") or shutil.which("posenc")
    return b if b and os.access(b, os.X_OK) else None


@pytest.fixture
def binary():
    b = posenc_bin()
    if b is None:
        pytest.skip("no posenc binary: set POSENC_BIN (ctest does) or put posenc on PATH")
    return b
