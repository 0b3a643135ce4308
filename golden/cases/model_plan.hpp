// Model plans: which position scheme each layer of a model uses.
//
// Current models choose the position scheme per layer: Gemma 2/3 alternate sliding-window and
// global layers with different RoPE bases and scaling, Cohere2 (Command R7B) rotates only its
// sliding layers, Llama 4 interleaves chunked RoPE layers with NoPE layers that scale the query by
// a temperature, GPT-OSS alternates 128-token windows with full attention and adds a learned sink
// logit, DeepSeek-V3 rotates only the decoupled MLA sub-head. A ModelPlan is that choice, read
// from the model's HF config (transformers v5 `layer_types` + per-type `rope_parameters`, or the
// v4 model-specific keys): the distinct layer types, each a complete description of what one
// layer computes on positions, and the type of every layer.
//
// Golden files are written per layer type (golden/cases/plan_case.hpp); the plan manifest lists
// every layer with the case that checks it, so `posenc verify` can name the layers a failure
// affects.
#pragma once
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "golden/cases/hf_config.hpp"
#include "reference/qk_norm.hpp"
#include "reference/query_temperature.hpp"
#include "reference/rope.hpp"
#include "reference/rope_proportional.hpp"
#include "reference/rope_scaling.hpp"

namespace posenc::golden {

/// How a layer's keys are masked, on absolute positions m (query) and j (key).
enum class PlanMask {
  kCausal,   // j <= m
  kSliding,  // causal and m - j < window (HF's sliding_window W: a query sees W keys, itself included)
  kChunked,  // causal and floor(j / chunk) == floor(m / chunk) (Llama 4)
};

constexpr const char* plan_mask_name(PlanMask m) {
  return m == PlanMask::kCausal ? "causal" : m == PlanMask::kSliding ? "sliding" : "chunked";
}

/// What the rotation of a layer type is.
enum class PlanRope {
  kRope,          // RoPE (rope.hpp), scaled by `scaling` when its type is not kNone
  kProportional,  // proportional RoPE (rope_proportional.hpp; Gemma 4 full-attention layers)
  kNone,          // NoPE: q and k are not rotated
};

constexpr const char* plan_rope_name(PlanRope r) {
  return r == PlanRope::kRope ? "rope" : r == PlanRope::kProportional ? "proportional" : "none";
}

/// One layer type: everything a layer of that type does with positions.
struct PlanLayerType {
  std::string name;  // as the config names it ("sliding_attention", "full_attention"), or
                     // posenc's name for v4 configs ("chunked_rope", "nope_global"); a file-safe
                     // [a-z0-9_] string, unique within the plan
  PlanRope rope = PlanRope::kRope;
  reference::RopeParams params;         // head_dim, rotary_dim, base, layout (ignored for kNone)
  reference::RopeScaling scaling;       // kNone = unscaled (kRope only)
  reference::RopeProportional proportional;  // kProportional only
  int mla_rope_dim = 0;                 // > 0: DeepSeek MLA, RoPE on this decoupled sub-head only
  PlanMask mask = PlanMask::kCausal;
  std::int64_t window = 0;              // kSliding: W > 0
  std::int64_t chunk = 0;               // kChunked: C > 0
  bool has_temperature = false;         // query temperature (query_temperature.hpp)
  reference::QueryTemperature temperature;
  bool sinks = false;                   // learned per-head sink logits (GPT-OSS)
  reference::QkNorm qk_norm;            // q/k normalization (kind kNone: none) and where it sits
  bool v_norm = false;                  // values RMS-normalized too (Gemma 4; not modelled: its
                                        // cases' q, k, v are past the norms)
  double query_pre_attn_scalar = 0;     // > 0: softmax scale 1/sqrt(this) instead of 1/sqrt(d)
  double logit_softcap = 0;             // > 0: scores -> cap * tanh(scores / cap) (Gemma 2)
  std::vector<std::string> config_keys; // the config keys this type was read from, for notes
};

/// A model's per-layer plan.
struct ModelPlan {
  RopeModelConfig model;              // the config as the RoPE reader sees it (ids, heads, L)
  std::vector<PlanLayerType> types;   // distinct types, in order of first appearance
  std::vector<int> layer_type;        // [num_hidden_layers]: index into `types`; empty when the
                                      // config has no num_hidden_layers (then the plan is uniform)
  std::vector<std::string> notes;     // defaults filled in and conventions chosen, with reasons
  bool uniform() const { return types.size() == 1; }
};

/// The plan of a parsed config (the rules per family: docs/own-model.md, "Model plans"; keys are
/// read from the text model, with the class defaults the reader filled in). Every model has one: a model without per-layer keys is uniform
/// (one type, every layer). GoldenFileError naming the file (`source`) and the key for missing,
/// inconsistent or out-of-range plan keys (a `layer_types` list whose length is not
/// num_hidden_layers, an unknown layer type, a pattern that is not a positive integer).
ModelPlan model_plan_from_config(const RopeModelConfig& model, const std::string& source);

/// The RoPE model of layer type `type` (a kRope type): the plan's model with that type's head,
/// rotary dimension, base, layout and scaling (softmax head: the model's, or the type's head when
/// the type's head differs, as Gemma 4's global_head_dim). For a uniform plan it is the model
/// unchanged, so a uniform plan's case is today's single case. InvalidArgument naming
/// plan_type_model for an index out of range or a type that is not kRope.
RopeModelConfig plan_type_model(const ModelPlan& plan, std::size_t type);

/// The plan as JSON: {"model", "layers": [{"index", "type", ...}], "types": {name: {...}}}
/// (the plan manifest's body; the case ids are added by the writer).
nlohmann::json model_plan_to_json(const ModelPlan& plan);

/// A type's q/k normalization as JSON: null for none, else {"kind", "position", "eps"} and
/// "weight_offset" for a weighted norm (plan_type_to_json's "qk_norm", plan.json's layers).
nlohmann::json plan_qk_norm_json(const reference::QkNorm& n);

/// A layer type as JSON: a plan case's params.type and plan.json's "types" (read back by
/// plan_type_from_json, golden/cases/plan_case.hpp).
nlohmann::json plan_type_to_json(const PlanLayerType& t);

/// The layer type from JSON (plan_type_to_json's form, golden/cases/plan_json.cpp;
/// GoldenFileError naming `source` and the key).
PlanLayerType plan_type_from_json(const nlohmann::json& j, const std::string& source);

}  // namespace posenc::golden
