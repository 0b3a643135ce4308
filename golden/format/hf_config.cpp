#include "golden/format/hf_config.hpp"

#include <cmath>
#include <set>

#include "golden/format/format.hpp"
#include "golden/format/limits.hpp"
#include "reference/common/errors.hpp"
#include "tools/mutants/mutant.hpp"

namespace posenc::golden {

namespace fs = std::filesystem;
using Json = nlohmann::json;
using reference::RopeLayout;
using reference::RopeScalingType;

namespace {

[[noreturn]] void bad(const std::string& source, const std::string& what) {
  throw GoldenFileError(source + ": " + what);
}

/// The first of the keys present with a non-null value, or nullptr.
const Json* first_of(const Json& j, std::initializer_list<const char*> keys, std::string* which) {
  for (const char* k : keys) {
    if (j.contains(k) && !j.at(k).is_null()) {
      if (which) *which = k;
      return &j.at(k);
    }
  }
  return nullptr;
}

double number(const Json& v, const std::string& source, const std::string& key) {
  if (!v.is_number()) bad(source, "\"" + key + "\" must be a number (got " + v.dump() + ")");
  const double d = v.get<double>();
  if (!std::isfinite(d)) bad(source, "\"" + key + "\" must be finite");
  return d;
}

std::int64_t integer(const Json& v, const std::string& source, const std::string& key) {
  const double d = number(v, source, key);
  if (d != std::floor(d)) bad(source, "\"" + key + "\" must be an integer (got " + v.dump() + ")");
  return static_cast<std::int64_t>(d);
}

std::vector<double> number_list(const Json& v, const std::string& source, const std::string& key) {
  if (!v.is_array()) bad(source, "\"" + key + "\" must be a list of numbers");
  std::vector<double> out;
  for (const auto& x : v) out.push_back(number(x, source, key));
  return out;
}

}  // namespace

fs::path default_presets_dir() {
#ifdef POSENC_SOURCE_DIR
  return fs::path(POSENC_SOURCE_DIR) / "golden" / "presets";
#else
  return fs::path("golden") / "presets";
#endif
}

RopeModelConfig rope_config_from_json(const Json& j, const std::string& source) {
  if (!j.is_object()) bad(source, "a config must be a JSON object");
  RopeModelConfig c;
  c.config = j;
  c.config.erase("_posenc");
  std::string which;
  const Json pos = j.value("_posenc", Json::object());
  c.id = pos.value("id", j.value("_name_or_path", std::string()));
  if (c.id.empty()) c.id = fs::path(source).stem().string();
  c.hf_model = pos.value("hf_model", j.value("_name_or_path", std::string()));
  c.source = pos.value("source", "config file " + source);
  c.note = pos.value("note", std::string());
  c.model_type = j.value("model_type", std::string());

  // heads and the head dimension
  const Json* heads = first_of(j, {"num_attention_heads", "n_head", "n_heads"}, &which);
  if (!heads) bad(source, "missing \"num_attention_heads\" (or n_head)");
  c.n_heads = static_cast<int>(integer(*heads, source, which));
  if (c.n_heads <= 0) bad(source, "\"" + which + "\" must be positive");
  c.n_kv_heads = c.n_heads;
  if (const Json* kv = first_of(j, {"num_key_value_heads"}, &which)) {
    c.n_kv_heads = static_cast<int>(integer(*kv, source, which));
    if (c.n_kv_heads <= 0 || c.n_heads % c.n_kv_heads != 0) {
      bad(source, "\"num_key_value_heads\" " + std::to_string(c.n_kv_heads) +
                      " must divide num_attention_heads " + std::to_string(c.n_heads));
    }
  }
  int head_dim = 0;
  if (const Json* rh = first_of(j, {"qk_rope_head_dim"}, &which)) {
    head_dim = static_cast<int>(integer(*rh, source, which));
    c.notes.push_back("DeepSeek MLA: RoPE rotates only the qk_rope_head_dim = " +
                      std::to_string(head_dim) + " sub-head; the case holds that part");
  } else if (const Json* hd = first_of(j, {"head_dim"}, &which)) {
    head_dim = static_cast<int>(integer(*hd, source, which));
  } else {
    const Json* hidden = first_of(j, {"hidden_size", "n_embd", "d_model"}, &which);
    if (!hidden) bad(source, "missing \"head_dim\" and \"hidden_size\" (or n_embd): cannot size a head");
    const std::int64_t h = integer(*hidden, source, which);
    if (h % c.n_heads != 0) {
      bad(source, "\"" + which + "\" " + std::to_string(h) + " is not a multiple of the " +
                      std::to_string(c.n_heads) + " heads");
    }
    head_dim = static_cast<int>(h / c.n_heads);
  }
  if (head_dim <= 0) bad(source, "the head dimension must be positive (got " + std::to_string(head_dim) + ")");
  c.softmax_head_dim = head_dim;
  if (const Json* nope = first_of(j, {"qk_nope_head_dim"}, &which)) {
    c.softmax_head_dim = head_dim + static_cast<int>(integer(*nope, source, which));
  }

  // rope_scaling / rope_parameters (v5)
  const Json* rs = first_of(j, {"rope_scaling", "rope_parameters"}, &which);
  const std::string rs_key = which;
  Json scaling = rs ? *rs : Json(nullptr);
  if (!scaling.is_null() && !scaling.is_object()) bad(source, "\"" + rs_key + "\" must be an object or null");

  // rotary dimension
  int rotary = head_dim;
  auto partial = [&](const Json& f, const std::string& key) {
    const double x = number(f, source, key);
    if (!(x > 0.0) || x > 1.0) bad(source, "\"" + key + "\" must be in (0, 1] (got " + f.dump() + ")");
    return static_cast<int>(head_dim * x);  // Python int() of the product, as HF
  };
  if (const Json* rd = first_of(j, {"rotary_dim"}, &which)) {
    rotary = static_cast<int>(integer(*rd, source, which));
  } else if (const Json* rp = first_of(j, {"rotary_pct", "partial_rotary_factor"}, &which)) {
    if (!POSENC_MUTANT("format_config_partial_rotary_ignored")) rotary = partial(*rp, which);
  } else if (!scaling.is_null() && scaling.contains("partial_rotary_factor")) {
    rotary = partial(scaling.at("partial_rotary_factor"), rs_key + ".partial_rotary_factor");
  }
  if (rotary <= 0 || rotary % 2 != 0 || rotary > head_dim) {
    bad(source, "the rotary dimension " + std::to_string(rotary) + " must be even and in (0, head_dim " +
                    std::to_string(head_dim) + "]");
  }
  c.params.head_dim = head_dim;
  c.params.rotary_dim = rotary;

  // base
  if (const Json* b = first_of(j, {"rope_theta", "rotary_emb_base"}, &which)) {
    c.params.base = number(*b, source, which);
  } else if (!scaling.is_null() && scaling.contains("rope_theta")) {
    c.params.base = number(scaling.at("rope_theta"), source, rs_key + ".rope_theta");
  } else {
    c.params.base = 10000.0;
    c.notes.push_back(c.model_type == "gptj" ? "base 10000: HF's GPT-J hard-codes it"
                                             : "rope_theta absent: 10000, the HF default");
  }
  if (!(c.params.base > 1.0)) bad(source, "rope_theta must be > 1 (got " + std::to_string(c.params.base) + ")");

  // layout
  const std::string override_layout = pos.value("layout", std::string());
  if (!override_layout.empty()) {
    if (override_layout != "interleaved" && override_layout != "half_split") {
      bad(source, "\"_posenc.layout\" must be interleaved or half_split");
    }
    c.params.layout = override_layout == "interleaved" ? RopeLayout::kInterleaved : RopeLayout::kHalfSplit;
    c.layout_reason = "_posenc.layout: " + c.note;
  } else if (c.model_type == "gptj") {
    c.params.layout = RopeLayout::kInterleaved;
    c.layout_reason = "model_type gptj: rotate_every_two (interleaved pairs)";
  } else if (c.model_type == "deepseek_v2" || c.model_type == "deepseek_v3") {
    c.params.layout = RopeLayout::kInterleaved;
    c.layout_reason = "model_type " + c.model_type + ": interleaved pairs (2i, 2i+1); HF's DeepSeek "
                      "code stores the rotated pairs de-interleaved, [x0, x2, ..., x1, x3, ...]: "
                      "permute back before comparing";
  } else {
    c.params.layout = RopeLayout::kHalfSplit;
    c.layout_reason = c.model_type.empty() ? "no model_type: HF's default rotate_half (half-split)"
                                           : "model_type " + c.model_type + ": rotate_half (half-split)";
  }

  // lengths
  if (const Json* l = first_of(j, {"max_position_embeddings", "n_positions", "max_sequence_length"}, &which)) {
    c.max_position = integer(*l, source, which);
  }
  std::int64_t top_l0 = 0;
  if (const Json* l0 = first_of(j, {"original_max_position_embeddings"}, &which)) {
    top_l0 = integer(*l0, source, which);
  }

  // the scaling rule
  auto& s = c.scaling;
  s.max_position = c.max_position;
  if (scaling.is_null()) return c;
  std::string type;
  if (scaling.contains("rope_type")) {
    type = scaling.at("rope_type").is_string() ? scaling.at("rope_type").get<std::string>() : "";
  } else if (scaling.contains("type")) {
    type = scaling.at("type").is_string() ? scaling.at("type").get<std::string>() : "";
  } else {
    bad(source, "\"" + rs_key + "\" has neither \"rope_type\" nor \"type\"");
  }
  std::set<std::string> known = {"rope_type", "type", "rope_theta", "partial_rotary_factor"};
  auto need = [&](const char* key) -> const Json& {
    if (!scaling.contains(key) || scaling.at(key).is_null()) {
      bad(source, "\"" + rs_key + "\" of type " + type + " needs \"" + key + "\"");
    }
    return scaling.at(key);
  };
  auto opt_number = [&](const char* key, double dflt) {
    if (!scaling.contains(key) || scaling.at(key).is_null()) return dflt;
    return number(scaling.at(key), source, rs_key + "." + key);
  };
  auto factor = [&] {
    const double f = number(need("factor"), source, rs_key + ".factor");
    if (!(f > 0.0)) bad(source, "\"" + rs_key + ".factor\" must be > 0 (got " + scaling.at("factor").dump() + ")");
    if (f < 1.0) c.notes.push_back("factor < 1 (HF only warns): computed as given");
    return f;
  };
  auto l0 = [&] {
    if (scaling.contains("original_max_position_embeddings") && !scaling.at("original_max_position_embeddings").is_null()) {
      return integer(scaling.at("original_max_position_embeddings"), source, rs_key + ".original_max_position_embeddings");
    }
    if (top_l0 > 0) return top_l0;
    return std::int64_t{0};
  };
  if (type == "default") {
    // no scaling
  } else if (type == "linear") {
    known.insert("factor");
    s.type = RopeScalingType::kLinear;
    s.factor = factor();
  } else if (type == "dynamic") {
    known.insert({"factor", "original_max_position_embeddings"});
    s.type = RopeScalingType::kDynamic;
    s.factor = factor();
    if (c.max_position <= 0) bad(source, "dynamic scaling needs \"max_position_embeddings\"");
    if (scaling.contains("original_max_position_embeddings")) {
      c.notes.push_back(rs_key + ".original_max_position_embeddings is ignored by HF's dynamic rule, "
                                 "which uses max_position_embeddings");
    }
  } else if (type == "ntk") {
    known.insert("factor");
    s.type = RopeScalingType::kNtk;
    s.factor = factor();
  } else if (type == "yarn") {
    known.insert({"factor", "original_max_position_embeddings", "attention_factor", "beta_fast",
                  "beta_slow", "mscale", "mscale_all_dim", "truncate", "finetuned"});
    s.type = RopeScalingType::kYarn;
    s.factor = factor();
    s.original_max_position = l0();
    if (s.original_max_position <= 0) {
      s.original_max_position = c.max_position;
      c.notes.push_back("yarn without original_max_position_embeddings: L0 = max_position_embeddings (HF v5)");
    }
    if (s.original_max_position <= 0) bad(source, "yarn needs original_max_position_embeddings or max_position_embeddings");
    s.beta_fast = opt_number("beta_fast", 32.0);
    s.beta_slow = opt_number("beta_slow", 1.0);
    s.attention_factor = opt_number("attention_factor", 0.0);
    s.mscale = opt_number("mscale", 0.0);
    s.mscale_all_dim = opt_number("mscale_all_dim", 0.0);
    if (scaling.contains("truncate")) {
      if (!scaling.at("truncate").is_boolean()) bad(source, "\"" + rs_key + ".truncate\" must be true or false");
      s.truncate = scaling.at("truncate").get<bool>();
    }
    s.mla = c.model_type == "deepseek_v2" || c.model_type == "deepseek_v3";
    s.yarn_form = reference::YarnForm::kHfCurrent;
  } else if (type == "llama3") {
    known.insert({"factor", "original_max_position_embeddings", "low_freq_factor", "high_freq_factor"});
    s.type = RopeScalingType::kLlama3;
    s.factor = factor();
    s.original_max_position = integer(need("original_max_position_embeddings"), source,
                                      rs_key + ".original_max_position_embeddings");
    s.low_freq_factor = number(need("low_freq_factor"), source, rs_key + ".low_freq_factor");
    s.high_freq_factor = number(need("high_freq_factor"), source, rs_key + ".high_freq_factor");
    if (s.high_freq_factor < s.low_freq_factor) {
      bad(source, "\"" + rs_key + ".high_freq_factor\" must be >= low_freq_factor");
    }
  } else if (type == "longrope" || type == "su") {
    known.insert({"factor", "original_max_position_embeddings", "short_factor", "long_factor",
                  "attention_factor", "short_mscale", "long_mscale"});
    s.type = RopeScalingType::kLongRope;
    s.short_factor = number_list(need("short_factor"), source, rs_key + ".short_factor");
    s.long_factor = number_list(need("long_factor"), source, rs_key + ".long_factor");
    s.original_max_position = l0();
    if (s.original_max_position <= 1) bad(source, "longrope needs original_max_position_embeddings");
    if (scaling.contains("factor") && !scaling.at("factor").is_null()) {
      s.factor = factor();
    } else {
      if (c.max_position <= 0) bad(source, "longrope without factor needs max_position_embeddings");
      s.factor = static_cast<double>(c.max_position) / static_cast<double>(s.original_max_position);
      c.notes.push_back("longrope factor = max_position_embeddings / original = " + std::to_string(s.factor) +
                        " (the config has none)");
    }
    s.attention_factor = opt_number("attention_factor", 0.0);
    if (type == "su") c.notes.push_back("legacy type \"su\": the longrope rule");
  } else {
    bad(source, "\"" + rs_key + "\" has unknown type \"" + type +
                    "\" (known: default, linear, dynamic, ntk, yarn, llama3, longrope, su)");
  }
  for (const auto& [k, v] : scaling.items()) {
    if (!known.count(k) && !POSENC_MUTANT("format_config_unknown_key_accepted")) {
      bad(source, "\"" + rs_key + "\" of type " + type + " has unknown key \"" + k + "\"");
    }
  }
  try {
    reference::rope_scaling_check(c.params, s, "rope_config");
  } catch (const InvalidArgument& e) {
    bad(source, std::string("inconsistent rope parameters: ") + e.what());
  }
  return c;
}

RopeModelConfig rope_config_read(const fs::path& path) {
  return rope_config_from_json(read_json_file(path), path.string());
}

Json rope_config_to_json(const RopeModelConfig& m) {
  using reference::RopeScaling;
  Json j;
  Json pos = {{"id", m.id}, {"hf_model", m.hf_model}, {"source", m.source},
              {"layout", reference::rope_layout_name(m.params.layout)}};
  if (!m.note.empty()) pos["note"] = m.note;
  j["_posenc"] = pos;
  if (!m.model_type.empty()) j["model_type"] = m.model_type;
  j["num_attention_heads"] = m.n_heads;
  j["num_key_value_heads"] = m.n_kv_heads;
  if (m.softmax_head_dim != m.params.head_dim) {  // MLA: the rotated sub-head and the rest
    j["qk_rope_head_dim"] = m.params.head_dim;
    j["qk_nope_head_dim"] = m.softmax_head_dim - m.params.head_dim;
  } else {
    j["head_dim"] = m.params.head_dim;
  }
  if (m.params.rotary_dim != m.params.head_dim) j["rotary_dim"] = m.params.rotary_dim;
  if (m.max_position > 0) j["max_position_embeddings"] = m.max_position;
  const RopeScaling& s = m.scaling;
  Json r = {{"rope_theta", m.params.base}, {"rope_type", reference::rope_scaling_type_name(s.type)}};
  switch (s.type) {
    case RopeScalingType::kNone:
      break;
    case RopeScalingType::kLinear:
    case RopeScalingType::kNtk:
    case RopeScalingType::kDynamic:
      r["factor"] = s.factor;
      break;
    case RopeScalingType::kYarn:
      r["factor"] = s.factor;
      r["original_max_position_embeddings"] = s.original_max_position;
      r["beta_fast"] = s.beta_fast;
      r["beta_slow"] = s.beta_slow;
      if (s.attention_factor > 0) r["attention_factor"] = s.attention_factor;
      if (s.mscale != 0) r["mscale"] = s.mscale;
      if (s.mscale_all_dim != 0) r["mscale_all_dim"] = s.mscale_all_dim;
      r["truncate"] = s.truncate;
      break;
    case RopeScalingType::kLlama3:
      r["factor"] = s.factor;
      r["original_max_position_embeddings"] = s.original_max_position;
      r["low_freq_factor"] = s.low_freq_factor;
      r["high_freq_factor"] = s.high_freq_factor;
      break;
    case RopeScalingType::kLongRope:
      r["factor"] = s.factor;
      r["original_max_position_embeddings"] = s.original_max_position;
      r["short_factor"] = s.short_factor;
      r["long_factor"] = s.long_factor;
      if (s.attention_factor > 0) r["attention_factor"] = s.attention_factor;
      break;
  }
  j["rope_parameters"] = r;
  return j;
}

}  // namespace posenc::golden
