#include "golden/verify/manifest_check.hpp"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "reference/common/errors.hpp"
#include "optimized/common/mutant.hpp"

namespace posenc::golden {

namespace {

using Json = nlohmann::json;

[[noreturn]] void bad(const std::string& source, const std::string& key, const std::string& what) {
  throw GoldenFileError(source + ": " + key + ": " + what);
}

// ---- keys -------------------------------------------------------------------------------------

enum class Kind { kInt, kNumber, kBool, kString, kObject, kDType };

/// A params key: its type and, for numbers, the closed range [lo, hi]; for strings, the choices
/// ("a|b|c"; empty: any non-empty string).
struct Key {
  const char* name;
  Kind kind;
  double lo = 0;
  double hi = 1e15;  // dimensions stay far from int64 overflow in the shape products
  const char* choices = "";
};

Key integer(const char* name, double lo = 0) { return {name, Kind::kInt, lo}; }
Key signed_integer(const char* name) { return {name, Kind::kInt, -1e15}; }
Key number(const char* name, double lo = 0) { return {name, Kind::kNumber, lo}; }
Key boolean(const char* name) { return {name, Kind::kBool}; }
Key string(const char* name, const char* choices = "") {
  return {name, Kind::kString, 0, 0, choices};
}
Key object(const char* name) { return {name, Kind::kObject}; }
Key dtype_key() { return {"dtype", Kind::kDType}; }

std::string fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

void check_key(const Json& p, const Key& k, const std::string& source, const std::string& form,
               const char* block = "params.") {
  const std::string where = block + std::string(k.name);
  if (!p.contains(k.name)) bad(source, where, "missing (a " + form + " manifest has it)");
  const Json& v = p.at(k.name);
  const std::string got = " (got " + v.dump() + ")";
  switch (k.kind) {
    case Kind::kInt: {
      const bool too_big =
          v.is_number_unsigned() && v.get<std::uint64_t>() > (std::uint64_t{1} << 62);
      if (!v.is_number_integer() || too_big || v.get<std::int64_t>() < k.lo ||
          v.get<std::int64_t>() > k.hi) {
        bad(source, where, "expected an integer in [" + fmt(k.lo) + ", " + fmt(k.hi) + "]" + got);
      }
      break;
    }
    case Kind::kNumber:
      if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < k.lo ||
          v.get<double>() > k.hi) {
        bad(source, where,
            "expected a finite number in [" + fmt(k.lo) + ", " + fmt(k.hi) + "]" + got);
      }
      break;
    case Kind::kBool:
      if (!v.is_boolean()) bad(source, where, "expected true or false" + got);
      break;
    case Kind::kObject:
      if (!v.is_object()) bad(source, where, "expected an object" + got);
      break;
    case Kind::kDType: {
      bool known = false;
      for (DType t : {DType::kF64, DType::kF32, DType::kBF16, DType::kF16}) {
        known |= v.is_string() && v.get<std::string>() == dtype_short(t);
      }
      if (!known) bad(source, where, "expected a float dtype: f64, f32, bf16 or f16" + got);
      break;
    }
    case Kind::kString: {
      if (!v.is_string() || v.get<std::string>().empty())
        bad(source, where, "expected a non-empty string" + got);
      const std::string c = k.choices;
      if (c.empty()) break;
      const std::string s = v.get<std::string>();
      bool ok = false;
      for (std::size_t a = 0; a <= c.size();) {
        std::size_t b = c.find('|', a);
        if (b == std::string::npos) b = c.size();
        ok |= c.compare(a, b - a, s) == 0 && b - a == s.size();
        a = b + 1;
      }
      if (!ok) bad(source, where, "expected one of " + c + got);
      break;
    }
  }
}

/// Value of an integer params key already checked by check_key.
std::int64_t pint(const Json& p, const char* key) { return p.at(key).get<std::int64_t>(); }

// ---- shapes -----------------------------------------------------------------------------------

/// Evaluates a dimension: params keys and integers joined by + - * / (left to right); false on
/// an overflow or a division by zero.
bool eval_dim(const std::string& e, const Json& p, std::int64_t* out) {
  std::int64_t acc = 0;
  char op = '+';
  for (std::size_t i = 0; i < e.size();) {
    std::size_t j = i;
    while (j < e.size() && e[j] != '+' && e[j] != '-' && e[j] != '*' && e[j] != '/') ++j;
    const std::string tok = e.substr(i, j - i);
    const std::int64_t v =
        (tok[0] >= '0' && tok[0] <= '9') ? std::stoll(tok) : pint(p, tok.c_str());
    bool overflow = false;
    switch (op) {
      case '+':
        overflow = __builtin_add_overflow(acc, v, &acc);
        break;
      case '-':
        overflow = __builtin_sub_overflow(acc, v, &acc);
        break;
      case '*':
        overflow = __builtin_mul_overflow(acc, v, &acc);
        break;
      default:
        if (v == 0) return false;
        acc /= v;
    }
    if (overflow) return false;
    if (j < e.size()) op = e[j];
    i = j + 1;
  }
  *out = acc;
  return true;
}

std::string shape_text(const std::vector<std::int64_t>& s) {
  std::string t = "[";
  for (std::size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + "]";
}

struct ShapeRule {
  const char* tensor;
  std::vector<const char*> dims;
  bool required = false;
};

const TensorSpec* find_tensor(const CaseSpec& c, const std::string& name) {
  for (const auto* list : {&c.inputs, &c.expected}) {
    for (const auto& t : *list) {
      if (t.name == name) return &t;
    }
  }
  return nullptr;
}

void check_shape(const CaseSpec& c, const ShapeRule& r, const Json& p, const std::string& source) {
  const TensorSpec* t = find_tensor(c, r.tensor);
  const std::string where = std::string("tensor \"") + r.tensor + "\"";
  if (t == nullptr) {
    if (r.required) bad(source, where, "missing (required by scheme " + c.scheme + ")");
    return;
  }
  std::vector<std::int64_t> want(r.dims.size());
  std::string names = "[";
  bool ok = true;
  for (std::size_t i = 0; i < r.dims.size(); ++i) {
    ok &= eval_dim(r.dims[i], p, &want[i]);
    names += (i ? ", " : "") + std::string(r.dims[i]);
  }
  names += "]";
  if ((!ok || t->shape != want) && !POSENC_MUTANT("golden_manifest_shape_unchecked")) {
    bad(source, where + " shape",
        "expected " + names + (ok ? " = " + shape_text(want) : "") + " from params, got " +
            shape_text(t->shape));
  }
}

// ---- forms ------------------------------------------------------------------------------------

struct Form {
  const char* name;
  bool (*matches)(const Json& manifest);  // nullptr: the scheme's only (or last) form
  bool has_params = true;                 // false: the manifest must have no "params"
  std::vector<Key> params, optional;
  std::vector<const char*> blocks;  // required top-level keys
  std::vector<ShapeRule> shapes;
  const char* dtype_tensor = "";  // tensor whose dtype is params.dtype
  void (*rules)(const CaseSpec& c, const Json& p, const std::string& source) = nullptr;
};

std::vector<Key> operator+(std::vector<Key> a, const std::vector<Key>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}
std::vector<ShapeRule> operator+(std::vector<ShapeRule> a, const std::vector<ShapeRule>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

void rule(bool ok, const std::string& source, const std::string& key, const std::string& what) {
  if (!ok) bad(source, key, what);
}

std::vector<Key> attention_keys() {
  return {integer("n_heads", 1),
          integer("n_kv_heads", 1),
          integer("head_dim", 1),
          integer("value_dim", 1),
          integer("tq", 1),
          integer("tk", 1),
          integer("query_offset"),
          integer("window"),
          boolean("causal"),
          string("scale_kind", "inv_sqrt_head_dim|none|given"),
          dtype_key()};
}
std::vector<ShapeRule> attention_shapes() {
  return {{"query_positions", {"tq"}},
          {"key_positions", {"tk"}},
          {"q", {"tq", "n_heads", "head_dim"}, true},
          {"k", {"tk", "n_kv_heads", "head_dim"}, true},
          {"v", {"tk", "n_kv_heads", "value_dim"}, true},
          {"out", {"tq", "n_heads", "value_dim"}},
          {"probs", {"n_heads", "tq", "tk"}}};
}
void attention_rules(const CaseSpec&, const Json& p, const std::string& source) {
  rule(pint(p, "n_heads") % pint(p, "n_kv_heads") == 0, source, "params.n_kv_heads",
       "expected a divisor of n_heads " + p.at("n_heads").dump() + " (got " +
           p.at("n_kv_heads").dump() + ")");
}

std::vector<Key> rope_keys() {
  return {integer("n_tokens", 1),
          integer("n_q_heads", 1),
          integer("n_kv_heads"),
          integer("head_dim", 2),
          integer("rotary_dim", 2),
          number("base", 1e-300),
          number("attention_factor", 1e-300),
          string("layout", "half_split|interleaved"),
          dtype_key()};
}
std::vector<ShapeRule> rope_shapes() {
  return {{"positions", {"n_tokens"}, true},
          {"q", {"n_tokens", "n_q_heads", "head_dim"}, true},
          {"k", {"n_tokens", "n_kv_heads", "head_dim"}},
          {"q_rot", {"n_tokens", "n_q_heads", "head_dim"}},
          {"k_rot", {"n_tokens", "n_kv_heads", "head_dim"}},
          {"inv_freq", {"rotary_dim/2"}},
          {"cos", {"n_tokens", "rotary_dim/2"}},
          {"sin", {"n_tokens", "rotary_dim/2"}}};
}
void rope_rules(const CaseSpec&, const Json& p, const std::string& source) {
  const std::int64_t r = pint(p, "rotary_dim"), d = pint(p, "head_dim");
  rule(r % 2 == 0 && r <= d, source, "params.rotary_dim",
       "expected an even number <= head_dim " + std::to_string(d) + " (got " + std::to_string(r) +
           ")");
  rule(d % 2 == 0, source, "params.head_dim",
       "expected an even number (got " + std::to_string(d) + ")");
}

void range_rules(const CaseSpec&, const Json& p, const std::string& source) {
  rule(pint(p, "r_max") >= pint(p, "r_min"), source, "params.r_max",
       "expected >= r_min " + p.at("r_min").dump() + " (got " + p.at("r_max").dump() + ")");
}

void transformer_xl_rules(const CaseSpec& c, const Json& p, const std::string& source) {
  attention_rules(c, p, source);
  for (auto [a, b] :
       {std::pair{"qlen", "tq"}, std::pair{"klen", "tk"}, std::pair{"d_head", "head_dim"}}) {
    rule(pint(p, a) == pint(p, b), source, std::string("params.") + a,
         std::string("expected ") + b + " " + p.at(b).dump() + " (got " + p.at(a).dump() + ")");
  }
}

void kv_rules(const CaseSpec& c, const Json& p, const std::string& source);
void check_kv_trace(const CaseSpec& c, const std::string& source);

void slopes_rules(const CaseSpec& c, const Json&, const std::string& source) {
  const TensorSpec* t = find_tensor(c, "slopes");
  rule(t != nullptr && t->shape.size() == 1, source, "tensor \"slopes\"",
       "expected one slope per head (a list), as an alibi slopes manifest has");
}

bool has_tq(const Json& m) {
  return m.contains("params") && m.at("params").is_object() && m.at("params").contains("tq");
}
bool alibi_attention(const Json& m) { return m.value("alibi_case", Json()) == Json("attention"); }

/// M-RoPE: RoPE's keys, the map, the index rule, the prompt's spans and the decode count.
Form mrope_form() {
  return {"mrope",
          nullptr,
          true,
          rope_keys() + std::vector<Key>{object("map"), object("index"), object("prompt"),
                                         integer("n_prompt"), integer("n_decode")},
          {},
          {},
          {{"input_ids", {"n_tokens"}, true},
           {"q", {"n_tokens", "n_q_heads", "head_dim"}, true},
           {"k", {"n_tokens", "n_kv_heads", "head_dim"}},
           {"q_rot", {"n_tokens", "n_q_heads", "head_dim"}},
           {"k_rot", {"n_tokens", "n_kv_heads", "head_dim"}},
           {"cos", {"n_tokens", "rotary_dim/2"}},
           {"sin", {"n_tokens", "rotary_dim/2"}}},
          "q",
          rope_rules};
}

bool mrope_trace(const Json& m) { return m.value("variant", Json()) == Json("trace"); }

/// An M-RoPE KV-cache trace: RoPE's rotation keys, the map and index rule, the heads and cache
/// rows; the requests and steps in the "trace" block. Every step's tensors are listed by name,
/// steps are numbered 0, 1, 2, ... and each names a known request and kind.
void mrope_trace_rules(const CaseSpec& c, const Json& p, const std::string& source) {
  rope_rules(c, p, source);
  const Json& tr = c.manifest.at("trace");
  const bool ok = tr.is_object() && tr.contains("requests") && tr.at("requests").is_array() &&
                  !tr.at("requests").empty() && tr.contains("steps") &&
                  tr.at("steps").is_array() && !tr.at("steps").empty();
  rule(ok, source, "trace", "expected non-empty lists \"requests\" and \"steps\"");
  static const std::set<std::string> kinds = {"prefill", "decode", "draft", "verify", "truncate",
                                              "shift"};
  const std::int64_t n_requests = static_cast<std::int64_t>(tr.at("requests").size());
  const Json& steps = tr.at("steps");
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const Json& js = steps[i];
    const std::string w = "trace.steps[" + std::to_string(i) + "]";
    rule(js.is_object() && js.value("index", Json()) == Json(i), source, w + ".index",
         "expected " + std::to_string(i) + " (steps numbered from 0, none repeated or missing)");
    rule(js.contains("kind") && js.at("kind").is_string() &&
             kinds.count(js.at("kind").get<std::string>()),
         source, w + ".kind", "expected prefill, decode, draft, verify, truncate or shift");
    const Json r = js.value("request", Json());
    rule(r.is_number_integer() && r.get<std::int64_t>() >= 0 && r.get<std::int64_t>() < n_requests,
         source, w + ".request", "expected the index of one of trace.requests");
    for (const char* list : {"inputs", "expected"}) {
      rule(js.contains(list) && js.at(list).is_array(), source, w + "." + list,
           "expected a list of tensor names");
      for (const Json& name : js.at(list)) {
        rule(name.is_string() && find_tensor(c, name.get<std::string>()) != nullptr, source,
             w + "." + list, "names a tensor the manifest does not list: " + name.dump());
      }
    }
  }
}

bool mrope_vision(const Json& m) { return m.value("variant", Json()) == Json("vision"); }

/// A vision-tower case: 2D axial RoPE over an image's patches (no prompt, no input_ids).
Form mrope_vision_form() {
  return {"mrope vision tower (variant \"vision\")",
          mrope_vision,
          true,
          rope_keys() + std::vector<Key>{object("map"), object("grid")},
          {},
          {},
          {{"q", {"n_tokens", "n_q_heads", "head_dim"}, true},
           {"k", {"n_tokens", "n_kv_heads", "head_dim"}},
           {"q_rot", {"n_tokens", "n_q_heads", "head_dim"}},
           {"k_rot", {"n_tokens", "n_kv_heads", "head_dim"}},
           {"cos", {"n_tokens", "rotary_dim/2"}},
           {"sin", {"n_tokens", "rotary_dim/2"}}},
          "q",
          rope_rules};
}

Form mrope_trace_form() {
  return {"mrope trace (variant \"trace\")",
          mrope_trace,
          true,
          {integer("n_q_heads", 1), integer("n_kv_heads", 1), integer("head_dim", 2),
           integer("rotary_dim", 2), number("base", 1e-300), number("attention_factor", 1e-300),
           string("layout", "half_split|interleaved"), object("map"), object("index"),
           integer("cache_rows", 1), dtype_key()},
          {},
          {"trace"},
          {},
          "",
          mrope_trace_rules};
}

/// A model plan's layer-type case (golden/cases/plan_case.hpp): the type and the plan as
/// objects (the engine reads them), heads, head_dim, the tokens, the score scale.
void plan_rules(const CaseSpec&, const Json& p, const std::string& source) {
  rule(pint(p, "n_q_heads") % pint(p, "n_kv_heads") == 0, source, "params.n_kv_heads",
       "expected a divisor of n_q_heads " + p.at("n_q_heads").dump() + " (got " +
           p.at("n_kv_heads").dump() + ")");
  rule(pint(p, "value_dim") == pint(p, "head_dim"), source, "params.value_dim",
       "expected head_dim " + p.at("head_dim").dump() + " (got " + p.at("value_dim").dump() + ")");
}

Form plan_form() {
  return {
      "plan",
      nullptr,
      true,
      {object("type"), integer("n_q_heads", 1), integer("n_kv_heads", 1), integer("head_dim", 2),
       integer("value_dim", 1), integer("n_tokens", 1), number("scale", 1e-300), object("plan"),
       string("qk_inputs", "projections|normalized"), dtype_key()},
      {},
      {},
      {{"positions", {"n_tokens"}, true},
       {"q", {"n_tokens", "n_q_heads", "head_dim"}, true},
       {"k", {"n_tokens", "n_kv_heads", "head_dim"}, true},
       {"v", {"n_tokens", "n_kv_heads", "value_dim"}, true},
       {"sinks", {"n_q_heads"}},
       {"q_norm_weight", {"head_dim"}},
       {"k_norm_weight", {"head_dim"}},
       {"q_rot", {"n_tokens", "n_q_heads", "head_dim"}},
       {"k_rot", {"n_tokens", "n_kv_heads", "head_dim"}},
       {"scores", {"n_q_heads", "n_tokens", "n_tokens"}},
       {"probs", {"n_q_heads", "n_tokens", "n_tokens"}},
       {"out", {"n_tokens", "n_q_heads", "value_dim"}}},
      "q",
      plan_rules};
}

/// MLA: head-major inputs, one shared k_pe head; the scaling rule of the rotated part.
Form mla_form() {
  return {"mla",
          nullptr,
          true,
          {integer("n_heads", 1), integer("qk_nope_head_dim"), integer("qk_rope_head_dim", 2),
           number("base", 1e-300), boolean("rope_interleave"), integer("n_tokens", 1),
           object("scaling"), object("derived"), dtype_key()},
          {},
          {},
          {{"positions", {"n_tokens"}, true},
           {"q_nope", {"n_heads", "n_tokens", "qk_nope_head_dim"}, true},
           {"q_pe", {"n_heads", "n_tokens", "qk_rope_head_dim"}, true},
           {"k_nope", {"n_heads", "n_tokens", "qk_nope_head_dim"}, true},
           {"k_pe", {"1", "n_tokens", "qk_rope_head_dim"}, true},
           {"softmax_scale", {"1"}},
           {"q_pe_rot", {"n_heads", "n_tokens", "qk_rope_head_dim"}},
           {"k_pe_rot", {"1", "n_tokens", "qk_rope_head_dim"}},
           {"scores", {"n_heads", "n_tokens", "n_tokens"}}},
          "q_pe"};
}

const std::map<std::string, std::vector<Form>>& forms() {
  static const std::map<std::string, std::vector<Form>> table = [] {
    std::map<std::string, std::vector<Form>> t;
    const auto att = attention_keys();
    const auto att_shapes = attention_shapes();
    t["rope"] = {{"rope", nullptr, true, rope_keys(), {}, {}, rope_shapes(), "q", rope_rules}};
    t["rope_scaling"] = {{"rope_scaling",
                          nullptr,
                          true,
                          rope_keys() + std::vector<Key>{object("scaling")},
                          {integer("softmax_head_dim", 1)},
                          {"scaling"},
                          rope_shapes(),
                          "q",
                          rope_rules}};
    t["mrope"] = {mrope_trace_form(), mrope_vision_form(), mrope_form()};
    t["plan"] = {plan_form()};
    t["mla"] = {mla_form()};
    t["attention"] = {{"attention", nullptr, true, att, {}, {}, att_shapes, "q", attention_rules}};
    t["nope"] = {{"nope", nullptr, true, att, {}, {}, att_shapes, "q", attention_rules}};
    t["alibi"] = {{"alibi attention (alibi_case \"attention\")",
                   alibi_attention,
                   true,
                   att,
                   {},
                   {"alibi"},
                   att_shapes,
                   "q",
                   attention_rules},
                  {"alibi slopes", nullptr, false, {}, {}, {"alibi_case"}, {}, "", slopes_rules}};
    t["shaw"] = {
        {"shaw",
         nullptr,
         true,
         att + std::vector<Key>{integer("max_relative_position"), integer("table_rows", 1)},
         {},
         {},
         att_shapes + std::vector<ShapeRule>{{"relative_index", {"tq", "tk"}},
                                             {"relations_keys", {"table_rows", "head_dim"}}},
         "q",
         attention_rules}};
    t["t5_bias"] = {
        {"t5_bias attention (params.tq)",
         has_tq,
         true,
         att + std::vector<Key>{boolean("bidirectional"), integer("max_distance", 1),
                                integer("max_exact", 1), integer("num_buckets", 1)},
         {},
         {},
         att_shapes +
             std::vector<ShapeRule>{{"relative_attention_bias", {"num_buckets", "n_heads"}},
                                    {"buckets", {"tq", "tk"}},
                                    {"bias", {"n_heads", "tq", "tk"}}},
         "q",
         attention_rules},
        {"t5_bias buckets",
         nullptr,
         true,
         {boolean("bidirectional"), integer("direction_buckets", 1), integer("max_distance", 1),
          integer("max_exact", 1), integer("num_buckets", 1), signed_integer("r_min"),
          signed_integer("r_max")},
         {},
         {},
         {{"relative_position", {"r_max-r_min+1"}, true}, {"buckets", {"r_max-r_min+1"}, true}},
         "",
         range_rules}};
    t["deberta"] = {
        {"deberta attention (params.tq)",
         has_tq,
         true,
         att + std::vector<Key>{integer("att_span", 1), integer("hidden", 1),
                                integer("max_relative_positions", 1), string("pos_att_type"),
                                signed_integer("position_buckets"), number("scale", 0),
                                number("scale_factor", 0), boolean("share_att_key")},
         {},
         {},
         att_shapes + std::vector<ShapeRule>{{"relative", {"tq", "tk"}}, {"index", {"tq", "tk"}}},
         "q",
         attention_rules},
        {"deberta buckets",
         nullptr,
         true,
         {integer("att_span", 1), integer("max_relative_positions", 1),
          signed_integer("position_buckets"), signed_integer("r_min"), signed_integer("r_max")},
         {},
         {},
         {{"relative_position", {"r_max-r_min+1"}, true},
          {"buckets", {"r_max-r_min+1"}, true},
          {"index", {"r_max-r_min+1"}}},
         "",
         range_rules}};
    t["transformer_xl"] = {
        {"transformer_xl",
         nullptr,
         true,
         att + std::vector<Key>{integer("clamp_len"), integer("d_head", 1), integer("d_model", 1),
                                boolean("has_pos_emb"), integer("klen", 1), integer("mem_len"),
                                integer("mlen"), integer("qlen", 1), boolean("same_length")},
         {},
         {},
         att_shapes + std::vector<ShapeRule>{{"rel_position", {"tq", "tk"}},
                                             {"r_w_bias", {"n_heads", "d_head"}},
                                             {"r_r_bias", {"n_heads", "d_head"}}},
         "q",
         transformer_xl_rules}};
    t["learned"] = {{"learned",
                     nullptr,
                     true,
                     {integer("d_model", 1), integer("max_positions", 1), integer("n_tokens", 1),
                      integer("position_offset"), integer("preset_d_model", 1), dtype_key()},
                     {},
                     {},
                     {{"positions", {"n_tokens"}, true},
                      {"table", {"max_positions", "d_model"}, true},
                      {"e", {"n_tokens", "d_model"}},
                      {"position_ids", {"n_tokens"}},
                      {"rows", {"n_tokens", "d_model"}},
                      {"h", {"n_tokens", "d_model"}}},
                     "table"}};
    t["sinusoidal"] = {{"sinusoidal",
                        nullptr,
                        true,
                        {number("base", 1e-300), integer("d_model", 1), integer("n_freq", 1),
                         integer("n_tokens", 1), string("variant"), dtype_key()},
                        {},
                        {},
                        {{"positions", {"n_tokens"}, true},
                         {"e", {"n_tokens", "d_model"}},
                         {"inv_freq", {"n_freq"}},
                         {"pe", {"n_tokens", "d_model"}},
                         {"h", {"n_tokens", "d_model"}}},
                        ""}};
    t["kv_cache"] = {{"kv_cache",
                      nullptr,
                      true,
                      {integer("batch", 1), integer("n_heads", 1), integer("n_kv_heads", 1),
                       integer("head_dim", 1), integer("value_dim", 1), integer("window"),
                       integer("capacity"), integer("n_sink"), integer("cache_rows", 1),
                       string("scale_kind", "inv_sqrt_head_dim|none"), dtype_key()},
                      {integer("chunk", 1)},
                      {"encoding", "trace"},
                      {},
                      "",
                      kv_rules}};
    return t;
  }();
  return table;
}

void check_form(const CaseSpec& c, const Form& f, const std::string& source) {
  const Json& m = c.manifest;
  for (const char* b : f.blocks) {
    if (!m.contains(b))
      bad(source, b, std::string("missing (a ") + f.name + " manifest has this block)");
  }
  if (!f.has_params) {
    if (m.contains("params"))
      bad(source, "params", std::string("unexpected: a ") + f.name + " manifest has none");
    if (f.rules) f.rules(c, Json::object(), source);
    return;
  }
  if (!m.contains("params")) {
    if (POSENC_MUTANT("golden_manifest_params_optional")) return;
    bad(source, "params", std::string("missing (a ") + f.name + " manifest needs its parameters)");
  }
  const Json& p = m.at("params");
  if (!p.is_object()) bad(source, "params", "expected an object (got " + p.dump() + ")");
  std::set<std::string> known;
  for (const auto& k : f.params) {
    check_key(p, k, source, f.name);
    known.insert(k.name);
  }
  for (const auto& k : f.optional) {
    if (p.contains(k.name)) check_key(p, k, source, f.name);
    known.insert(k.name);
  }
  for (const auto& [k, v] : p.items()) {
    if (!known.count(k) && !POSENC_MUTANT("golden_manifest_unknown_param_allowed")) {
      bad(source, "params." + k,
          std::string("unexpected: not a parameter of a ") + f.name +
              " manifest (is \"scheme\" right?)");
    }
  }
  if (f.rules) f.rules(c, p, source);
  for (const auto& r : f.shapes) check_shape(c, r, p, source);
  if (*f.dtype_tensor) {
    const TensorSpec* t = find_tensor(c, f.dtype_tensor);
    if (t && dtype_short(t->dtype) != p.at("dtype").get<std::string>()) {
      bad(source, std::string("tensor \"") + f.dtype_tensor + "\" dtype",
          "expected params.dtype " + p.at("dtype").dump() + ", got \"" +
              std::string(dtype_short(t->dtype)) + "\"");
    }
  }
}

// ---- kv_cache ---------------------------------------------------------------------------------

void kv_rules(const CaseSpec& c, const Json& p, const std::string& source) {
  attention_rules(c, p, source);
  const std::int64_t cap = pint(p, "capacity"), window = pint(p, "window"),
                     sinks = pint(p, "n_sink");
  const std::int64_t H = pint(p, "n_heads"), d = pint(p, "head_dim");
  if (cap > 0 && !POSENC_MUTANT("golden_trace_cache_rows_unchecked")) {
    rule(pint(p, "cache_rows") == cap, source, "params.cache_rows",
         "expected the capacity " + std::to_string(cap) + " (got " + p.at("cache_rows").dump() +
             ")");
  }
  rule(window == 0 || cap == 0 || cap >= window, source, "params.capacity",
       "expected >= window " + std::to_string(window) + " (got " + std::to_string(cap) + ")");
  if (sinks > 0) {
    rule(cap > sinks, source, "params.capacity",
         "expected > n_sink " + std::to_string(sinks) + " (got " + std::to_string(cap) + ")");
    rule(window == 0, source, "params.window",
         "expected 0 with attention sinks (got " + std::to_string(window) + ")");
    rule(!p.contains("chunk"), source, "params.chunk",
         "unexpected with attention sinks: a sink cache renumbers positions");
  }
  const Json& e = c.manifest.at("encoding");
  if (!e.is_object()) bad(source, "encoding", "expected an object (got " + e.dump() + ")");
  const Key kind = string("kind", "nope|rope|alibi|t5_bias|learned|sinusoidal");
  check_key(e, kind, source, "kv_cache", "encoding.");
  const std::string k = e.at("kind").get<std::string>();
  if (k == "rope") {
    rule(e.value("head_dim", Json()) == p.at("head_dim"), source, "encoding.head_dim",
         "expected params.head_dim " + p.at("head_dim").dump() + " (got " +
             e.value("head_dim", Json()).dump() + ")");
  }
  if (k == "t5_bias") {
    rule(e.value("num_buckets", Json()).is_number_integer(), source, "encoding.num_buckets",
         "expected an integer");
    Json q = {{"n", e.at("num_buckets")}, {"H", H}};
    check_shape(c, {"t5_table", {"n", "H"}, true}, q, source);
  }
  if (k == "learned") {
    rule(e.value("rows", Json()).is_number_integer(), source, "encoding.rows",
         "expected an integer");
    std::int64_t hd = 0;
    rule(!__builtin_mul_overflow(H, d, &hd), source, "params.head_dim",
         "n_heads * head_dim overflows");
    Json q = {{"n", e.at("rows")}, {"Hd", hd}};
    check_shape(c, {"learned_table", {"n", "Hd"}, true}, q, source);
  }
  check_shape(c, {"sink_logits", {"H"}, false}, Json{{"H", H}}, source);  // GPT-OSS, optional
  check_kv_trace(c, source);
}

std::string step_name(std::size_t s) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "s%02zu", s);
  return buf;
}

