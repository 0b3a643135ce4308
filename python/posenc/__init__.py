"""posenc from Python: load golden cases, write an engine's outputs, verify them.

    import posenc
    case = posenc.load_case("rope_half_d96_r24_b1e4_neox_20b_f32")
    q, k, pos = case.inputs["q"], case.inputs["k"], case.inputs["positions"]
    case.write_outputs("out", {"q_rot": my_q_rot, "k_rot": my_k_rot})
    result = posenc.verify(case, "out", profile="fp32")   # runs the posenc binary
    print(result.describe())
"""
from .io import (read_safetensors, write_safetensors, bf16_to_float32, float32_to_bf16,
                 float64_to_bf16)
from .case import Case, TensorSpec, load_case, find_cases, case_ids, default_data_dir
from .verify import verify, diagnose, find_binary, VerifyResult, CaseResult, TensorResult, PosencError
from .errors import error_ratio, budget, by_position, ulp
from . import layouts


def cases(pattern="*", **kwargs):
    """Decorator for pytest: one test per catalog case matching `pattern` (see pytest_plugin)."""
    from .pytest_plugin import cases as _cases
    return _cases(pattern, **kwargs)


def plan(plan_path, **kwargs):
    """Decorator for pytest: one test per layer of a plan.json (see pytest_plugin)."""
    from .pytest_plugin import plan as _plan
    return _plan(plan_path, **kwargs)


__all__ = ["read_safetensors", "write_safetensors", "bf16_to_float32", "float32_to_bf16",
           "float64_to_bf16", "Case", "TensorSpec", "load_case", "find_cases", "case_ids",
           "default_data_dir", "verify", "diagnose", "find_binary", "VerifyResult", "CaseResult",
           "TensorResult", "PosencError", "error_ratio", "budget", "by_position", "ulp",
           "layouts", "cases", "plan"]
