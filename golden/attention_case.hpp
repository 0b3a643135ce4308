// Shared generator and engine for golden cases whose output is an attention computation
// (attention, nope, and the bias schemes): inputs q, k, v (and key_padding), expected
// probabilities and outputs. Formula: see reference/attention.hpp.
//
// Expected tensors and their condition scales (golden/manifest.hpp has the error formula):
//   probs [H, Tq, Tk]  cond_ij = p_ij (1 + S_ij + sum_k p_ik S_ik); masked entries cond 0 (must
//                      be exactly 0)
//   out   [Tq, H, dv]  cond_ic = sum_j p_ij |v_jc| + sum_j p_ij |v_jc - o_ic| S_ij
//   with S_ij = scale * sum_d |q_id k_jd| + |bias_ij|, the sensitivity of p and o to a relative
//   error in the score.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "golden/registry.hpp"
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
  double value_range = 1.0;  // inputs are dyadic in [-value_range, value_range]
};

/// Pure: inputs from the PRNG, expected values from mp50, mp100 cross-check, manifest.
GoldenCase attention_case_generate(const AttentionCaseDef& c);

/// The params, masks and shapes a manifest records (for engines).
reference::AttentionParams attention_params_from_manifest(const nlohmann::json& m);

/// Runs optimized::attention_forward (and attention_probs) on the case's inputs; outputs in the
/// case dtype. `bias` may be null.
TensorMap attention_case_run_engine(const CaseSpec& spec, const TensorMap& golden,
                                    const optimized::AttentionBias* bias,
                                    const reference::AttentionParams& p);

}  // namespace posenc::golden
