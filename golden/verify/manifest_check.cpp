// Checking a manifest against its scheme's forms: golden/verify/manifest_check.hpp. The forms
// themselves live in the schemes' homes (golden/schemes/<slug>/<slug>_form.cpp); the pieces they
// share are here (golden/verify/manifest_form.hpp).
#include "golden/verify/manifest_check.hpp"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "golden/verify/manifest_form.hpp"
#include "reference/common/errors.hpp"
#include "reference/common/mutant.hpp"

namespace posenc::golden {

// One line POSENC_FORM(<slug>) per home with a form, written by CMake when it configures
// (build/generated/posenc_form_list.inc).
#define POSENC_FORM(slug) std::vector<form::Form> slug##_forms();
#include "posenc_form_list.inc"
#undef POSENC_FORM

namespace form {

using Json = nlohmann::json;

void bad(const std::string& source, const std::string& key, const std::string& what) {
  throw GoldenFileError(source + ": " + key + ": " + what);
}

void rule(bool ok, const std::string& source, const std::string& key, const std::string& what) {
  if (!ok) bad(source, key, what);
}

namespace {

std::string fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}


}  // namespace

void check_key(const Json& p, const Key& k, const std::string& source, const std::string& form,
               const char* block) {
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

const TensorSpec* find_tensor(const CaseSpec& c, const std::string& name) {
  for (const auto* list : {&c.inputs, &c.expected}) {
    for (const auto& t : *list) {
      if (t.name == name) return &t;
    }
  }
  return nullptr;
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

namespace {

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

}  // namespace

std::string shape_text(const std::vector<std::int64_t>& s) {
  std::string t = "[";
  for (std::size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + "]";
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


}  // namespace form

namespace {

using namespace form;
using Json = nlohmann::json;

// ---- forms ------------------------------------------------------------------------------------

const std::map<std::string, std::vector<Form>>& forms() {
  static const std::map<std::string, std::vector<Form>> table = {
#define POSENC_FORM(slug) {#slug, slug##_forms()},
#include "posenc_form_list.inc"
#undef POSENC_FORM
  };
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
