// Checked reads of a model config's keys, shared by the HF config reader (hf_config.cpp) and the
// model-plan reader (model_plan.cpp): every number is checked against its documented range
// (docs/own-model.md) on the value as the JSON holds it, and a message names the file, the key
// path and the value as the file writes it ("config.json: sliding_window = -1: must be ...").
// Internal to golden/cases.
#pragma once
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "optimized/rope.hpp"
#include "reference/common/errors.hpp"

namespace posenc::golden::config_read {

using Json = nlohmann::json;

/// The text of each float of the document by key path ("rope_scaling.factor",
/// "rope_scaling.short_factor[3]"); integers print exactly from the parsed value.
using RawNumbers = std::map<std::string, std::string>;

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
inline constexpr IntRange kHeads{1, 65536, "an integer in [1, 65536]"};
inline constexpr IntRange kHeadDim{1, 16384, "an integer in [1, 16384]"};
inline constexpr IntRange kNopeDim{0, 16384, "an integer in [0, 16384]"};
inline constexpr IntRange kHidden{1, std::int64_t{1} << 24, "an integer in [1, 16777216]"};
inline constexpr IntRange kLength{1, optimized::kRopeMaxPosition,
                           "an integer in [1, 268435456] (2^28, the kernel's position limit)"};
inline constexpr IntRange kDynamicLength{1, optimized::kRopeMaxPosition / 2,
                                  "an integer in [1, 134217728] for dynamic scaling (2^27: its longest "
                                  "call ends at 2L - 1, within the kernel's 2^28)"};
inline constexpr IntRange kLongRopeL0{2, optimized::kRopeMaxPosition, "an integer in [2, 268435456] for longrope"};
inline constexpr Range kBase{1.0, 1e15, true, "a number in (1, 1e15]"};
inline constexpr Range kPartial{0.0, 1.0, true, "a number in (0, 1]"};
inline constexpr Range kFactor{0.001, 65536.0, false, "a number in [0.001, 65536]"};
inline constexpr Range kPositive{0.0, 65536.0, true, "a number in (0, 65536]"};
inline constexpr Range kAttention{0.0, 100.0, true, "a number in (0, 100]"};
inline constexpr Range kMscale{0.0, 100.0, false, "a number in [0, 100] (0: absent, as HF)"};
inline constexpr Range kBeta{0.0, 100.0, false, "a number in [0, 100]"};

/// The file's name and the raw number texts: what every message needs.
struct Ctx {
  const std::string& source;
  const RawNumbers& raw;
  std::string prefix = {};  // "text_config." when the model's keys are nested there

  /// The key path as the file spells it (with the nesting prefix).
  std::string full(const std::string& path) const { return prefix + path; }

  [[noreturn]] void fail(const std::string& what) const { throw GoldenFileError(source + ": " + what); }
  /// The value as the file writes it (strings and objects as JSON, at most 64 characters).
  std::string shown(const Json& v, const std::string& path) const {
    if (v.is_number_float()) {
      const auto it = raw.find(full(path));
      if (it != raw.end()) return it->second;
    }
    std::string d = v.dump(-1, ' ', false, Json::error_handler_t::replace);
    if (d.size() > 64) d = d.substr(0, 61) + "...";
    return d;
  }
  /// "<file>: <path> = <value>: must be <what>"
  [[noreturn]] void range(const Json& v, const std::string& path, const std::string& what) const {
    fail(full(path) + " = " + shown(v, path) + ": must be " + what);
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
inline const Json* first_of(const Json& j, std::initializer_list<const char*> keys, std::string* which) {
  for (const char* k : keys) {
    if (j.contains(k) && !j.at(k).is_null()) {
      if (which) *which = k;
      return &j.at(k);
    }
  }
  return nullptr;
}

}  // namespace posenc::golden::config_read
