// Shared generator and engine for golden cases whose output is an attention computation
// (attention, nope, and the bias schemes): inputs q, k, v (and key_padding), expected
// probabilities and outputs. Formula: see reference/attention.hpp.
//
// Expected tensors and their condition scales (golden/format/manifest.hpp has the budget):
//   probs [H, Tq, Tk]  cond_ij = p_ij (1 + S_ij + sum_k p_ik S_ik); masked entries cond 0 (must
//                      be exactly 0)
//   out   [Tq, H, dv]  cond_ic = sum_j p_ij |v_jc| + sum_j p_ij |v_jc - o_ic| S_ij
//   with S_ij = scale * sum_d |q_id k_jd| + |bias_ij|, the sensitivity of p and o to a relative
//   error in the score. A fully masked row (no visible key) is zeros; the manifest declares the
//   alternative of PyTorch eager attention (dtype-min scores: a uniform row) as accepted.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "golden/cases/registry.hpp"
#include "optimized/attention.hpp"
#include "reference/attention.hpp"
#include "reference/common/scalar.hpp"

namespace posenc::golden {

struct AttentionCaseDef {
  std::string id, scheme, variant, description;
  reference::AttentionParams params;
  std::int64_t tq = 0, tk = 0;
  std::vector<std::uint8_t> key_padding;  // [tk] or empty
  DType dtype = DType::kF32;
  std::uint64_t seed = 0;
  nlohmann::json extra = nlohmann::json::object();  // merged into the manifest
  std::function<mp50(int, std::int64_t, std::int64_t)> bias50;    // empty = no bias
  std::function<mp100(int, std::int64_t, std::int64_t)> bias100;  // same bias in mp100
  /// Relative error bound of a pipeline's bias value (ALiBi: slopes from a rounded base; an
  /// f16 KQ mask's distance), by profile; empty = the bias is exact in every pipeline.
  std::function<double(const std::string& profile, int h, std::int64_t i, std::int64_t j)>
      bias_rel_error;
  /// Absolute score error of a pipeline's bias beyond bias_rel_error's rho |b| (ALiBi under fp32:
  /// BLOOM's form m j, rounded at |m j| where the case's bias is m (j - i)), by profile; empty =
  /// none. Only read where bias_rel_error is set.
  std::function<double(const std::string& profile, int h, std::int64_t i, std::int64_t j)>
      bias_abs_error;
  double value_range = 1.0;  // inputs are dyadic in [-value_range, value_range]
  /// > 0: the oracle's score scale is 1/sqrt(scale_radicand) exactly (in mp50 / mp100), where
  /// params.scale (kGiven) holds only its double, the value engines multiply by (DeBERTa:
  /// head_dim * scale_factor); 0 = reference::attention_scale(params).
  int scale_radicand = 0;
  // Content-dependent relative terms (Shaw). All optional; empty/0 = the plain behaviour.
  //   value_hook50/100: reference::AttentionHooks::value_hook in each precision
  //   bias_cond(h, i, j): the score scale of bias_ij in S_ij (replaces |bias_ij|; a bias that is
  //     itself a dot product needs the sum of its terms' magnitudes)
  //   value_offset(h, i, j, c): the value term added to v_jc for query i (A_ic gains
  //     sum_j p_ij |offset|; B_ic uses |v_jc + offset - o_ic|)
  //   eager_out_extra: extra roundings of the output, in eps_t, in the eager (bf16/f16) budget
  std::function<void(int, std::int64_t, const std::vector<mp50>&, std::vector<mp50>&)> value_hook50;
  std::function<void(int, std::int64_t, const std::vector<mp100>&, std::vector<mp100>&)>
      value_hook100;
  std::function<double(int h, std::int64_t i, std::int64_t j)> bias_cond;
  std::function<double(int h, std::int64_t i, std::int64_t j, int c)> value_offset;
  double eager_out_extra = 0;
};

/// The inputs attention_case_generate draws (dyadic doubles, exact in the case dtype).
struct AttentionCaseInputs {
  std::vector<double> q, k, v;  // [Tq, H, d], [Tk, Hkv, d], [Tk, Hkv, dv]
};
AttentionCaseInputs attention_case_inputs(const AttentionCaseDef& c);

/// Pure: inputs from the PRNG, expected values from mp50, mp100 cross-check, manifest.
GoldenCase attention_case_generate(const AttentionCaseDef& c);

/// The params, masks and shapes a manifest records (for engines).
reference::AttentionParams attention_params_from_manifest(const nlohmann::json& m);

/// Runs optimized::attention_forward (and attention_probs) on the case's inputs; outputs in the
/// case dtype. `bias` may be null.
TensorMap attention_case_run_engine(const CaseSpec& spec, const TensorMap& golden,
                                    const optimized::AttentionBias* bias,
                                    const reference::AttentionParams& p);

/// A pipeline's bias value before any cast: float32 (h, query row i, key j), or empty.
using PipelineBias = std::function<float(int h, std::int64_t i, std::int64_t j)>;

/// PyTorch eager attention as HF writes it (`--pipeline fp32 | fp32-recurrence | bf16 | f16`):
/// scores = q @ k^T in float32, rounded to the compute dtype, times the scale, plus the bias
/// (cast to the compute dtype), plus the dtype's minimum where masked; softmax in float32 cast
/// to the compute dtype; probs @ v accumulated in float32, rounded. A fully masked row comes
/// out uniform, as in PyTorch.
TensorMap attention_case_run_pipeline(const CaseSpec& spec, const TensorMap& golden,
                                      const std::string& pipeline, const PipelineBias& bias,
                                      const reference::AttentionParams& p);

}  // namespace posenc::golden
