#include "golden/cases/hf_config.hpp"

#include "golden/cases/config_read.hpp"

#include <cmath>
#include <map>
#include <set>
#include <span>

#include "golden/format/format.hpp"
#include "golden/format/limits.hpp"
#include "optimized/rope.hpp"
#include "reference/common/errors.hpp"
#include "reference/common/mutant.hpp"

namespace posenc::golden {

namespace fs = std::filesystem;
using Json = nlohmann::json;
using reference::RopeLayout;
using reference::RopeScalingType;

using namespace config_read;  // NOLINT: the checked reads shared with model_plan.cpp

namespace {

// ---- the text of every number, as the file writes it ------------------------------------------


/// A SAX handler: nlohmann's own DOM builder, plus the text of every float by its key path.
class RawSax : public nlohmann::json_sax<Json> {
 public:
  RawSax(Json& out, RawNumbers& raw) : dom_(out, true), raw_(raw) {}
  bool null() override { return value(), dom_.null(); }
  bool boolean(bool v) override { return value(), dom_.boolean(v); }
  bool number_integer(number_integer_t v) override { return value(), dom_.number_integer(v); }
  bool number_unsigned(number_unsigned_t v) override { return value(), dom_.number_unsigned(v); }
  bool number_float(number_float_t v, const string_t& text) override {
    value();
    if (raw_.size() < kMaxRaw && quotable()) raw_[path()] = text.substr(0, 64);
    return dom_.number_float(v, text);
  }
  bool string(string_t& v) override { return value(), dom_.string(v); }
  bool binary(binary_t& v) override { return value(), dom_.binary(v); }
  bool start_object(std::size_t n) override {
    value();
    frames_.push_back({false, 0, {}});
    return dom_.start_object(n);
  }
  bool key(string_t& k) override {
    frames_.back().key = k;
    return dom_.key(k);
  }
  bool end_object() override {
    frames_.pop_back();
    return dom_.end_object();
  }
  bool start_array(std::size_t n) override {
    value();
    frames_.push_back({true, 0, {}});
    return dom_.start_array(n);
  }
  bool end_array() override {
    frames_.pop_back();
    return dom_.end_array();
  }
  bool parse_error(std::size_t at, const std::string& token, const nlohmann::detail::exception& e) override {
    return dom_.parse_error(at, token, e);  // throws it
  }

