// The JSON codecs of a plan layer type (plan_type_to_json, plan_type_from_json: a plan case's
// params.type and plan.json's types, golden/cases/model_plan.hpp and plan_case.hpp) and of the
// RoPE scaling rule they hold (rope_scaling_to_json, rope_scaling_from_json:
// golden/cases/rope_case.hpp). A translation unit of its own, without the oracle or the kernels.
// The layer form verify checks plan.json against is read from plan_type_to_json's output by
// golden/verify/plan_verify.cpp (plan_layer_form), which needs none of these types.
#include <cmath>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <type_traits>
#include <vector>

#include "golden/cases/model_plan.hpp"
#include "golden/cases/scaling_json.hpp"
#include "reference/common/errors.hpp"

namespace posenc::golden {

using reference::LongRopePolicy;
using reference::QueryTemperatureRule;
using reference::RopeScaling;
using reference::RopeScalingType;
using reference::YarnForm;
using Json = nlohmann::json;

// ---- the scaling rule in the manifest ---------------------------------------------------------

Json rope_scaling_to_json(const RopeScaling& s) {
  Json j;
  j["type"] = reference::rope_scaling_type_name(s.type);
  if (s.type == RopeScalingType::kNone) return j;
  j["factor"] = s.factor;
  switch (s.type) {
    case RopeScalingType::kDynamic:
      j["max_position_embeddings"] = s.max_position;
      break;
    case RopeScalingType::kYarn:
      j["original_max_position_embeddings"] = s.original_max_position;
      j["max_position_embeddings"] = s.max_position;
      j["form"] = reference::yarn_form_name(s.yarn_form);
      j["beta_fast"] = s.beta_fast;
      j["beta_slow"] = s.beta_slow;
      j["attention_factor"] = s.attention_factor;
      j["mscale"] = s.mscale;
      j["mscale_all_dim"] = s.mscale_all_dim;
      j["truncate"] = s.truncate;
      j["mla"] = s.mla;
      break;
    case RopeScalingType::kLlama3:
      j["original_max_position_embeddings"] = s.original_max_position;
      j["low_freq_factor"] = s.low_freq_factor;
      j["high_freq_factor"] = s.high_freq_factor;
      break;
    case RopeScalingType::kLongRope:
      j["original_max_position_embeddings"] = s.original_max_position;
      j["max_position_embeddings"] = s.max_position;
      j["attention_factor"] = s.attention_factor;
      j["short_factor"] = s.short_factor;
      j["long_factor"] = s.long_factor;
      j["switch"] = reference::longrope_policy_name(s.longrope_policy);
      break;
    default:
      break;
  }
  return j;
}

RopeScaling rope_scaling_from_json(const Json& j) {
  auto bad = [](const std::string& what) -> void {
    throw GoldenFileError("manifest params.scaling: " + what);
  };
  RopeScaling s;
  if (!j.is_object() || !j.contains("type") || !j.at("type").is_string())
    bad("needs a string \"type\"");
  const std::string type = j.at("type").get<std::string>();
  bool found = false;
  for (auto t : {RopeScalingType::kNone, RopeScalingType::kLinear, RopeScalingType::kNtk,
                 RopeScalingType::kDynamic, RopeScalingType::kYarn, RopeScalingType::kLlama3,
                 RopeScalingType::kLongRope}) {
    if (type == reference::rope_scaling_type_name(t)) {
      s.type = t;
      found = true;
    }
  }
  if (!found) bad("unknown type \"" + type + "\"");
  if (s.type == RopeScalingType::kNone) return s;
  auto num = [&](const char* k) {
    if (!j.contains(k) || !j.at(k).is_number()) bad("needs a number \"" + std::string(k) + "\"");
    return j.at(k).get<double>();
  };
  auto integer = [&](const char* k) {
    const double v = num(k);  // in int64's range, so the cast is defined
    if (!(std::fabs(v) < 9.2e18)) bad("\"" + std::string(k) + "\" is out of range");
    return static_cast<std::int64_t>(v);
  };
  auto list = [&](const char* k) {
    if (!j.contains(k) || !j.at(k).is_array()) bad("needs a list \"" + std::string(k) + "\"");
    return j.at(k).get<std::vector<double>>();
  };
  s.factor = num("factor");
  switch (s.type) {
    case RopeScalingType::kDynamic:
      s.max_position = integer("max_position_embeddings");
      break;
    case RopeScalingType::kYarn: {
      s.original_max_position = integer("original_max_position_embeddings");
      s.max_position = integer("max_position_embeddings");
      const std::string form = j.value("form", std::string());
      found = false;
      for (auto f : {YarnForm::kPaper, YarnForm::kHfEarly, YarnForm::kHfCurrent,
                     YarnForm::kDeepSeekOfficial}) {
        if (form == reference::yarn_form_name(f)) {
          s.yarn_form = f;
          found = true;
        }
      }
      if (!found) bad("unknown yarn form \"" + form + "\"");
      s.beta_fast = num("beta_fast");
      s.beta_slow = num("beta_slow");
      s.attention_factor = num("attention_factor");
      s.mscale = num("mscale");
      s.mscale_all_dim = num("mscale_all_dim");
      if (!j.contains("truncate") || !j.at("truncate").is_boolean())
        bad("needs a boolean \"truncate\"");
      s.truncate = j.at("truncate").get<bool>();
      s.mla = j.value("mla", false);
      break;
    }
    case RopeScalingType::kLlama3:
      s.original_max_position = integer("original_max_position_embeddings");
      s.low_freq_factor = num("low_freq_factor");
      s.high_freq_factor = num("high_freq_factor");
      break;
    case RopeScalingType::kLongRope: {
      s.original_max_position = integer("original_max_position_embeddings");
      s.max_position = integer("max_position_embeddings");
      s.attention_factor = num("attention_factor");
      s.short_factor = list("short_factor");
      s.long_factor = list("long_factor");
      const std::string sw = j.value("switch", std::string());
      found = false;
      for (auto p : {LongRopePolicy::kHfSeqLen, LongRopePolicy::kVllmAnyAbove,
                     LongRopePolicy::kVllmMaxModelLen}) {
        if (sw == reference::longrope_policy_name(p)) {
          s.longrope_policy = p;
          found = true;
        }
      }
      if (!found) bad("unknown longrope switch \"" + sw + "\"");
      break;
    }
    default:
      break;
  }
  return s;
}

Json plan_qk_norm_json(const reference::QkNorm& n) {
  if (n.kind == reference::QkNormKind::kNone) return nullptr;
  Json j = {{"kind", reference::qk_norm_kind_name(n.kind)},
            {"position", reference::qk_norm_position_name(n.position)},
            {"eps", n.eps}};
  if (n.has_weights()) j["weight_offset"] = n.weight_offset;
  return j;
}

Json plan_type_to_json(const PlanLayerType& t) {
  Json j = {{"name", t.name}, {"rope", plan_rope_name(t.rope)}, {"head_dim", t.params.head_dim}};
  if (t.rope != PlanRope::kNone) {
    j["rotary_dim"] = t.params.rotary_dim;
    j["base"] = t.params.base;
    j["layout"] = reference::rope_layout_name(t.params.layout);
  }
  if (t.rope == PlanRope::kRope) j["scaling"] = rope_scaling_to_json(t.scaling);
  if (t.rope == PlanRope::kProportional) {
    j["proportional"] = {{"partial_rotary_factor", t.proportional.proportion},
                         {"factor", t.proportional.factor}};
  }
  if (t.mla_rope_dim > 0) j["mla_rope_dim"] = t.mla_rope_dim;
  j["mask"] = plan_mask_name(t.mask);
  if (t.mask == PlanMask::kSliding) j["window"] = t.window;
  if (t.mask == PlanMask::kChunked) j["chunk"] = t.chunk;
  j["temperature"] = nullptr;
  if (t.has_temperature) {
    j["temperature"] = {{"rule", reference::query_temperature_rule_name(t.temperature.rule)},
                        {"length", t.temperature.length},
                        {"coefficient", t.temperature.coefficient}};
  }
  j["sinks"] = t.sinks;
  j["qk_norm"] = plan_qk_norm_json(t.qk_norm);
  if (t.v_norm) j["v_norm"] = true;
  j["query_pre_attn_scalar"] = t.query_pre_attn_scalar;
  j["logit_softcap"] = t.logit_softcap;
  return j;
}

namespace {

[[noreturn]] void bad_type(const std::string& source, const std::string& key,
                           const std::string& what) {
  throw GoldenFileError(source + ": " + key + ": " + what);
}

const Json& type_key(const Json& j, const char* key, const std::string& source) {
  if (!j.contains(key)) bad_type(source, std::string("type.") + key, "missing");
  return j.at(key);
}

template <class T>
T type_value(const Json& j, const char* key, const std::string& source) {
  const Json& v = type_key(j, key, source);
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    // an integer in T's range (nlohmann's get<T> would cast a huge or fractional number)
    const bool ok =
        (v.is_number_integer() && !v.is_number_unsigned() &&
         v.get<std::int64_t>() >= std::numeric_limits<T>::min() &&
         v.get<std::int64_t>() <= std::numeric_limits<T>::max()) ||
        (v.is_number_unsigned() &&
         v.get<std::uint64_t>() <= static_cast<std::uint64_t>(std::numeric_limits<T>::max()));
    if (!ok)
      bad_type(source, std::string("type.") + key, "expected an integer (got " + v.dump() + ")");
    return static_cast<T>(v.is_number_unsigned() ? static_cast<std::int64_t>(v.get<std::uint64_t>())
                                                 : v.get<std::int64_t>());
  } else {
    try {
      return v.get<T>();
    } catch (const nlohmann::json::exception&) {
      bad_type(source, std::string("type.") + key, "wrong type (got " + v.dump() + ")");
    }
  }
}

}  // namespace

