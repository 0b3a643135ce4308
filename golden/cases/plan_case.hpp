// One golden case per layer type of a model plan (golden/cases/model_plan.hpp): what one layer of
// that type computes on positions, from q, k, v to the attention output.
//
// A case is a handful of tokens at chosen absolute positions (sorted, distinct; every token is a
// query and a key, as a prefill over a cache that holds exactly these tokens): 0..3, and a few
// positions on both sides of each of the type's boundaries (the window edge W, the chunk
// boundary C, the temperature's steps, the end of the context). The mask is a function of those
// positions, never of the token indices. Shapes: 2 q heads over 1 kv head (the model's grouping
// reduced to its smallest form), the type's head_dim, value_dim = head_dim. Stages:
//   q_rot [T, Hq, h]   rotated   q rotated to its position (RoPE, proportional RoPE or none),
//                                then times the query temperature tau(m) where the type has one
//   k_rot [T, Hk, h]   rotated   k rotated to its position (never scaled)
//   scores [Hq, T, T]  scores    sigma (q_rot . k_rot) for every pair, masked or not; sigma =
//                                1/sqrt(query_pre_attn_scalar), else 1/sqrt(head_dim); kv head
//                                = q head / (Hq / Hk); with a logit soft cap c (Gemma 2):
//                                c tanh(s / c)
//   probs [Hq, T, T]   probabilities   softmax over the visible keys (the type's mask on the
//                                positions), with the head's sink logit in the denominator
//                                where the type has sinks; masked entries exactly 0
//   out [T, Hq, h]     output    sum_j probs_ij v_j
// Inputs: positions [T] int64, q [T, Hq, h], k [T, Hk, h], v [T, Hk, h], sinks [Hq] (f32, when
// the type has sinks), q_norm_weight and k_norm_weight [h] (f32, when the type's q/k norm has
// weights and the case's q and k are projections). q/k normalization (reference/qk_norm.hpp):
// params.qk_inputs says whether q and k are the projections (the expected values apply the
// type's norm, before or after the rotation as the type says) or already normalized (a type
// whose norm sits before RoPE and whose other normalizations are not modelled, Gemma 4's: an
// engine feeds them past its norm). The manifest's params.type is the layer type
// (plan_type_to_json), and params.plan the model's other types and the layers of this one.
//
// Budgets (docs/profiles.md, "Model plans"): the RoPE stages' (rope_stage_budgets) with the
// angle extras of the profile's pipeline (rope_pipeline_angle_errors; a proportional type's
// zero pairs are exact), the temperature's error added to q_rot and the scores, and the
// attention core's (kAttentionMaxError) on the probabilities and the output, whose extras carry
// the score error the rotated inputs bring (the scores' budget, first order through the
// softmax); a soft cap's division, tanh and product add 3 r to the scores' bound (its slope is
// at most 1, so it never amplifies an error). A q/k norm adds its own error delta_n (0.51 for
// posenc's kernel, h / 4 + 4 for a float32 mean of squares and rsqrt) to q_rot, k_rot and twice
// to the scores; after RoPE it also scales the conditions by r = 1 / rms and carries the
// rotation's error into r (first order: dr / r <= sum |y| |e| / sum y^2). MLA types are refused
// (not modelled here yet).
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "golden/cases/hard_positions.hpp"
#include "golden/cases/model_plan.hpp"
#include "golden/cases/plan_manifest.hpp"
#include "golden/cases/registry.hpp"