/// The "inputs" or "expected" list of a step: names of tensors of that manifest list, each of
/// its own step and listed once; returns the suffixes after "sNN.".
std::set<std::string> step_tensors(const CaseSpec& c, const Json& js, const char* list,
                                   const std::string& sn, const std::string& w,
                                   std::set<std::string>* claimed, const std::string& source) {
  const std::string key = w + "." + list;
  if (!js.contains(list) || !js.at(list).is_array())
    bad(source, key, "expected a list of tensor names");
  const auto& pool = std::string(list) == "inputs" ? c.inputs : c.expected;
  std::set<std::string> out;
  for (const auto& n : js.at(list)) {
    if (!n.is_string()) bad(source, key, "expected tensor names (got " + n.dump() + ")");
    const std::string name = n.get<std::string>();
    if (name.rfind(sn + ".", 0) != 0)
      bad(source, key, "\"" + name + "\" is not a tensor of step " + sn);
    bool listed = false;
    for (const auto& t : pool) listed |= t.name == name;
    if (!listed) bad(source, key, "\"" + name + "\" is not in the manifest's " + list);
    if (!claimed->insert(name).second) bad(source, key, "\"" + name + "\" is listed twice");
    out.insert(name.substr(sn.size() + 1));
  }
  return out;
}

/// The step tensor sNN.<role>: shape and dtype.
void step_shape(const CaseSpec& c, const std::string& name, const std::vector<std::int64_t>& shape,
                const char* dims, const std::string& dtype, const std::string& source) {
  const TensorSpec* t = find_tensor(c, name);
  if (t == nullptr) return;  // step_tensors has checked that every listed name exists
  if (t->shape != shape) {
    bad(source, "tensor \"" + name + "\" shape",
        std::string("expected ") + dims + " = " + shape_text(shape) +
            " from params and the step's columns, got " + shape_text(t->shape));
  }
  if (dtype_short(t->dtype) != dtype) {
    bad(source, "tensor \"" + name + "\" dtype",
        "expected \"" + dtype + "\", got \"" + std::string(dtype_short(t->dtype)) + "\"");
  }
}