 private:
  static constexpr std::size_t kMaxRaw = 1u << 16;  // a config has a few hundred numbers
  struct Frame {
    bool array;
    std::size_t index;  // array: values seen so far
    std::string key;    // object: the current key
  };
  /// Only the keys a message can name (at most four levels:
  /// "text_config.rope_parameters.full_attention.factor", short keys), so a hostile document cannot make each float copy a long path.
  bool quotable() const {
    if (frames_.size() > 4) return false;
    for (const Frame& f : frames_) {
      if (f.key.size() > 64) return false;
    }
    return true;
  }
  void value() {
    if (!frames_.empty() && frames_.back().array) ++frames_.back().index;
  }
  std::string path() const {
    std::string p;
    for (const Frame& f : frames_) {
      if (f.array) {
        p += "[" + std::to_string(f.index - 1) + "]";
      } else {
        if (!p.empty()) p += ".";
        p += f.key;
      }
    }
    return p;
  }
  nlohmann::detail::json_sax_dom_parser<Json> dom_;
  RawNumbers& raw_;
  std::vector<Frame> frames_;
};

/// ids and strings: _posenc, model_type, _name_or_path.
void read_identity(const Ctx& x, const Json& j, RopeModelConfig& c, Json& pos) {
  if (j.contains("_posenc") && !j.at("_posenc").is_null()) {
    pos = j.at("_posenc");
    if (!pos.is_object()) x.range(pos, "_posenc", "an object");
  }
  c.name_or_path = x.text(j, "_name_or_path", "_name_or_path");
  c.model_type = x.text(j, "model_type", "model_type");
  c.id = x.text(pos, "id", "_posenc.id");
  if (c.id.empty()) c.id = c.name_or_path;
  if (c.id.empty()) c.id = fs::path(x.source).stem().string();
  c.hf_model = x.text(pos, "hf_model", "_posenc.hf_model");
  if (c.hf_model.empty()) c.hf_model = c.name_or_path;
  c.source = x.text(pos, "source", "_posenc.source");
  if (c.source.empty()) c.source = "config file " + x.source;
  c.note = x.text(pos, "note", "_posenc.note");
}

/// Heads, the head dimension (the rotated one for MLA) and the softmax's.
void read_heads(const Ctx& x, const Json& j, RopeModelConfig& c) {
  std::string which;
  const Json* heads = first_of(j, {"num_attention_heads", "n_head", "n_heads"}, &which);
  if (!heads) x.fail("missing \"num_attention_heads\" (or n_head)");
  c.n_heads = static_cast<int>(x.integer(*heads, which, kHeads));
  c.n_kv_heads = c.n_heads;
  if (const Json* kv = first_of(j, {"num_key_value_heads"}, &which)) {
    c.n_kv_heads = static_cast<int>(x.integer(*kv, which, kHeads));
    if (c.n_heads % c.n_kv_heads != 0) {
      x.range(*kv, which, "a divisor of num_attention_heads = " + std::to_string(c.n_heads));
    }
  }
  std::int64_t head_dim = 0;
  if (const Json* rh = first_of(j, {"qk_rope_head_dim"}, &which)) {
    head_dim = x.integer(*rh, which, kHeadDim);
    c.notes.push_back("DeepSeek MLA: RoPE rotates only the qk_rope_head_dim = " + std::to_string(head_dim) +
                      " sub-head; the case holds that part");
  } else if (const Json* hd = first_of(j, {"head_dim"}, &which)) {
    head_dim = x.integer(*hd, which, kHeadDim);
  } else {
    const Json* hidden = first_of(j, {"hidden_size", "n_embd", "d_model"}, &which);
    if (!hidden) x.fail("missing \"head_dim\" and \"hidden_size\" (or n_embd): cannot size a head");
    const std::int64_t h = x.integer(*hidden, which, kHidden);
    if (h % c.n_heads != 0) {
      x.range(*hidden, which, "a multiple of the " + std::to_string(c.n_heads) + " heads");
    }
    head_dim = h / c.n_heads;
    if (head_dim > kHeadDim.hi) {
      x.range(*hidden, which, "at most 16384 per head (" + std::to_string(c.n_heads) + " heads: head_dim " +
                                  std::to_string(head_dim) + ")");
    }
  }
  c.params.head_dim = static_cast<int>(head_dim);  // <= 16384
  c.softmax_head_dim = c.params.head_dim;
  if (const Json* nope = first_of(j, {"qk_nope_head_dim"}, &which)) {
    c.softmax_head_dim += static_cast<int>(x.integer(*nope, which, kNopeDim));
  }
}

/// The rotary dimension and the base (top level, else in the scaling block).
/// `block_first`: the block's rope_theta wins over the top level's (a per-layer-type block),
/// and `fallback_theta` > 0 stands in for an absent block rope_theta.
void read_rotary(const Ctx& x, const Json& j, const Json& scaling, const std::string& rs_key,
                 RopeModelConfig& c, bool block_first = false, double fallback_theta = 0) {
  std::string which;
  const int head_dim = c.params.head_dim;
  int rotary = head_dim;
  auto partial = [&](const Json& f, const std::string& key) {
    const double p = x.number(f, key, kPartial);
    return static_cast<int>(head_dim * p);  // Python int() of the product, as HF
  };
  if (const Json* rd = first_of(j, {"rotary_dim"}, &which)) {
    const std::string even = "an even integer in [2, head_dim = " + std::to_string(head_dim) + "]";
    rotary = static_cast<int>(x.integer(*rd, which, IntRange{2, head_dim, even.c_str()}));
    if (rotary % 2 != 0) x.range(*rd, which, even);
  } else if (const Json* rp = first_of(j, {"rotary_pct", "partial_rotary_factor"}, &which)) {
    if (!POSENC_MUTANT("format_config_partial_rotary_ignored")) rotary = partial(*rp, which);
  } else if (!scaling.is_null() && scaling.contains("partial_rotary_factor") &&
             !scaling.at("partial_rotary_factor").is_null()) {
    rotary = partial(scaling.at("partial_rotary_factor"), rs_key + ".partial_rotary_factor");
  }
  if (rotary <= 0 || rotary % 2 != 0 || rotary > head_dim) {
    x.fail("the rotary dimension " + std::to_string(rotary) + " must be even and in (0, head_dim " +
           std::to_string(head_dim) + "]");
  }
  c.params.rotary_dim = rotary;

  const bool block_theta = !scaling.is_null() && scaling.contains("rope_theta") && !scaling.at("rope_theta").is_null();
  const Json* top = first_of(j, {"rope_theta", "rotary_emb_base"}, &which);
  if (block_first && block_theta) {
    c.params.base = x.number(scaling.at("rope_theta"), rs_key + ".rope_theta", kBase);
  } else if (block_first && fallback_theta > 0) {
    c.params.base = fallback_theta;
  } else if (top) {
    c.params.base = x.number(*top, which, kBase);
  } else if (block_theta) {
    c.params.base = x.number(scaling.at("rope_theta"), rs_key + ".rope_theta", kBase);
  } else {
    c.params.base = 10000.0;
    c.notes.push_back(c.model_type == "gptj" ? "base 10000: HF's GPT-J hard-codes it"
                                             : "rope_theta absent: 10000, the HF default");
  }
}

void read_layout(const Ctx& x, const Json& pos, RopeModelConfig& c) {
  const std::string override_layout = x.text(pos, "layout", "_posenc.layout");
  if (!override_layout.empty()) {
    if (override_layout != "interleaved" && override_layout != "half_split") {
      x.range(pos.at("layout"), "_posenc.layout", "\"interleaved\" or \"half_split\"");
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
  } else if (c.model_type == "cohere" || c.model_type == "cohere2") {
    c.params.layout = RopeLayout::kInterleaved;
    c.layout_reason = "model_type " + c.model_type + ": interleaved pairs (HF's Cohere rotary embedding "
                      "repeat_interleaves the frequencies and rotates (2i, 2i+1))";
  } else if (c.model_type == "llama4" || c.model_type == "llama4_text") {
    c.params.layout = RopeLayout::kInterleaved;
    c.layout_reason = "model_type " + c.model_type + ": interleaved pairs (HF's Llama 4 rotates complex "
                      "numbers (x[2i], x[2i+1]))";
  } else {
    c.params.layout = RopeLayout::kHalfSplit;
    c.layout_reason = c.model_type.empty() ? "no model_type: HF's default rotate_half (half-split)"
                                           : "model_type " + c.model_type + ": rotate_half (half-split)";
  }
}

/// One scaling block: its keys, each read once and checked against its range.
struct Block {
  const Ctx& x;
  const Json& scaling;
  const std::string& rs_key;
  const std::string& type;
  std::set<std::string> known = {"rope_type", "type", "rope_theta", "partial_rotary_factor"};

  std::string path(const char* key) const { return rs_key + "." + key; }
  bool has(const char* key) const { return scaling.contains(key) && !scaling.at(key).is_null(); }
  const Json& need(const char* key) const {
    if (!has(key)) x.fail("\"" + x.full(rs_key) + "\" of type " + type + " needs \"" + key + "\"");
    return scaling.at(key);
  }
  double number(const char* key, const Range& r) const { return x.number(need(key), path(key), r); }
  /// A number when given; `absent` otherwise (never for a given value, however wrong).
  double optional(const char* key, const Range& r, double absent) const {
    return has(key) ? x.number(scaling.at(key), path(key), r) : absent;
  }
  std::int64_t integer(const char* key, const IntRange& r) const { return x.integer(need(key), path(key), r); }
  std::vector<double> list(const char* key, std::size_t n) const {
    const Json& v = need(key);
    if (!v.is_array()) x.range(v, path(key), "a list of " + std::to_string(n) + " numbers (rotary_dim / 2)");
    if (v.size() != n) {
      x.fail(x.full(path(key)) + " has " + std::to_string(v.size()) + " entries: must have rotary_dim / 2 = " +
             std::to_string(n));
    }
    std::vector<double> out;
    out.reserve(n);
    for (std::size_t i = 0; i < n; ++i) {
      out.push_back(x.number(v[i], path(key) + "[" + std::to_string(i) + "]", kFactor));
    }
    return out;
  }
  bool flag(const char* key, bool absent) const {
    if (!scaling.contains(key)) return absent;
    const Json& v = scaling.at(key);
    if (!v.is_boolean()) x.range(v, path(key), "true or false");
    return v.get<bool>();
  }
};

/// The rule of a scaling block of type `type` (`l` and `l_key`: max_position_embeddings and the
/// key it came from, null when absent; `top_l0`: a top-level original_max_position_embeddings).
void read_rule(Block& b, const std::string& type, RopeModelConfig& c, const Json* l, const std::string& l_key,
               std::int64_t top_l0) {
  const Ctx& x = b.x;
  auto& s = c.scaling;
  auto& known = b.known;
  auto factor = [&] {
    const double f = b.number("factor", kFactor);
    if (f < 1.0) c.notes.push_back("factor < 1 (HF only warns): computed as given");
    return f;
  };
  auto l0 = [&](const IntRange& r) -> std::int64_t {
    if (b.has("original_max_position_embeddings")) return b.integer("original_max_position_embeddings", r);
    return top_l0;
  };
  if (type == "default") {
    // no scaling
  } else if (type == "linear" || type == "ntk") {
    known.insert("factor");
    s.type = type == "linear" ? RopeScalingType::kLinear : RopeScalingType::kNtk;
    s.factor = factor();
  } else if (type == "dynamic") {
    known.insert({"factor", "original_max_position_embeddings"});
    s.type = RopeScalingType::kDynamic;
    s.factor = factor();
    if (!l) x.fail("dynamic scaling needs \"max_position_embeddings\"");
    x.integer(*l, l_key, kDynamicLength);
    if (b.has("original_max_position_embeddings")) {
      b.integer("original_max_position_embeddings", kLength);
      c.notes.push_back(b.path("original_max_position_embeddings") +
                        " is ignored by HF's dynamic rule, which uses max_position_embeddings");
    }
  } else if (type == "yarn") {
    known.insert({"factor", "original_max_position_embeddings", "attention_factor", "beta_fast", "beta_slow", "mscale",
                  "mscale_all_dim", "truncate", "finetuned"});
    s.type = RopeScalingType::kYarn;
    s.factor = factor();
    s.original_max_position = l0(kLength);
    if (s.original_max_position == 0) {
      if (c.max_position == 0) x.fail("yarn needs original_max_position_embeddings or max_position_embeddings");
      s.original_max_position = c.max_position;
      c.notes.push_back("yarn without original_max_position_embeddings: L0 = max_position_embeddings (HF v5)");
    }
    s.beta_fast = b.optional("beta_fast", kPositive, 32.0);
    s.beta_slow = b.optional("beta_slow", kPositive, 1.0);
    if (!(s.beta_fast > s.beta_slow)) {
      const Json fast = b.has("beta_fast") ? b.scaling.at("beta_fast") : Json(s.beta_fast);
      const Json slow = b.has("beta_slow") ? b.scaling.at("beta_slow") : Json(s.beta_slow);
      x.range(fast, b.path("beta_fast"), "> beta_slow = " + x.shown(slow, b.path("beta_slow")) +
                                             " (the ramp runs from beta_fast rotations down to beta_slow)");
    }
    s.attention_factor = b.optional("attention_factor", kAttention, 0.0);  // 0: derived
    s.mscale = b.optional("mscale", kMscale, 0.0);
    s.mscale_all_dim = b.optional("mscale_all_dim", kMscale, 0.0);
    s.truncate = b.flag("truncate", true);
    if (b.has("finetuned")) b.flag("finetuned", false);
    s.mla = c.model_type == "deepseek_v2" || c.model_type == "deepseek_v3";
    s.yarn_form = reference::YarnForm::kHfCurrent;
  } else if (type == "llama3") {
    known.insert({"factor", "original_max_position_embeddings", "low_freq_factor", "high_freq_factor"});
    s.type = RopeScalingType::kLlama3;
    s.factor = factor();
    s.original_max_position = b.integer("original_max_position_embeddings", kLength);
    s.low_freq_factor = b.number("low_freq_factor", kPositive);
    s.high_freq_factor = b.number("high_freq_factor", kPositive);
    if (!(s.high_freq_factor >= s.low_freq_factor)) {
      x.range(b.scaling.at("high_freq_factor"), b.path("high_freq_factor"),
              ">= low_freq_factor = " + x.shown(b.scaling.at("low_freq_factor"), b.path("low_freq_factor")) +
                  " (the bands run from the kept high frequencies down to the divided low ones)");
    }
    if (s.high_freq_factor == s.low_freq_factor) {  // Llama 4 Scout: HF only warns
      c.notes.push_back(b.path("high_freq_factor") + " = low_freq_factor: no smoothed band (each pair kept or "
                        "divided; HF only warns)");
    }
  } else if (type == "longrope" || type == "su") {
    known.insert({"factor", "original_max_position_embeddings", "short_factor", "long_factor", "attention_factor",
                  "short_mscale", "long_mscale"});
    s.type = RopeScalingType::kLongRope;
    const auto n = static_cast<std::size_t>(c.params.rotary_dim / 2);
    s.short_factor = b.list("short_factor", n);
    s.long_factor = b.list("long_factor", n);
    s.original_max_position = l0(kLongRopeL0);
    if (s.original_max_position < 2) x.fail("longrope needs original_max_position_embeddings");
    if (b.has("factor")) {
      s.factor = factor();
    } else {
      if (c.max_position == 0) x.fail("longrope without factor needs max_position_embeddings");
      s.factor = static_cast<double>(c.max_position) / static_cast<double>(s.original_max_position);
      if (s.factor < kFactor.lo || s.factor > kFactor.hi) {
        x.fail("the longrope factor max_position_embeddings / original_max_position_embeddings = " +
               std::to_string(c.max_position) + " / " + std::to_string(s.original_max_position) + " must be in " +
               "[0.001, 65536] (the config has no factor)");
      }
      c.notes.push_back("longrope factor = max_position_embeddings / original = " + std::to_string(s.factor) +
                        " (the config has none)");
    }
    s.attention_factor = b.optional("attention_factor", kAttention, 0.0);  // 0: derived
    b.optional("short_mscale", kAttention, 0.0);  // vLLM's; HF ignores them, as posenc does
    b.optional("long_mscale", kAttention, 0.0);
    if (type == "su") c.notes.push_back("legacy type \"su\": the longrope rule");
  } else {
    x.fail("\"" + x.full(b.rs_key) + "\" has unknown type \"" + type +
           "\" (known: default, linear, dynamic, ntk, yarn, llama3, longrope, su)");
  }
}

/// The type of a RoPE block (rope_type, else the legacy type); "" when it has neither.
std::string block_type(const Ctx& x, const Json& block, const std::string& rs_key) {
  const char* type_key = block.contains("rope_type") && !block.at("rope_type").is_null() ? "rope_type"
                         : block.contains("type") && !block.at("type").is_null()        ? "type"
                                                                                        : nullptr;
  if (!type_key) return {};
  if (!block.at(type_key).is_string()) {
    x.range(block.at(type_key), rs_key + "." + type_key,
            "a string: default, linear, dynamic, ntk, yarn, llama3, longrope, su or proportional");
  }
  return block.at(type_key).get<std::string>();
}

/// A v5 rope_parameters keyed by layer type: a non-empty object of objects (or nulls) with
/// neither rope_type nor type.
bool per_type_blocks(const Json& r) {
  if (!r.is_object() || r.empty() || r.contains("rope_type") || r.contains("type")) return false;
  for (const auto& [k, v] : r.items()) {
    if (!v.is_object() && !v.is_null()) return false;
  }
  return true;
}

/// The config's lengths: max_position_embeddings (and its key) and a top-level
/// original_max_position_embeddings (0 when absent).
struct Lengths {
  const Json* l = nullptr;
  std::string l_key;
  std::int64_t top_l0 = 0;
};
Lengths read_lengths(const Ctx& x, const Json& j, RopeModelConfig& c) {
  Lengths n;
  n.l = first_of(j, {"max_position_embeddings", "n_positions", "max_sequence_length"}, &n.l_key);
  if (n.l) c.max_position = x.integer(*n.l, n.l_key, kLength);
  std::string which;
  if (const Json* l0 = first_of(j, {"original_max_position_embeddings"}, &which)) {
    n.top_l0 = x.integer(*l0, which, kLength);
  }
  c.scaling.max_position = c.max_position;
  return n;
}

/// The rule of the block `scaling` (key path rs_key, type `type`) into c.scaling: its keys, each
/// checked, no unknown key, and the parameters consistent.
void read_block_rule(const Ctx& x, const Json& scaling, const std::string& rs_key, const std::string& type,
                     RopeModelConfig& c, const Lengths& n) {
  Block b{x, scaling, rs_key, type};
  b.known.insert("llama_4_scaling_beta");
  read_rule(b, type, c, n.l, n.l_key, n.top_l0);
  if (b.has("llama_4_scaling_beta")) {
    c.llama_4_scaling_beta = b.number("llama_4_scaling_beta", kBeta);
  }
  for (const auto& [k, v] : scaling.items()) {
    if (!b.known.count(k) && !POSENC_MUTANT("format_config_unknown_key_accepted")) {
      x.fail("\"" + x.full(rs_key) + "\" of type " + type + " has unknown key \"" + k + "\"");
    }
  }
  try {
    reference::rope_scaling_check(c.params, c.scaling, "rope_config");
  } catch (const InvalidArgument& e) {
    x.fail(std::string("inconsistent rope parameters: ") + e.what());
  }
}

/// A proportional block (Gemma 4): rope_theta, partial_rotary_factor (p), factor (s).
RopeBlock read_proportional(const Ctx& x, const Json& j, const Json& block, const std::string& key,
                            RopeBlock out, double fallback_theta) {
  const std::set<std::string> known = {"rope_type", "type", "rope_theta", "partial_rotary_factor", "factor"};
  for (const auto& [k, v] : block.items()) {
    if (!known.count(k)) x.fail("\"" + x.full(key) + "\" of type proportional has unknown key \"" + k + "\"");
  }
  auto has = [&](const char* k) { return block.contains(k) && !block.at(k).is_null(); };
  std::string which;
  if (has("rope_theta")) {
    out.params.base = x.number(block.at("rope_theta"), key + ".rope_theta", kBase);
  } else if (fallback_theta > 0) {
    out.params.base = fallback_theta;
  } else if (const Json* top = first_of(j, {"rope_theta"}, &which)) {
    out.params.base = x.number(*top, which, kBase);
  } else {
    out.params.base = 10000.0;
    out.notes.push_back(x.full(key) + ": rope_theta absent: 10000, the HF default");
  }
  out.params.rotary_dim = out.params.head_dim;
  out.proportional = true;
  if (has("partial_rotary_factor")) {
    out.proportion.proportion = x.number(block.at("partial_rotary_factor"), key + ".partial_rotary_factor", kPartial);
  } else {
    out.notes.push_back(x.full(key) + ": partial_rotary_factor absent: p = 1 (HF's default), plain RoPE");
  }
  if (has("factor")) out.proportion.factor = x.number(block.at("factor"), key + ".factor", kFactor);
  try {
    reference::rope_proportional_check(out.params, out.proportion, "rope_config");
  } catch (const InvalidArgument& e) {
    x.fail(std::string("inconsistent proportional rope parameters: ") + e.what());
  }
  return out;
}

/// HF's Gemma3TextConfig defaults for the keys the published Gemma 3 configs leave out (the 4B
/// text_config has no heads, no rope_theta): the class fills them in, so the reader does, with a note.
Json gemma3_defaults(const Json& t, RopeModelConfig& c) {
  static const Json kDefaults = {{"num_attention_heads", 8},      {"num_key_value_heads", 4},
                                 {"head_dim", 256},               {"max_position_embeddings", 131072},
                                 {"rope_theta", 1000000.0},       {"rope_local_base_freq", 10000.0},
                                 {"query_pre_attn_scalar", 256},  {"sliding_window", 4096},
                                 {"sliding_window_pattern", 6}};
  Json out = t;
  const bool per_type = t.contains("rope_parameters") && per_type_blocks(t.at("rope_parameters"));
  bool block_theta = false;  // a v5 block carries the base: the top-level default must not override it
  for (const char* k : {"rope_parameters", "rope_scaling"}) {
    if (t.contains(k) && t.at(k).is_object() && t.at(k).contains("rope_theta")) block_theta = true;
  }
  for (const auto& [k, v] : kDefaults.items()) {
    if (t.contains(k) && !t.at(k).is_null()) continue;
    if (per_type && (k == "rope_theta" || k == "rope_local_base_freq")) continue;  // in the blocks
    if (block_theta && k == "rope_theta") continue;
    out[k] = v;
    c.defaults[k] = v;
    c.notes.push_back(k + " absent: " + v.dump() + " (HF's Gemma3TextConfig default)");
  }
  return out;
}

/// The text model's keys and the message prefix: the config, or its text_config when the top
/// level has no heads (a multimodal config).
const Json& text_part(const Ctx& top, const Json& j, RopeModelConfig& c) {
  if (first_of(j, {"num_attention_heads", "n_head", "n_heads"}, nullptr)) return j;
  if (!j.contains("text_config") || j.at("text_config").is_null()) return j;
  if (!j.at("text_config").is_object()) top.range(j.at("text_config"), "text_config", "an object");
  c.text_key = "text_config";
  const Json& t = j.at("text_config");
  if (c.model_type.empty()) c.model_type = top.text(t, "model_type", "text_config.model_type");
  return t;
}

RopeModelConfig config_from_json(const Json& j, const std::string& source, const RawNumbers& raw) {
  const Ctx top{source, raw};
  if (!j.is_object()) top.fail("a config must be a JSON object");
  RopeModelConfig c;
  c.config = j;
  c.config.erase("_posenc");
  c.raw_numbers = raw;
  Json pos = Json::object();
  read_identity(top, j, c, pos);
  const Json& nested = text_part(top, j, c);
  const std::string text_type = nested.is_object() ? top.text(nested, "model_type", "model_type") : std::string();
  const bool gemma3 = text_type == "gemma3_text" || (text_type.empty() && c.model_type == "gemma3");
  const Json t = gemma3 ? gemma3_defaults(nested, c) : nested;
  const Ctx x{source, raw, c.text_key.empty() ? std::string() : c.text_key + "."};
  read_heads(x, t, c);

  std::string which;
  const Json* rs = first_of(t, {"rope_scaling", "rope_parameters"}, &which);
  std::string rs_key = which;
  Json scaling = rs ? *rs : Json(nullptr);
  if (!scaling.is_null() && !scaling.is_object()) x.range(scaling, rs_key, "an object or null");
  const bool per_type = per_type_blocks(scaling);
  if (per_type) {
    // The config's one RoPE: full_attention, else sliding_attention, else the first, not proportional.
    const Json all = scaling;
    std::string main;
    for (const std::string k : {"full_attention", "sliding_attention"}) {
      if (main.empty() && all.contains(k) && all.at(k).is_object() &&
          block_type(x, all.at(k), rs_key + "." + k) != "proportional") {
        main = k;
      }
    }
    for (const auto& [k, v] : all.items()) {
      if (main.empty() && v.is_object() && block_type(x, v, rs_key + "." + k) != "proportional") main = k;
    }
    if (main.empty()) x.fail("\"" + x.full(rs_key) + "\" has no RoPE block that is not proportional");
    rs_key += "." + main;
    scaling = all.at(main);
  }
  read_rotary(x, t, scaling, rs_key, c, per_type);
  read_layout(x, pos, c);
  const Lengths n = read_lengths(x, t, c);
  if (scaling.is_null()) return c;
  c.rope_key = rs_key;
  const std::string type = block_type(x, scaling, rs_key);
  if (type.empty()) x.fail("\"" + x.full(rs_key) + "\" has neither \"rope_type\" nor \"type\"");
  read_block_rule(x, scaling, rs_key, type, c, n);
  if (per_type) {  // every other block is checked too (unknown keys, ranges)
    const Json& all = *rs;
    for (const auto& [k, v] : all.items()) {
      if (v.is_object() && which + "." + k != rs_key) rope_block_read(c, v, which + "." + k, c.params.head_dim, source);
    }
  }
  return c;
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
  return config_from_json(j, source, RawNumbers{});
}

RopeModelConfig rope_config_parse(std::string_view text, const std::string& source) {
  check_json_depth(text, source, input_limits().json_depth);
  Json j;
  RawNumbers raw;
  try {
    RawSax sax(j, raw);
    Json::sax_parse(text.begin(), text.end(), &sax);
  } catch (const Json::exception& e) {  // parse_error, or out_of_range: 1e999
    throw GoldenFileError(source + ": invalid JSON: " + e.what());
  }
  return config_from_json(j, source, raw);
}

RopeModelConfig rope_config_read(const fs::path& path) {
  return rope_config_parse(read_json_text(path), path.string());
}

RopeBlock rope_block_read(const RopeModelConfig& m, const Json& block, const std::string& key, int head_dim,
                          const std::string& source, double fallback_theta) {
  const Json t = m.text_with_defaults();
  const Ctx x{source, m.raw_numbers, m.text_key.empty() ? std::string() : m.text_key + "."};
  if (!block.is_object()) x.range(block, key, "an object");
  const std::string type = block_type(x, block, key);
  if (type.empty()) x.fail("\"" + x.full(key) + "\" has neither \"rope_type\" nor \"type\"");
  RopeModelConfig c;  // scratch: the model with this block's head
  c.model_type = m.model_type;
  c.params = m.params;
  c.params.head_dim = head_dim;
  c.softmax_head_dim = head_dim;
  RopeBlock out;
  out.params = c.params;
  if (type == "proportional") return read_proportional(x, t, block, key, out, fallback_theta);
  read_rotary(x, t, block, key, c, true, fallback_theta);
  const Lengths n = read_lengths(x, t, c);
  read_block_rule(x, block, key, type, c, n);
  out.params = c.params;
  out.scaling = c.scaling;
  out.llama_4_scaling_beta = c.llama_4_scaling_beta;
  out.notes = c.notes;
  return out;
}

std::string config_name_sanitize(std::string_view text) {
  std::string o;
  for (const char ch : text) {
    const char c = (ch >= 'A' && ch <= 'Z') ? static_cast<char>(ch - 'A' + 'a') : ch;
    const bool keep = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    if (keep) {
      o += c;
    } else if (!o.empty() && o.back() != '_') {
      o += '_';
    }
    if (o.size() > kConfigNameMax) break;
  }
  if (o.size() > kConfigNameMax) o.resize(kConfigNameMax);
  while (!o.empty() && o.back() == '_') o.pop_back();
  return o;
}

std::string config_case_name(const RopeModelConfig& m, std::string_view config_bytes) {
  const std::string hash = sha256_hex(std::span(reinterpret_cast<const std::uint8_t*>(config_bytes.data()),
                                                config_bytes.size()));
  // A committed preset: its own name, when the bytes are the committed file's.
  const std::string& id = m.id;
  if (!id.empty() && id.size() <= 64 && id.find_first_of("/\\") == std::string::npos && id != "." && id != "..") {
    const fs::path preset = default_presets_dir() / (id + ".json");
    std::error_code ec;
    if (fs::is_regular_file(preset, ec)) {
      try {
        if (sha256_file(preset) == hash) return config_name_sanitize(id);
      } catch (const GoldenFileError&) {
        // unreadable: not the preset
      }
    }
  }
  std::string model = m.name_or_path;
  while (!model.empty() && (model.back() == '/' || model.back() == '\\')) model.pop_back();
  const std::size_t slash = model.find_last_of("/\\");
  if (slash != std::string::npos) model = model.substr(slash + 1);
  model = config_name_sanitize(model);
  if (model.empty()) model = config_name_sanitize(m.model_type);
  if (model.empty()) model = "model";
  return model + "_" + hash.substr(0, 8);
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