namespace posenc::golden {

/// Everything a plan case is made from.
struct PlanCaseDef {
  std::string id;
  std::string model;        // the model's name ("gemma3_4b"), as case ids carry it
  std::string model_words;  // one line: which model this mirrors, or the config read
  PlanLayerType type;       // the layer type as the model has it
  /// The type the expected values follow: `type`, or for a negative control the mistaken one.
  PlanLayerType expected;
  std::vector<PlanLayerType> plan_types;  // every type of the model (engine mistakes borrow)
  std::vector<int> layers;                // the layers of this type
  int n_layers = 0;
  int n_q_heads = 2, n_kv_heads = 1;
  std::vector<HardPosition> positions;  // sorted, distinct
  std::vector<double> sinks;            // [n_q_heads] when type.sinks (exact in float32)
  /// The case's q and k: "projections" (false: before the type's q/k normalization, which the
  /// expected values apply) or "normalized" (true: after it; an engine skips its norm).
  bool qk_inputs_normalized = false;
  std::vector<double> q_norm_weight, k_norm_weight;  // [head_dim] for a weighted norm on
                                                     // projections (exact in float32)
  nlohmann::json preset;  // {name, hf_model, source, config}: the model's config
  /// q, k, v as given (a case read back, plan_case_def_of) instead of drawn from the seed.
  std::vector<double> q, k, v;
  bool cross_check = true;  // false: the mp50 oracle alone (a diagnose hypothesis)
  DType dtype = DType::kF32;
  std::uint64_t seed = 0;
  std::string result = "valid", convention, reason, mistake;
};

/// The positions of a type's case: 0..3 and both sides of each of its boundaries (window W,
/// chunk C, the temperature's first two steps, the last two positions below `max_position`
/// when it is > 0), each with why, sorted and distinct.
std::vector<HardPosition> plan_type_positions(const PlanLayerType& t, std::int64_t max_position);

/// A valid case of one type of a plan: heads 2 q / 1 kv, positions plan_type_positions, sinks
/// drawn from the seed when the type has them.
PlanCaseDef plan_case_for(const ModelPlan& plan, int type_index, const std::string& model_name,
                          DType t);

/// Pure: inputs from the PRNG, expected values from mp50 (cross-checked in mp100), budgets,
/// manifest. InvalidArgument for a type this case does not model (MLA).
GoldenCase plan_case_generate(const PlanCaseDef& d);

/// A plan case read back into its definition (inputs as the case holds them; GoldenFileError
/// naming the key for a manifest that is not a plan case's).
PlanCaseDef plan_case_def_of(const CaseSpec& spec, const TensorMap& golden);

/// The case's stages and their budget companions (.exact, .cond, .extra.<profile>) as the mp50
/// oracle gives them when the layer computes `t` on the case's inputs: a diagnose hypothesis
/// whose mask or angles differ from the case's, judged with its own budgets (golden/cases/
/// diagnose.cpp's judge_against takes the companions a run carries).
struct PlanOracleRun {
  CaseSpec spec;  // the run's own manifest: its checks and budgets
  TensorMap run;  // its expected tensors and their companions
};
PlanOracleRun plan_case_oracle_run(const CaseSpec& spec, const TensorMap& golden,
                                   const PlanLayerType& t);

/// The built-in engine: posenc's kernels (optimized::rope_apply with the type's cache,
/// optimized::query_temperature_apply, optimized::attention_forward / attention_probs with the
/// positions' mask as `allowed`; a soft-capped type's softmax in double) on pipeline "exact", a
/// float32 HF-style pipeline on "fp32" (on "fp32-recurrence" with ggml's tables);
/// EngineOptions::mistake one of plan_case_mistakes() (InvalidArgument where it does not apply
/// to the case's type).
TensorMap plan_case_run_engine(const CaseSpec& spec, const TensorMap& golden,
                               const EngineOptions& o);
/// The built-in engine on the case's inputs with `t` in place of the case's type (the fitted
/// hypotheses of golden/cases/plan_fit.hpp); `tau`, when given, replaces the query temperature:
/// q_rot row r times float(tau(positions[r])).
TensorMap plan_case_run_type(const CaseSpec& spec, const TensorMap& golden, const PlanLayerType& t,
                             const std::string& pipeline,
                             const std::function<double(std::int64_t)>& tau = {});
std::vector<std::string> plan_case_mistakes();
/// The bug a mistake plants, in engine terms.
std::string plan_case_mistake_words(const std::string& mistake);
/// The type an engine with `mistake` computes in place of `t` (`plan`: the model's types; the
/// global RoPE of global-rope-on-sliding and the RoPE of rope-on-nope come from there);
/// InvalidArgument when the mistake does not apply to `t`. A negative control's `expected`.
PlanLayerType plan_type_with_mistake(const PlanLayerType& t, const std::vector<PlanLayerType>& plan,
                                     const std::string& mistake);

/// `generate --config` on a plan with several types: one case per type (plan_case_for, ids
/// plan_<name>_<type>_<dtype>), estimates, and ConfigCases::plan.
ConfigCases plan_config_cases(const ModelPlan& plan, const std::string& name, DType t);

}  // namespace posenc::golden