PlanLayerType plan_type_from_json(const Json& j, const std::string& source) {
  if (!j.is_object()) bad_type(source, "type", "expected an object");
  PlanLayerType t;
  t.name = type_value<std::string>(j, "name", source);
  const std::string rope = type_value<std::string>(j, "rope", source);
  t.rope = rope == "rope"           ? PlanRope::kRope
           : rope == "proportional" ? PlanRope::kProportional
                                    : PlanRope::kNone;
  if (rope != "rope" && rope != "proportional" && rope != "none")
    bad_type(source, "type.rope", "expected rope, proportional or none (got " + rope + ")");
  t.params.head_dim = type_value<int>(j, "head_dim", source);
  t.params.rotary_dim = t.params.head_dim;
  if (t.rope != PlanRope::kNone) {
    t.params.rotary_dim = type_value<int>(j, "rotary_dim", source);
    t.params.base = type_value<double>(j, "base", source);
    t.params.layout = type_value<std::string>(j, "layout", source) == "interleaved"
                          ? reference::RopeLayout::kInterleaved
                          : reference::RopeLayout::kHalfSplit;
  }
  if (t.rope == PlanRope::kRope) {
    try {
      t.scaling = rope_scaling_from_json(type_key(j, "scaling", source));
    } catch (const GoldenFileError& e) {
      bad_type(source, "type.scaling", e.what());
    }
  }
  if (t.rope == PlanRope::kProportional) {
    const Json& p = type_key(j, "proportional", source);
    t.proportional.proportion = type_value<double>(p, "partial_rotary_factor", source);
    t.proportional.factor = type_value<double>(p, "factor", source);
  }
  if (j.contains("mla_rope_dim")) t.mla_rope_dim = type_value<int>(j, "mla_rope_dim", source);
  const std::string mask = type_value<std::string>(j, "mask", source);
  t.mask = mask == "sliding"   ? PlanMask::kSliding
           : mask == "chunked" ? PlanMask::kChunked
                               : PlanMask::kCausal;
  if (mask != "sliding" && mask != "chunked" && mask != "causal")
    bad_type(source, "type.mask", "expected causal, sliding or chunked (got " + mask + ")");
  if (t.mask == PlanMask::kSliding) t.window = type_value<std::int64_t>(j, "window", source);
  if (t.mask == PlanMask::kChunked) t.chunk = type_value<std::int64_t>(j, "chunk", source);
  const Json& temp = type_key(j, "temperature", source);
  if (!temp.is_null()) {
    t.has_temperature = true;
    const std::string rule = type_value<std::string>(temp, "rule", source);
    if (rule != "llama4" && rule != "mistral")
      bad_type(source, "type.temperature.rule", "expected llama4 or mistral (got " + rule + ")");
    t.temperature.rule =
        rule == "llama4" ? QueryTemperatureRule::kLlama4 : QueryTemperatureRule::kMistral;
    t.temperature.length = type_value<std::int64_t>(temp, "length", source);
    t.temperature.coefficient = type_value<double>(temp, "coefficient", source);
  }
  t.sinks = type_value<bool>(j, "sinks", source);
  const Json& qn = type_key(j, "qk_norm", source);
  if (!qn.is_null()) {
    using reference::QkNormKind;
    const std::string kind = type_value<std::string>(qn, "kind", source);
    if (kind != "rms" && kind != "rms_unit" && kind != "l2")
      bad_type(source, "type.qk_norm.kind", "expected rms, rms_unit or l2 (got " + kind + ")");
    t.qk_norm.kind = kind == "rms"  ? QkNormKind::kRms
                     : kind == "l2" ? QkNormKind::kL2
                                    : QkNormKind::kRmsUnit;
    const std::string where = type_value<std::string>(qn, "position", source);
    if (where != "before_rope" && where != "after_rope") {
      bad_type(source, "type.qk_norm.position",
               "expected before_rope or after_rope (got " + where + ")");
    }
    t.qk_norm.position = where == "before_rope" ? reference::QkNormPosition::kBeforeRope
                                                : reference::QkNormPosition::kAfterRope;
    t.qk_norm.eps = type_value<double>(qn, "eps", source);
    if (t.qk_norm.has_weights())
      t.qk_norm.weight_offset = type_value<double>(qn, "weight_offset", source);
  }
  if (j.contains("v_norm")) t.v_norm = type_value<bool>(j, "v_norm", source);
  t.query_pre_attn_scalar = type_value<double>(j, "query_pre_attn_scalar", source);
  t.logit_softcap = type_value<double>(j, "logit_softcap", source);
  return t;
}

}  // namespace posenc::golden
