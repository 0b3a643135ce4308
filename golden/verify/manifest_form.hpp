// What a scheme's manifest form is made of (golden/verify/manifest_check.hpp checks a manifest
// against its scheme's forms). Each scheme's home holds its forms in
// golden/schemes/<slug>/<slug>_form.cpp, `std::vector<form::Form> <slug>_forms()`, compiled into
// posenc::verify; CMake lists the homes for manifest_check.cpp (posenc_form_list.inc), so the
// forms of a new scheme are found without editing this library.
//
// A form: the params keys (each with its kind and range or choices), the optional ones, the
// required top-level blocks, the tensors' shapes as expressions of params keys ("rotary_dim/2",
// "r_max-r_min+1"), the tensor whose dtype is params.dtype, and a function for the rules a table
// cannot say. A scheme with several forms lists them most specific first; `matches` picks one.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "golden/format/manifest.hpp"

namespace posenc::golden::form {

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

inline Key integer(const char* name, double lo = 0) { return {name, Kind::kInt, lo}; }
inline Key signed_integer(const char* name) { return {name, Kind::kInt, -1e15}; }
inline Key number(const char* name, double lo = 0) { return {name, Kind::kNumber, lo}; }
inline Key boolean(const char* name) { return {name, Kind::kBool}; }
inline Key string(const char* name, const char* choices = "") {
  return {name, Kind::kString, 0, 0, choices};
}
inline Key object(const char* name) { return {name, Kind::kObject}; }
inline Key dtype_key() { return {"dtype", Kind::kDType}; }

/// A tensor's shape as params expressions; `required`: the manifest must list the tensor.
struct ShapeRule {
  const char* tensor;
  std::vector<const char*> dims;
  bool required = false;
};

using Rules = void (*)(const CaseSpec& c, const nlohmann::json& p, const std::string& source);

struct Form {
  const char* name;
  bool (*matches)(const nlohmann::json& manifest);  // nullptr: the scheme's only (or last) form
  bool has_params = true;                           // false: the manifest must have no "params"
  std::vector<Key> params, optional;
  std::vector<const char*> blocks;  // required top-level keys
  std::vector<ShapeRule> shapes;
  const char* dtype_tensor = "";  // tensor whose dtype is params.dtype
  Rules rules = nullptr;
};

inline std::vector<Key> operator+(std::vector<Key> a, const std::vector<Key>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}
inline std::vector<ShapeRule> operator+(std::vector<ShapeRule> a, const std::vector<ShapeRule>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

/// GoldenFileError "<source>: <key>: <what>".
[[noreturn]] void bad(const std::string& source, const std::string& key, const std::string& what);
/// bad(source, key, what) unless ok.
void rule(bool ok, const std::string& source, const std::string& key, const std::string& what);
/// Checks one key of `p` (under `block`, "params." by default) against k; `form` names the form.
void check_key(const nlohmann::json& p, const Key& k, const std::string& source,
               const std::string& form, const char* block = "params.");
/// Value of an integer params key already checked by check_key.
inline std::int64_t pint(const nlohmann::json& p, const char* key) {
  return p.at(key).get<std::int64_t>();
}
/// The input or expected tensor of that name, nullptr if the manifest lists none.
const TensorSpec* find_tensor(const CaseSpec& c, const std::string& name);
/// bad() unless tensor r.tensor (when listed; it must be when r.required) has the shape r's
/// expressions give on `p`.
void check_shape(const CaseSpec& c, const ShapeRule& r, const nlohmann::json& p,
                 const std::string& source);
/// "[2, 3]".
std::string shape_text(const std::vector<std::int64_t>& s);

// Shared by several schemes' forms (golden/verify/manifest_check.cpp).
/// Attention over positions: heads, head and value widths, tq, tk, offset, window, causal,
/// scale; q, k, v, out, probs and the position tensors.
std::vector<Key> attention_keys();
std::vector<ShapeRule> attention_shapes();
void attention_rules(const CaseSpec& c, const nlohmann::json& p, const std::string& source);
/// RoPE's rotation: tokens, heads, head and rotary widths, base, attention factor, layout.
std::vector<Key> rope_keys();
std::vector<ShapeRule> rope_shapes();
void rope_rules(const CaseSpec& c, const nlohmann::json& p, const std::string& source);
/// A relative-distance range [r_min, r_max] (the bucket forms).
void range_rules(const CaseSpec& c, const nlohmann::json& p, const std::string& source);

}  // namespace posenc::golden::form