std::int64_t step_int(const Json& js, const char* key, std::int64_t lo, const std::string& w,
                      const std::string& source) {
  const Json v = js.value(key, Json());
  if (!v.is_number_integer() ||
      (v.is_number_unsigned() && v.get<std::uint64_t>() > (std::uint64_t{1} << 62)) ||
      v.get<std::int64_t>() < lo) {
    bad(source, w + "." + key,
        "expected an integer >= " + std::to_string(lo) + " (got " + v.dump() + ")");
  }
  return v.get<std::int64_t>();
}

void check_kv_trace(const CaseSpec& c, const std::string& source) {
  // params, encoding and the block's presence are checked (check_form, kv_rules) before
  const Json& m = c.manifest;
  const Json& p = m.at("params");
  const std::int64_t B = pint(p, "batch"), H = pint(p, "n_heads"), Hkv = pint(p, "n_kv_heads");
  const std::int64_t d = pint(p, "head_dim"), dv = pint(p, "value_dim"), C = pint(p, "cache_rows");
  const std::string dt = p.at("dtype").get<std::string>();
  const Json& tr = m.at("trace");
  if (!tr.is_object() || !tr.contains("steps") || !tr.at("steps").is_array() ||
      tr.at("steps").empty()) {
    bad(source, "trace.steps", "expected a non-empty list of steps");
  }
  const Json& steps = tr.at("steps");
  std::set<std::string> claimed;
  std::int64_t columns = 0;
  static const std::set<std::string> kinds = {"prefill", "batch", "decode", "verify", "shift"};
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const Json& js = steps[i];
    const std::string w = "trace.steps[" + std::to_string(i) + "]";
    if (!js.is_object()) bad(source, w, "expected an object");
    const Json idx = js.value("index", Json());
    if ((!idx.is_number_integer() || idx.get<std::int64_t>() != static_cast<std::int64_t>(i)) &&
        !POSENC_MUTANT("golden_trace_step_order_unchecked")) {
      bad(source, w + ".index",
          "expected " + std::to_string(i) +
              " (step indexes increase by one from 0: none "
              "repeated, reversed or missing; got " +
              idx.dump() + ")");
    }
    const std::string sn = step_name(i);
    if (js.value("name", Json()) != Json(sn)) {
      bad(source, w + ".name",
          "expected \"" + sn + "\" (got " + js.value("name", Json()).dump() + ")");
    }
    const Json kj = js.value("kind", Json());
    const std::string kind = kj.is_string() ? kj.get<std::string>() : "";
    if (!kinds.count(kind) && !POSENC_MUTANT("golden_trace_step_kind_unchecked")) {
      bad(source, w + ".kind",
          "expected prefill, batch, decode, verify or shift (got " + kj.dump() + ")");
    }
    if (i == 0 && kind != "prefill" && kind != "batch") {
      bad(source, w + ".kind",
          "expected prefill or batch: the first step appends (got " + kj.dump() + ")");
    }
    if (i > 0 && kind == "prefill") bad(source, w + ".kind", "a prefill is the first step only");
    if (js.contains("note") && !js.at("note").is_string())
      bad(source, w + ".note", "expected a string");
    const auto ins = step_tensors(c, js, "inputs", sn, w, &claimed, source);
    const auto exs = step_tensors(c, js, "expected", sn, w, &claimed, source);
    for (const char* r : {"cache_positions", "cache_k"}) {
      if (!exs.count(r)) bad(source, w + ".expected", "missing " + sn + "." + r);
    }
    step_shape(c, sn + ".cache_positions", {B, C}, "[batch, cache_rows]", "i64", source);
    step_shape(c, sn + ".cache_k", {B, C, Hkv, d}, "[batch, cache_rows, n_kv_heads, head_dim]", dt,
               source);
    if (kind == "shift") {
      const std::int64_t keep = step_int(js, "n_keep", 0, w, source);
      const std::int64_t discard = step_int(js, "n_discard", 1, w, source);
      if (keep > C || discard > C - keep) {
        bad(source, w + ".n_discard",
            "expected n_keep + n_discard <= cache_rows " + std::to_string(C) + " (got " +
                std::to_string(keep) + " + " + std::to_string(discard) + ")");
      }
      if (js.contains("columns"))
        bad(source, w + ".columns", "unexpected: a shift step appends no columns");
      if (!ins.empty()) bad(source, w + ".inputs", "expected none: a shift step has no inputs");
      if (exs.size() != 2)
        bad(source, w + ".expected", "expected the cache only (cache_positions, cache_k)");
      continue;
    }
    const std::int64_t T = step_int(
        js, "columns", POSENC_MUTANT("golden_trace_columns_unchecked") ? -1000 : 1, w, source);
    if (kind == "decode" && T != 1)
      bad(source, w + ".columns", "expected 1 for a decode step (got " + std::to_string(T) + ")");
    if (js.contains("n_keep") || js.contains("n_discard"))
      bad(source, w, "unexpected n_keep / n_discard: not a shift step");
    if (js.contains("first_position")) step_int(js, "first_position", 0, w, source);
    if (__builtin_add_overflow(columns, T, &columns))
      bad(source, w + ".columns", "the columns add up beyond 2^63");
    for (const char* r : {"q", "k", "v"}) {
      if (!ins.count(r)) bad(source, w + ".inputs", "missing " + sn + "." + r);
    }
    for (const char* r : {"positions", "out"}) {
      if (!exs.count(r)) bad(source, w + ".expected", "missing " + sn + "." + r);
    }
    for (const auto& r : ins) {
      if (r != "q" && r != "k" && r != "v" && r != "valid")
        bad(source, w + ".inputs", "unexpected " + sn + "." + r);
    }
    for (const auto& r : exs) {
      if (r != "positions" && r != "slots" && r != "out" && r != "cache_positions" &&
          r != "cache_k") {
        bad(source, w + ".expected", "unexpected " + sn + "." + r);
      }
    }
    step_shape(c, sn + ".q", {B, T, H, d}, "[batch, columns, n_heads, head_dim]", dt, source);
    step_shape(c, sn + ".k", {B, T, Hkv, d}, "[batch, columns, n_kv_heads, head_dim]", dt, source);
    step_shape(c, sn + ".v", {B, T, Hkv, dv}, "[batch, columns, n_kv_heads, value_dim]", dt,
               source);
    step_shape(c, sn + ".valid", {B, T}, "[batch, columns]", "i32", source);
    step_shape(c, sn + ".positions", {B, T}, "[batch, columns]", "i64", source);
    step_shape(c, sn + ".slots", {B, T}, "[batch, columns]", "i64", source);
    step_shape(c, sn + ".out", {B, T, H, dv}, "[batch, columns, n_heads, value_dim]", dt, source);
  }
  if (pint(p, "capacity") == 0 && columns != C) {
    bad(source, "params.cache_rows",
        "expected the steps' columns in all, " + std::to_string(columns) +
            ", for a cache without capacity (got " + std::to_string(C) + ")");
  }
  for (const auto* list : {&c.inputs, &c.expected}) {
    for (const auto& t : *list) {
      const bool step_like =
          t.name.size() > 1 && t.name[0] == 's' && t.name[1] >= '0' && t.name[1] <= '9';
      if (step_like && !claimed.count(t.name))
        bad(source, "tensor \"" + t.name + "\"", "belongs to no trace step");
    }
  }
}

}  // namespace

