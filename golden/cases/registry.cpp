#include "golden/cases/registry.hpp"

#include <algorithm>

#include "golden/cases/hf_config.hpp"
#include "golden/cases/model_plan.hpp"
#include "golden/cases/mrope_case.hpp"
#include "golden/cases/plan_case.hpp"
#include "golden/cases/rope_case.hpp"
#include "golden/format/limits.hpp"
#include "reference/common/errors.hpp"

namespace posenc::golden {

// One line POSENC_SCHEME(<slug>) per home golden/schemes/<slug>/, written by CMake when it
// configures (build/generated/posenc_scheme_list.inc).
#define POSENC_SCHEME(slug) SchemeEntry slug##_scheme();
#include "posenc_scheme_list.inc"
#undef POSENC_SCHEME

const std::vector<SchemeEntry>& schemes() {
  static const std::vector<SchemeEntry> all = [] {
    std::vector<SchemeEntry> v = {
#define POSENC_SCHEME(slug) slug##_scheme(),
#include "posenc_scheme_list.inc"
#undef POSENC_SCHEME
    };
    std::stable_sort(v.begin(), v.end(), [](const SchemeEntry& a, const SchemeEntry& b) {
      return a.order != b.order ? a.order < b.order : a.slug < b.slug;
    });
    return v;
  }();
  return all;
}

const SchemeEntry& scheme_by_slug(std::string_view slug) {
  std::string known;
  for (const auto& s : schemes()) {
    if (s.slug == slug) return s;
    known += (known.empty() ? "" : ", ") + s.slug;
  }
  throw_invalid("scheme_by_slug", "scheme must be one of: " + known, slug);
}

ConfigCases cases_for_config(const std::filesystem::path& config, const std::vector<std::int64_t>& positions,
                             DType dtype, int level, const std::filesystem::path& layout) {
  const std::string text = read_json_text(config);
  bool vl = false;
  try {
    check_json_depth(text, config.string(), input_limits().json_depth);
    vl = mrope_config_is_vl(nlohmann::json::parse(text));
  } catch (const nlohmann::json::exception&) {
    vl = false;  // the RoPE reader reports the JSON error
  }
  if (vl) {
    if (!positions.empty()) {
      throw_invalid("cases_for_config", "a vision-language config takes --layout, not --positions (its "
                    "positions come from the prompt layout)", config.string());
    }
    if (level != 1) {
      throw_invalid("cases_for_config", "level 2 sweeps cover text RoPE configs; a vision-language "
                    "config takes level 1 (its positions come from the prompt layout)", config.string());
    }
    return mrope_cases_for_config(text, config.string(), layout, dtype);
  }
  if (!layout.empty()) {
    throw_invalid("cases_for_config", "--layout needs a vision-language config (model_type qwen2_vl, "
                  "qwen2_5_vl, qwen3_vl, glm4v); this one has none", config.string());
  }
  const RopeModelConfig m = rope_config_parse(text, config.string());
  const std::string name = config_case_name(m, text);
  // A model with several layer types: one plan case per type and the plan manifest (level 1
  // without --positions; given positions and level-2 sweeps stay the RoPE cases of the
  // config's top-level rule, as before plans).
  if (positions.empty() && level == 1) {
    if (const ModelPlan plan = model_plan_from_config(m, config.string()); !plan.uniform()) {
      return plan_config_cases(plan, name, dtype);
    }
  }
  ConfigCases out;
  const auto& p = m.params;
  std::string rule = reference::rope_scaling_type_name(m.scaling.type);
  if (m.scaling.type != reference::RopeScalingType::kNone) {
    nlohmann::json r = rope_scaling_to_json(m.scaling);
    for (const char* k : {"short_factor", "long_factor"}) {
      if (r.contains(k)) r[k] = std::to_string(r[k].size()) + " values";
    }
    rule.append(" ").append(r.dump());
  }
  out.model = m.id + " (cases named " + name + ")";
  out.model.append(": head_dim ").append(std::to_string(p.head_dim));
  out.model.append(", rotary_dim ").append(std::to_string(p.rotary_dim));
  out.model.append(", base ").append(nlohmann::json(p.base).dump());
  out.model.append(", ").append(reference::rope_layout_name(p.layout));
  out.model.append(", ").append(std::to_string(m.n_heads)).append(" q / ");
  out.model.append(std::to_string(m.n_kv_heads)).append(" kv heads, rule ").append(rule);
  out.notes = m.notes;
  out.notes.push_back("layout: " + m.layout_reason);
  const std::vector<RopeCaseDef> defs =
      level == 2 ? rope_level2_cases(m, dtype, name) : rope_cases_for_config(m, dtype, positions, name);
  for (const RopeCaseDef& d : defs) {
    std::string desc = d.call + ": " + std::to_string(rope_case_n_positions(d)) + " positions up to " +
                       std::to_string(rope_case_last_position(d));
    out.cases.push_back({d.scheme, d.id, desc, [d] { return rope_case_generate(d); }});
    rope_case_estimate(d, &out.cases.back().largest_tensor_bytes, &out.cases.back().file_bytes,
                       &out.cases.back().seconds);
  }
  return out;
}

}  // namespace posenc::golden
