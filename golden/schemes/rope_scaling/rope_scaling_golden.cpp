// Golden cases for RoPE context extension. Formulas: reference/rope_scaling.hpp; the case itself
// (stages, budgets, engine): golden/cases/rope_case.hpp.
//
// Level 2 (committed): the scaled presets of golden/presets (read by the HF config reader,
// exactly as `posenc generate --config` reads a user's file), each with the calls of its rule
// (rope_cases_for_config: every rule one call over the hard positions and the rule's
// boundaries; LongRoPE a short call ending at L0 - 1 and a boundary call ending at L0; dynamic
// NTK a call within L and one ending at 2L - 1), stages inv_freq, attention_factor,
// softmax_scale (MLA), cos, sin, q_rot, k_rot, scores. Where engines disagree, each behaviour is
// a named convention: `acceptable` cases (a declared alternative an engine may follow) and
// `invalid` cases (known-wrong behaviour, negative controls whose manifest gives the reason).
#include <string>
#include <vector>

#include "golden/cases/hf_config.hpp"
#include "golden/cases/registry.hpp"
#include "golden/cases/rope_case.hpp"
#include "reference/common/errors.hpp"
#include "reference/rope_scaling.hpp"

namespace posenc::golden {
namespace {

using reference::LongRopePolicy;
using reference::YarnForm;

struct Preset {
  const char* file;
  std::vector<DType> dtypes;  // the first gets every call; the others the "all" call
};

/// A convention case derived from a default case: the expected values follow `change`.
template <class Change>
RopeCaseDef convention(RopeCaseDef d, const std::string& name, const std::string& result,
                       const std::string& reason, Change change) {
  change(d.expected);
  d.alternatives.clear();  // a convention case holds that convention alone
  d.result = result;
  d.convention = name;
  d.reason = reason;
  std::string dt = "_";
  dt += dtype_short(d.dtype);
  d.id.resize(d.id.size() - dt.size());
  d.id.append("_").append(name).append(dt);
  d.seed = rope_seed_of(d.id);
  return d;
}

const std::vector<RopeCaseDef>& case_table() {
  static const std::vector<RopeCaseDef> table = [] {
    const std::vector<Preset> presets = {
        {"llama-3.1-8b", {DType::kF32, DType::kBF16, DType::kF16}},
        {"llama-3.2-1b", {DType::kF32}},
        {"deepseek-v2-lite", {DType::kF32, DType::kBF16}},
        {"deepseek-v3", {DType::kF32}},
        {"deepseek-v2", {DType::kF32}},
        {"qwen2.5-7b-instruct-yarn", {DType::kF32}},
        {"yarn-llama-2-7b-64k", {DType::kF32}},
        {"phi-3-mini-128k-instruct", {DType::kF32}},
        {"phi-3.5-mini-instruct", {DType::kF32}},
        {"llama-2-7b-dynamic-x2", {DType::kF32}},
        {"llama-2-7b-linear-x4", {DType::kF32}},
        {"llama-2-7b-ntk-x8", {DType::kF32}},
    };
    std::vector<RopeCaseDef> v;
    for (const auto& ps : presets) {
      const RopeModelConfig m = rope_config_read(default_presets_dir() / (std::string(ps.file) + ".json"));
      for (std::size_t k = 0; k < ps.dtypes.size(); ++k) {
        for (auto& d : rope_cases_for_config(m, ps.dtypes[k], {})) {
          if (k > 0 && d.call != "all") continue;
          v.push_back(d);
        }
      }
    }
    auto find = [&](const std::string& model, const std::string& call) -> const RopeCaseDef& {
      for (const auto& d : v) {
        if (d.model.id == model && d.call == call && d.dtype == DType::kF32) return d;
      }
      throw_invalid("rope_scaling case table", "no default case for this model", model);
    };
    std::vector<RopeCaseDef> c;
    c.push_back(convention(find("llama-3.2-1b", "all"), "meta_factor_8", "invalid",
                           "meta-llama/llama-models apply_scaling hard-codes scale_factor 8; Llama-3.2-1B "
                           "and 3B were trained with the config's 32 (llama-models #241: bad output after "
                           "about 80k tokens, invisible at short length)",
                           [](reference::RopeScaling& s) { s.factor = 8.0; }));
    c.push_back(convention(find("deepseek-v2", "all"), "deepseek_official", "acceptable",
                           "DeepSeek's official inference code (DeepSeek-V3 inference/model.py, "
                           "config_236B.json): no cos/sin factor, softmax scale times (0.1 mscale ln s + 1)^2 "
                           "with mscale = 1.0 (that config sets none): 1.8738 instead of HF's 1.5896 from "
                           "mscale_all_dim 0.707; cos, sin and the rotations are the same as HF's",
                           [](reference::RopeScaling& s) {
                             s.yarn_form = YarnForm::kDeepSeekOfficial;
                             s.mscale = 1.0;
                           }));
    c.push_back(convention(find("qwen2.5-7b-instruct-yarn", "all"), "hf_prefix_factor_override", "invalid",
                           "transformers of early 2025 overrode factor with max_position_embeddings / "
                           "original_max_position_embeddings whenever the latter is in rope_scaling "
                           "(transformers #38224); for this recipe 32768 / 32768 = 1: no scaling at all",
                           [](reference::RopeScaling& s) {
                             s.factor = static_cast<double>(s.max_position) / static_cast<double>(s.original_max_position);
                           }));
    c.push_back(convention(find("qwen2.5-7b-instruct-yarn", "all"), "truncate_flipped", "invalid",
                           "the correction range kept fractional (truncate false) where the config leaves "
                           "HF's default truncate true: the ramp's ends move inside pairs 23 and 40 (the "
                           "opposite of vLLM #27722, which rounded a truncate-false model)",
                           [](reference::RopeScaling& s) { s.truncate = !s.truncate; }));
    c.push_back(convention(find("yarn-llama-2-7b-64k", "all"), "hf_early_length", "invalid",
                           "transformers v4.46 finds the YaRN correction range over max_position_embeddings "
                           "65536 instead of original_max_position_embeddings 4096: ramp 40..65 instead of "
                           "20..46, a different frequency map than the checkpoint was trained with",
                           [](reference::RopeScaling& s) { s.yarn_form = YarnForm::kHfEarly; }));
    c.push_back(convention(find("phi-3-mini-128k-instruct", "short"), "vllm_max_model_len", "acceptable",
                           "current vLLM (phi3_long_rope_scaled_rope.py, vllm #27431) uses the long factors "
                           "for every call whenever max_model_len > L0, chosen once so that the KV cache "
                           "never mixes the two; HF switches per call",
                           [](reference::RopeScaling& s) { s.longrope_policy = LongRopePolicy::kVllmMaxModelLen; }));
    c.push_back(convention(find("phi-3-mini-128k-instruct", "boundary"), "vllm_any_above", "invalid",
                           "older vLLM / SGLang switch to the long factors only when some position exceeds "
                           "L0, one position later than HF (seq_len > L0, i.e. a position >= L0): at "
                           "position 4096 they still use the short factors (unsloth #10681)",
                           [](reference::RopeScaling& s) { s.longrope_policy = LongRopePolicy::kVllmAnyAbove; }));
    c.push_back(convention(find("deepseek-v3", "all"), "softmax_factor_missing", "invalid",
                           "the MLA softmax scale left at 1/sqrt(qk_nope_head_dim + qk_rope_head_dim) "
                           "without YaRN's mscale(s, mscale_all_dim)^2 (transformers #47435): 0.072169 "
                           "instead of 0.135234 for s = 40, every attention logit 1.87x too small; cos, "
                           "sin and the rotations are unchanged (a = 1)",
                           [](reference::RopeScaling& s) { s.mla = false; }));
    c.push_back(convention(find("llama-2-7b-linear-x4", "all"), "factor_inverted", "invalid",
                           "the factor multiplied instead of divided: frequencies 4x faster instead of 4x "
                           "slower (theta_i * s)",
                           [](reference::RopeScaling& s) { s.factor = 1.0 / s.factor; }));
    // DeepSeek-V2 served by DeepSeek's own code is a correct engine too: its default cases
    // declare that convention, so such an engine passes them (softmax_scale differs).
    for (auto& d : v) {
      if (d.model.id != "deepseek-v2") continue;
      reference::RopeScaling r = d.expected;
      r.yarn_form = YarnForm::kDeepSeekOfficial;
      r.mscale = 1.0;
      d.alternatives.push_back({"deepseek_official",
                                "DeepSeek's inference/model.py with config_236B.json (no mscale: 1.0): "
                                "no cos/sin factor, softmax scale times (0.1 ln s + 1)^2",
                                r});
    }
    v.insert(v.end(), c.begin(), c.end());
    return v;
  }();
  return table;
}

std::vector<CaseRow> cases() {
  std::vector<CaseRow> rows;
  for (const auto& c : case_table()) {
    std::string d = c.model.id + ", " + reference::rope_scaling_type_name(c.model.scaling.type) + ", call " +
                    c.call + ", " + std::string(dtype_short(c.dtype));
    if (!c.convention.empty()) d += ", " + c.result + " convention " + c.convention;
    rows.push_back({c.id, d});
  }
  return rows;
}

GoldenCase generate(const std::string& id) {
  for (const auto& c : case_table()) {
    if (c.id == id) return rope_case_generate(c);
  }
  throw_invalid("rope_scaling_generate", "no RoPE scaling case has this id", id);
}

}  // namespace

SchemeEntry rope_scaling_scheme() {
  SchemeEntry e{"rope_scaling",
                "RoPE context extension: linear (PI), NTK, dynamic NTK, YaRN (+ DeepSeek), Llama 3, "
                "LongRoPE, from model configs",
                &cases, &generate, &rope_case_run_engine, &rope_case_mistakes};
  e.order = 20;  // its place in `posenc list` and the catalog
  return e;
}

}  // namespace posenc::golden