std::vector<std::string> manifest_schemes() {
  std::vector<std::string> out;
  for (const auto& [slug, f] : forms()) out.push_back(slug);
  return out;
}

void check_manifest_schema(const CaseSpec& c, const std::string& source) {
  const auto& table = forms();
  const auto it = table.find(c.scheme);
  if (it == table.end()) {
    std::string known;
    for (const auto& [slug, f] : table) known += (known.empty() ? "" : ", ") + slug;
    bad(source, "scheme", "\"" + c.scheme + "\" is not a posenc scheme (scheme must be one of: " +
                              known + ")");
  }
  for (const Form& f : it->second) {
    if (f.matches == nullptr || f.matches(c.manifest)) {
      check_form(c, f, source);
      return;
    }
  }
}

void check_kv_trace_values(const CaseSpec& c, TensorSource& g, const std::string& source) {
  if (c.scheme != "kv_cache" || POSENC_MUTANT("golden_trace_values_unchecked")) return;
  const Json& p = c.manifest.at("params");
  const std::int64_t B = pint(p, "batch"), C = pint(p, "cache_rows");
  const bool strict = c.result == "valid";
  auto fail = [&](const std::string& name, std::int64_t b, std::int64_t i, const std::string& what,
                  std::int64_t got) {
    bad(source, "tensor \"" + name + "\" [" + std::to_string(b) + ", " + std::to_string(i) + "]",
        "expected " + what + " (got " + std::to_string(got) + ")");
  };
  for (const auto& js : c.manifest.at("trace").at("steps")) {
    const std::string sn = js.at("name").get<std::string>();
    const std::string cp = sn + ".cache_positions";
    const Tensor cache = g.load(cp);
    for (std::int64_t b = 0; b < B; ++b) {
      bool empty = false;
      for (std::int64_t r = 0; r < C; ++r) {
        const std::int64_t v = cache.get_i64(b * C + r);
        if (empty && v != -1)
          fail(cp, b, r, "-1: the cached positions come first, then empty rows", v);
        if (v < 0 && v != -1) fail(cp, b, r, "a position >= 0, or -1 for an empty row", v);
        empty |= v == -1;
        if (empty || r == 0) continue;
        const std::int64_t prev = cache.get_i64(b * C + r - 1);
        if (v < prev || (strict && v == prev)) {
          fail(cp, b, r,
               std::string(strict ? "more than" : "at least") + " the row before, " +
                   std::to_string(prev) + " (cached positions ascend)",
               v);
        }
      }
    }
    if (js.at("kind").get<std::string>() == "shift") continue;
    const std::int64_t T = js.at("columns").get<std::int64_t>();
    std::vector<std::int64_t> valid(static_cast<std::size_t>(B * T), 1);
    if (g.contains(sn + ".valid")) {
      const Tensor t = g.load(sn + ".valid");
      for (std::int64_t i = 0; i < B * T; ++i) {
        valid[i] = t.get_i64(i);
        if (valid[i] != 0 && valid[i] != 1) fail(sn + ".valid", i / T, i % T, "0 or 1", valid[i]);
      }
    }
    const Tensor pos = g.load(sn + ".positions");
    for (std::int64_t i = 0; i < B * T; ++i) {
      const std::int64_t v = pos.get_i64(i);
      if (valid[i] ? v < 0 : v != -1) {
        fail(sn + ".positions", i / T, i % T,
             valid[i] ? "a position >= 0" : "-1 at a padding column", v);
      }
    }
    if (!g.contains(sn + ".slots")) continue;
    const Tensor slots = g.load(sn + ".slots");
    for (std::int64_t i = 0; i < B * T; ++i) {
      const std::int64_t v = slots.get_i64(i);
      if (valid[i] ? (v < 0 || v >= C) : v != -1) {
        fail(sn + ".slots", i / T, i % T,
             valid[i] ? "a slot in [0, cache_rows " + std::to_string(C) + ")"
                      : "-1 at a padding column",
             v);
      }
    }
  }
}

}  // namespace posenc::golden
