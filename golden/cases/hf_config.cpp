#include "golden/cases/hf_config.hpp"

#include <cmath>
#include <map>
#include <set>
#include <span>

#include "golden/format/format.hpp"
#include "golden/format/limits.hpp"
#include "optimized/rope.hpp"
#include "reference/common/errors.hpp"
#include "optimized/common/mutant.hpp"

namespace posenc::golden {

namespace fs = std::filesystem;
using Json = nlohmann::json;
using reference::RopeLayout;
using reference::RopeScalingType;

namespace {

// ---- the text of every number, as the file writes it ------------------------------------------

/// The text of each float of the document by key path ("rope_scaling.factor",
/// "rope_scaling.short_factor[3]"); integers print exactly from the parsed value.
using RawNumbers = std::map<std::string, std::string>;

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
  /// Only the keys a message can name (at most three levels: "rope_scaling.short_factor[3]",
  /// short keys), so a hostile document cannot make each float copy a long path.
  bool quotable() const {
    if (frames_.size() > 3) return false;
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

// ---- checked reads ------------------------------------------------------------------------------

/// Accepted ranges (docs/own-model.md has the table; see the header).
struct Range {
  double lo, hi;
  bool lo_open;      // (lo, hi] rather than [lo, hi]
  const char* text;  // as the messages print it
};
struct IntRange {
  std::int64_t lo, hi;
  const char* text;
};
static_assert(optimized::kRopeMaxPosition == std::int64_t{1} << 28, "the texts below say 2^28");
constexpr IntRange kHeads{1, 65536, "an integer in [1, 65536]"};
constexpr IntRange kHeadDim{1, 16384, "an integer in [1, 16384]"};
constexpr IntRange kNopeDim{0, 16384, "an integer in [0, 16384]"};
constexpr IntRange kHidden{1, std::int64_t{1} << 24, "an integer in [1, 16777216]"};
constexpr IntRange kLength{1, optimized::kRopeMaxPosition,
                           "an integer in [1, 268435456] (2^28, the kernel's position limit)"};
constexpr IntRange kDynamicLength{1, optimized::kRopeMaxPosition / 2,
                                  "an integer in [1, 134217728] for dynamic scaling (2^27: its longest "
                                  "call ends at 2L - 1, within the kernel's 2^28)"};
constexpr IntRange kLongRopeL0{2, optimized::kRopeMaxPosition, "an integer in [2, 268435456] for longrope"};
constexpr Range kBase{1.0, 1e15, true, "a number in (1, 1e15]"};
constexpr Range kPartial{0.0, 1.0, true, "a number in (0, 1]"};
constexpr Range kFactor{0.001, 65536.0, false, "a number in [0.001, 65536]"};
constexpr Range kPositive{0.0, 65536.0, true, "a number in (0, 65536]"};
constexpr Range kAttention{0.0, 100.0, true, "a number in (0, 100]"};
constexpr Range kMscale{0.0, 100.0, false, "a number in [0, 100] (0: absent, as HF)"};

/// The file's name and the raw number texts: what every message needs.
struct Ctx {
  const std::string& source;
  const RawNumbers& raw;

  [[noreturn]] void fail(const std::string& what) const { throw GoldenFileError(source + ": " + what); }
  /// The value as the file writes it (strings and objects as JSON, at most 64 characters).
  std::string shown(const Json& v, const std::string& path) const {
    if (v.is_number_float()) {
      const auto it = raw.find(path);
      if (it != raw.end()) return it->second;
    }
    std::string d = v.dump(-1, ' ', false, Json::error_handler_t::replace);
    if (d.size() > 64) d = d.substr(0, 61) + "...";
    return d;
  }
  /// "<file>: <path> = <value>: must be <what>"
  [[noreturn]] void range(const Json& v, const std::string& path, const std::string& what) const {
    fail(path + " = " + shown(v, path) + ": must be " + what);
  }
  /// An integer key: a JSON integer or an integral float (4096.0, as Python's int() reads it),
  /// checked on the representation the JSON holds before any conversion.
  std::int64_t integer(const Json& v, const std::string& path, const IntRange& r) const {
    bool ok = false;
    std::int64_t out = 0;
    if (v.is_number_unsigned()) {
      const std::uint64_t u = v.get<std::uint64_t>();
      ok = r.hi >= 0 && u <= static_cast<std::uint64_t>(r.hi) && static_cast<std::int64_t>(u) >= r.lo;
      if (ok) out = static_cast<std::int64_t>(u);
    } else if (v.is_number_integer()) {
      out = v.get<std::int64_t>();
      ok = out >= r.lo && out <= r.hi;
    } else if (v.is_number_float()) {
      const double d = v.get<double>();
      ok = d == std::floor(d) && d >= static_cast<double>(r.lo) && d <= static_cast<double>(r.hi);
      if (ok) out = static_cast<std::int64_t>(d);
    }
    if (!ok) range(v, path, r.text);
    return out;
  }
  double number(const Json& v, const std::string& path, const Range& r) const {
    if (!v.is_number()) range(v, path, r.text);
    const double d = v.get<double>();  // any JSON number is a finite double or a parse error
    const bool low = r.lo_open ? d > r.lo : d >= r.lo;
    if (!low || !(d <= r.hi)) range(v, path, r.text);
    return d;
  }
  /// A string, or "" when absent or null.
  std::string text(const Json& obj, const char* key, const std::string& path) const {
    if (!obj.contains(key) || obj.at(key).is_null()) return {};
    if (!obj.at(key).is_string()) range(obj.at(key), path, "a string");
    return obj.at(key).get<std::string>();
  }
};

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
void read_rotary(const Ctx& x, const Json& j, const Json& scaling, const std::string& rs_key,
                 RopeModelConfig& c) {
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

  if (const Json* b = first_of(j, {"rope_theta", "rotary_emb_base"}, &which)) {
    c.params.base = x.number(*b, which, kBase);
  } else if (!scaling.is_null() && scaling.contains("rope_theta") && !scaling.at("rope_theta").is_null()) {
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
    if (!has(key)) x.fail("\"" + rs_key + "\" of type " + type + " needs \"" + key + "\"");
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
      x.fail(path(key) + " has " + std::to_string(v.size()) + " entries: must have rotary_dim / 2 = " +
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
    if (!(s.high_freq_factor > s.low_freq_factor)) {
      x.range(b.scaling.at("high_freq_factor"), b.path("high_freq_factor"),
              "> low_freq_factor = " + x.shown(b.scaling.at("low_freq_factor"), b.path("low_freq_factor")) +
                  " (the smoothing divides by their difference)");
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
    x.fail("\"" + b.rs_key + "\" has unknown type \"" + type +
           "\" (known: default, linear, dynamic, ntk, yarn, llama3, longrope, su)");
  }
}

RopeModelConfig config_from_json(const Json& j, const std::string& source, const RawNumbers& raw) {
  const Ctx x{source, raw};
  if (!j.is_object()) x.fail("a config must be a JSON object");
  RopeModelConfig c;
  c.config = j;
  c.config.erase("_posenc");
  Json pos = Json::object();
  read_identity(x, j, c, pos);
  read_heads(x, j, c);

  std::string which;
  const Json* rs = first_of(j, {"rope_scaling", "rope_parameters"}, &which);
  const std::string rs_key = which;
  const Json scaling = rs ? *rs : Json(nullptr);
  if (!scaling.is_null() && !scaling.is_object()) x.range(scaling, rs_key, "an object or null");
  read_rotary(x, j, scaling, rs_key, c);
  read_layout(x, pos, c);

  // lengths
  const Json* l = first_of(j, {"max_position_embeddings", "n_positions", "max_sequence_length"}, &which);
  const std::string l_key = which;
  if (l) c.max_position = x.integer(*l, l_key, kLength);
  std::int64_t top_l0 = 0;
  if (const Json* l0 = first_of(j, {"original_max_position_embeddings"}, &which)) {
    top_l0 = x.integer(*l0, which, kLength);
  }

  // the scaling rule
  c.scaling.max_position = c.max_position;
  if (scaling.is_null()) return c;
  std::string type;
  const char* type_key = scaling.contains("rope_type") && !scaling.at("rope_type").is_null() ? "rope_type"
                         : scaling.contains("type") && !scaling.at("type").is_null()        ? "type"
                                                                                            : nullptr;
  if (!type_key) x.fail("\"" + rs_key + "\" has neither \"rope_type\" nor \"type\"");
  if (!scaling.at(type_key).is_string()) {
    x.range(scaling.at(type_key), rs_key + "." + type_key,
            "a string: default, linear, dynamic, ntk, yarn, llama3, longrope or su");
  }
  type = scaling.at(type_key).get<std::string>();
  Block b{x, scaling, rs_key, type};
  read_rule(b, type, c, l, l_key, top_l0);
  for (const auto& [k, v] : scaling.items()) {
    if (!b.known.count(k) && !POSENC_MUTANT("format_config_unknown_key_accepted")) {
      x.fail("\"" + rs_key + "\" of type " + type + " has unknown key \"" + k + "\"");
    }
  }
  try {
    reference::rope_scaling_check(c.params, c.scaling, "rope_config");
  } catch (const InvalidArgument& e) {
    x.fail(std::string("inconsistent rope parameters: ") + e.what());
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
