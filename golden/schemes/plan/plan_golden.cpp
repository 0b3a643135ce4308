// Golden cases for model plans: one case per layer type of a model (golden/cases/plan_case.hpp:
// stages, inputs, budgets; golden/cases/model_plan.hpp: the plan). Facts: docs/schemes/plans.md.
//
// Level 1 (committed): plans written by hand that mirror the layer types of current models,
// each type's case at the type's boundaries, f32 targets. Where golden/presets holds the model,
// the plan's name and values are the preset's, so `posenc generate --config` on the preset
// writes these very files (PlanGolden.PresetsGiveTheCatalogsFiles):
//   Gemma 2 9B    sliding_attention (window 4096) and full_attention alternating, RoPE base 1e4,
//                 query_pre_attn_scalar 256, attention logit soft cap 50
//   Gemma 3 4B    sliding_attention (RoPE base 1e4, window 1024), full_attention (base 1e6,
//                 linear x8), 5 : 1, query_pre_attn_scalar 256
//   Llama 4 Scout chunked_attention (interleaved RoPE base 5e5, llama3 x16, chunk 8192),
//                 full_attention (NoPE, Llama 4 query temperature F = 8192, c = 0.1), 3 : 1
//   GPT-OSS 20B   sliding_attention (window 128) and full_attention, alternating, both YaRN x32
//                 truncate = false (base 150000, L0 4096) and learned sinks
//   Command R7B   sliding_attention (interleaved RoPE base 5e4, window 4096), full_attention NoPE
//                 (Cohere2), 3 : 1, 32 layers, context 132096 (no preset: its config.json is not
//                 public without a licence click-through; these values are the ones public
//                 ports of the model state)
//   Gemma 4 31B   sliding_attention (RoPE base 1e4, head 256, window 1024), full_attention
//                 (proportional RoPE p = 0.25, base 1e6, head 512), 5 : 1, score scale 1
//   Mistral       full_attention (YaRN x16 over L0 16384, Mistral query temperature
//                 llama_4_scaling_beta 0.1 over L0), uniform (no preset: no published config
//                 was available to copy; beta 0.1 and L0 16384 are Ministral 3's as public
//                 ports of it state them, the YaRN factor and base are illustrative)
// Negative controls (result "invalid", each the twin of a valid case with its inputs): the
// global scaled RoPE on Gemma 3's sliding layers, RoPE on Command R7B's NoPE layers, Llama 4's
// temperature with p instead of p + 1, Mistral's with p + 1 instead of p, GPT-OSS's YaRN with
// truncate = true, GPT-OSS's sinks dropped.
#include <algorithm>
#include <string>
#include <vector>

#include "golden/cases/hf_config.hpp"
#include "golden/cases/model_plan.hpp"
#include "golden/cases/plan_case.hpp"
#include "golden/cases/registry.hpp"
#include "golden/format/limits.hpp"
#include "reference/common/errors.hpp"

namespace posenc::golden {
namespace {

using reference::QkNorm;
using reference::QkNormKind;
using reference::QkNormPosition;
using reference::QueryTemperatureRule;
using reference::RopeLayout;
using reference::RopeScalingType;
using Json = nlohmann::json;

PlanLayerType rope_type(const std::string& name, int head_dim, double base, RopeLayout layout) {
  PlanLayerType t;
  t.name = name;
  t.params.head_dim = t.params.rotary_dim = head_dim;
  t.params.base = base;
  t.params.layout = layout;
  return t;
}

PlanLayerType nope_type(const std::string& name, int head_dim) {
  PlanLayerType t;
  t.name = name;
  t.rope = PlanRope::kNone;
  t.params.head_dim = t.params.rotary_dim = head_dim;
  return t;
}

/// layer l has type 1 when (l + 1) % period == 0, else type 0 (Gemma's and Cohere2's pattern, Llama
/// 4's no_rope_layers); period 2 with `odd_global` false: GPT-OSS's alternation (even sliding).
std::vector<int> pattern(int n_layers, int period) {
  std::vector<int> v;
  for (int l = 0; l < n_layers; ++l) v.push_back((l + 1) % period == 0 ? 1 : 0);
  return v;
}

/// A plan written by hand; its model (ids, L and the config the cases embed) is the committed
/// preset's `<id>.json` when there is one, else `config` (a stand-in written here).
ModelPlan make_plan(const std::string& id, std::int64_t max_position,
                    std::vector<PlanLayerType> types, std::vector<int> layers,
                    const Json& config = Json()) {
  ModelPlan p;
  if (config.is_null()) {
    const auto path = default_presets_dir() / (id + ".json");
    p.model = rope_config_parse(read_json_text(path), path.string());
  } else {
    p.model = rope_config_from_json(config, id + " (stand-in config, golden/schemes/plan/plan_golden.cpp)");
  }
  if (p.model.id != id || p.model.max_position != max_position) {
    throw_invalid("plan_golden make_plan",
                  "the config's id and max_position_embeddings must be "
                  "the plan's",
                  p.model.id);
  }
  p.types = std::move(types);
  p.layer_type = std::move(layers);
  return p;
}

QkNorm gemma_qk_norm(double weight_offset) {
  QkNorm n;
  n.kind = QkNormKind::kRms;
  n.position = QkNormPosition::kBeforeRope;
  n.eps = 1e-6;
  n.weight_offset = weight_offset;
  return n;
}

ModelPlan gemma2_9b() {
  PlanLayerType s = rope_type("sliding_attention", 256, 10000.0, RopeLayout::kHalfSplit);
  s.mask = PlanMask::kSliding;
  s.window = 4096;
  s.query_pre_attn_scalar = 256;
  s.logit_softcap = 50.0;
  PlanLayerType g = s;
  g.name = "full_attention";
  g.mask = PlanMask::kCausal;
  g.window = 0;
  return make_plan("gemma-2-9b", 8192, {s, g}, pattern(42, 2));
}

ModelPlan gemma3_4b() {
  PlanLayerType s = rope_type("sliding_attention", 256, 10000.0, RopeLayout::kHalfSplit);
  s.mask = PlanMask::kSliding;
  s.window = 1024;
  s.query_pre_attn_scalar = 256;
  s.qk_norm = gemma_qk_norm(1.0);  // Gemma3RMSNorm (1 + w) before RoPE
  PlanLayerType g = rope_type("full_attention", 256, 1000000.0, RopeLayout::kHalfSplit);
  g.scaling.type = RopeScalingType::kLinear;
  g.scaling.factor = 8.0;
  g.query_pre_attn_scalar = 256;
  g.qk_norm = s.qk_norm;
  return make_plan("gemma-3-4b-it", 131072, {s, g}, pattern(34, 6));
}

ModelPlan llama4_scout() {
  PlanLayerType c = rope_type("chunked_attention", 128, 500000.0, RopeLayout::kInterleaved);
  c.scaling.type = RopeScalingType::kLlama3;
  c.scaling.factor = 16.0;
  c.scaling.low_freq_factor = 1.0;
  c.scaling.high_freq_factor = 1.0;
  c.scaling.original_max_position = 8192;
  c.mask = PlanMask::kChunked;
  c.chunk = 8192;
  c.qk_norm.kind = QkNormKind::kL2;  // Llama4TextL2Norm after RoPE (use_qk_norm)
  c.qk_norm.position = QkNormPosition::kAfterRope;
  c.qk_norm.eps = 1e-5;
  PlanLayerType n = nope_type("full_attention", 128);
  n.has_temperature = true;
  n.temperature = {QueryTemperatureRule::kLlama4, 8192, 0.1};
  return make_plan("llama-4-scout-17b-16e-instruct", 10485760, {c, n}, pattern(48, 4));
}

ModelPlan gpt_oss_20b() {
  PlanLayerType s = rope_type("sliding_attention", 64, 150000.0, RopeLayout::kHalfSplit);
  s.scaling.type = RopeScalingType::kYarn;
  s.scaling.factor = 32.0;
  s.scaling.original_max_position = 4096;
  s.scaling.max_position = 131072;
  s.scaling.beta_fast = 32.0;
  s.scaling.beta_slow = 1.0;
  s.scaling.truncate = false;
  s.sinks = true;
  PlanLayerType f = s;
  f.name = "full_attention";
  s.mask = PlanMask::kSliding;
  s.window = 128;
  return make_plan("gpt-oss-20b", 131072, {s, f}, pattern(24, 2));
}

ModelPlan command_r7b() {
  PlanLayerType s = rope_type("sliding_attention", 128, 50000.0, RopeLayout::kInterleaved);
  s.mask = PlanMask::kSliding;
  s.window = 4096;
  const std::string id = "command-r7b (mirrors CohereForAI/c4ai-command-r7b-12-2024)";
  const Json config = {
      {"_posenc",
       {{"id", id},
        {"source",
         "a stand-in, not a published config.json (that file sits behind a licence "
         "click-through): the keys the plan reader needs for the values public ports of the "
         "model state (32 layers, 3 sliding : 1 global, window 4096, interleaved RoPE base "
         "50000, context 132096, 32 heads of 128 over 8 kv heads)"}}},
      {"model_type", "cohere2"},
      {"hidden_size", 4096},
      {"num_attention_heads", 32},
      {"num_key_value_heads", 8},
      {"num_hidden_layers", 32},
      {"max_position_embeddings", 132096},
      {"rope_theta", 50000.0},
      {"sliding_window", 4096},
      {"sliding_window_pattern", 4}};
  return make_plan(id, 132096, {s, nope_type("full_attention", 128)}, pattern(32, 4), config);
}

ModelPlan gemma4_31b() {
  PlanLayerType s = rope_type("sliding_attention", 256, 10000.0, RopeLayout::kHalfSplit);
  s.mask = PlanMask::kSliding;
  s.window = 1024;
  s.query_pre_attn_scalar = 1.0;  // Gemma 4 scales its scores by 1 (q and k are normalised)
  PlanLayerType g = rope_type("full_attention", 512, 1000000.0, RopeLayout::kHalfSplit);
  g.rope = PlanRope::kProportional;
  g.proportional = {0.25, 1.0};
  g.query_pre_attn_scalar = 1.0;
  // q_norm / k_norm (w) before RoPE and a v_norm: the cases' q, k, v are past the norms
  s.qk_norm = g.qk_norm = gemma_qk_norm(0.0);
  s.v_norm = g.v_norm = true;
  return make_plan("gemma-4-31b-it", 262144, {s, g}, pattern(60, 6));
}

ModelPlan mistral_beta() {
  PlanLayerType t = rope_type("full_attention", 128, 1000000.0, RopeLayout::kHalfSplit);
  t.scaling.type = RopeScalingType::kYarn;
  t.scaling.factor = 16.0;
  t.scaling.original_max_position = 16384;
  t.scaling.max_position = 262144;
  t.scaling.beta_fast = 32.0;
  t.scaling.beta_slow = 1.0;
  t.has_temperature = true;
  t.temperature = {QueryTemperatureRule::kMistral, 16384, 0.1};
  const std::string id =
      "mistral-beta (a Mistral config with llama_4_scaling_beta 0.1, YaRN x16 over 16384)";
  const Json config = {
      {"_posenc",
       {{"id", id},
        {"source",
         "a stand-in, not a published config.json: Ministral 3's llama_4_scaling_beta 0.1 over "
         "original_max_position_embeddings 16384 as public ports of it state them; the YaRN "
         "factor 16 and base 1e6 are illustrative"}}},
      {"model_type", "ministral3"},
      {"hidden_size", 4096},
      {"head_dim", 128},
      {"num_attention_heads", 32},
      {"num_key_value_heads", 8},
      {"num_hidden_layers", 40},
      {"max_position_embeddings", 262144},
      {"rope_parameters",
       {{"rope_type", "yarn"},
        {"rope_theta", 1000000.0},
        {"factor", 16.0},
        {"original_max_position_embeddings", 16384},
        {"beta_fast", 32.0},
        {"beta_slow", 1.0},
        {"llama_4_scaling_beta", 0.1}}}};
  return make_plan(id, 262144, {t}, std::vector<int>(40, 0), config);
}

/// A negative control of a valid case: the same inputs (seed), expected values of the mistake.
PlanCaseDef control(PlanCaseDef d, const std::string& convention, const std::string& mistake,
                    const std::string& reason) {
  d.expected = plan_type_with_mistake(d.type, d.plan_types, mistake);
  d.result = "invalid";
  d.convention = convention;
  d.mistake = mistake;
  d.reason = reason;
  d.id = "plan_" + d.model + "_" + d.type.name + "_" + convention + "_invalid_" +
         std::string(dtype_short(d.dtype));
  return d;
}

const std::vector<PlanCaseDef>& case_table() {
  static const std::vector<PlanCaseDef> table = [] {
    std::vector<PlanCaseDef> v;
    const std::vector<std::pair<std::string, ModelPlan>> plans = {
        {"gemma_2_9b", gemma2_9b()},
        {"gemma_3_4b_it", gemma3_4b()},
        {"llama_4_scout_17b_16e_instruct", llama4_scout()},
        {"gpt_oss_20b", gpt_oss_20b()},
        {"command_r7b", command_r7b()},
        {"gemma_4_31b_it", gemma4_31b()},
        {"mistral_beta", mistral_beta()}};
    for (const auto& [name, plan] : plans) {
      for (int t = 0; t < static_cast<int>(plan.types.size()); ++t)
        v.push_back(plan_case_for(plan, t, name, DType::kF32));
    }
    auto find = [&](const std::string& id) -> const PlanCaseDef& {
      for (const auto& d : v) {
        if (d.id == id) return d;
      }
      throw_invalid("plan case table", "no case has this id", id);
    };
    std::vector<PlanCaseDef> c;
    c.push_back(control(
        find("plan_gemma_3_4b_it_sliding_attention_f32"), "global_rope", "global-rope-on-sliding",
        "Gemma 3's sliding layers rotated with the global layers' base 1e6 and linear x8 "
        "instead of base 1e4 unscaled (vLLM #29111, llama.cpp #14367, ollama #13452)"));
    c.push_back(control(find("plan_command_r7b_full_attention_f32"), "rope", "rope-on-nope",
                        "Cohere2's global NoPE layers rotated with the sliding layers' RoPE"));
    c.push_back(control(
        find("plan_llama_4_scout_17b_16e_instruct_full_attention_f32"), "temperature_p",
        "temperature-p",
        "Llama 4's query temperature with floor(p / 8192) instead of floor((p + 1) / 8192): "
        "one token late at every step"));
    c.push_back(control(
        find("plan_mistral_beta_full_attention_f32"), "temperature_p_plus_1",
        "temperature-p-plus-1",
        "Mistral's llama_4_scaling_beta temperature with floor((p + 1) / L0) (Llama 4's form) "
        "instead of floor(p / L0): one token early at every step"));
    c.push_back(
        control(find("plan_gpt_oss_20b_full_attention_f32"), "yarn_truncate", "yarn-truncate",
                "GPT-OSS's YaRN correction range floored and ceiled (truncate = true) where the "
                "model ships truncate = false (vLLM #28244)"));
    c.push_back(control(find("plan_gpt_oss_20b_sliding_attention_f32"), "sinks_dropped",
                        "sinks-dropped",
                        "GPT-OSS's learned sink logits left out of the softmax denominator"));
    c.push_back(control(
        find("plan_gemma_3_4b_it_full_attention_f32"), "other_layer_type", "other-layer-type",
        "Gemma 3's global layers computed as its sliding layers (base 1e4 unscaled, window "
        "1024): what an engine whose layer pattern is off by one computes on layers 5, 11, 17, "
        "23 and 29"));
    c.push_back(control(
        find("plan_llama_4_scout_17b_16e_instruct_chunked_attention_f32"), "qk_norm_missing",
        "qk-norm-missing",
        "Llama 4's L2 norm of q and k after RoPE (Llama4TextL2Norm, eps rms_norm_eps 1e-5) left "
        "out on its chunked RoPE layers, where HF's Llama4TextAttention applies it when "
        "use_qk_norm (Scout ships true)"));
    v.insert(v.end(), c.begin(), c.end());
    return v;
  }();
  return table;
}

std::vector<CaseRow> cases() {
  std::vector<CaseRow> rows;
  for (const auto& d : case_table()) {
    std::string desc =
        d.model + ", layer type " + d.type.name + ", " + std::string(dtype_short(d.dtype));
    if (!d.convention.empty()) desc += ", invalid convention " + d.convention;
    rows.push_back({d.id, desc});
  }
  return rows;
}

GoldenCase generate(const std::string& id) {
  for (const auto& d : case_table()) {
    if (d.id == id) return plan_case_generate(d);
  }
  throw_invalid("plan_generate", "no plan case has this id", id);
}

}  // namespace

SchemeEntry plan_scheme() {
  SchemeEntry e{"plan",
                "model plans: one case per layer type (RoPE, proportional or none; sliding, "
                "chunked or causal mask; query temperature; sinks) from q, k, v to the output",
                &cases,
                &generate,
                &plan_case_run_engine,
                &plan_case_mistakes,
                &plan_case_mistake_words};
  e.order = 140;  // its place in `posenc list` and the catalog
  return e;
}

}  // namespace posenc::golden
