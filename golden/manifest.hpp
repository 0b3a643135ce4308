// Golden case manifest (schema "posenc-golden", version 1): the parsed, validated view of the
// JSON that verify and check need, and helpers that generators use to write it.
//
// The JSON itself is documented in README.md ("File format"). Every expected tensor carries a
// check: kind (exact | ulp | conditioned), a bound per tolerance profile, and the names of its
// companion tensors in the same safetensors file:
//   <name>.exact  f64, the oracle value (mp50 rounded to double) the error is measured from
//   <name>.cond   f32 or f64, the condition scale c of a conditioned check
//   <name>.phase  f32 or f64, the angle sensitivity used by the fp32-angles profile
// Error of element j, in units of its scale:
//   ulp:          |y - y*| / (ulp_dtype(y*) + peps * phase_j)
//   conditioned:  |y - y*| / (eps_dtype * c_j + peps * phase_j)
// where peps is the profile's angle epsilon (0 for strict). An element passes when its error is
// <= the profile's bound; exact compares bit patterns.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "golden/format.hpp"
#include "reference/common/dtype.hpp"

namespace posenc::golden {

inline constexpr const char* kSchemaName = "posenc-golden";
inline constexpr int kSchemaVersion = 1;
inline constexpr const char* kGeneratorName = "posenc";
inline constexpr const char* kGeneratorVersion = "0.1.0";

/// Tolerance profiles (README "Profiles").
inline const std::vector<std::string>& profile_names() {
  static const std::vector<std::string> names = {"strict", "fp32-angles"};
  return names;
}

struct CheckSpec {
  std::string kind;                         // "exact", "ulp" or "conditioned"
  std::map<std::string, double> bounds;     // profile -> bound; "strict" always present
  std::map<std::string, double> phase_eps;  // profile -> angle epsilon; absent = 0
  double bound_for(const std::string& profile) const;
  double phase_eps_for(const std::string& profile) const;
};

/// How to print an index along one axis of an expected tensor.
struct AxisSpec {
  std::string name;            // "token", "head", "channel", "query", "key", "pair"
  std::string positions;       // input tensor with this axis' positions, or ""
  std::vector<int> pair_map;   // channel -> pair index (-1 = tail), or empty
  std::vector<std::string> labels;  // input tensors indexed along this axis, printed as "name v"
};

struct TensorSpec {
  std::string name;
  std::string stage;  // "input", "table", "rotated", "scores", ...
  DType dtype = DType::kF32;
  std::vector<std::int64_t> shape;
  std::string sha256;  // of the raw data bytes
  CheckSpec check;      // expected tensors only
  std::vector<AxisSpec> axes;
  std::string exact, cond, phase;  // companion tensor names ("" if none)
};

struct CaseSpec {
  std::string id, scheme, variant, result;
  std::vector<TensorSpec> inputs;
  std::vector<TensorSpec> expected;
  nlohmann::json manifest;
};

/// Parses and validates a manifest; GoldenFileError "<source>: ..." on any problem.
CaseSpec case_spec_from_json(const nlohmann::json& m, const std::string& source);
CaseSpec case_spec_read(const std::filesystem::path& manifest_path);

nlohmann::json tensor_spec_to_json(const TensorSpec& t, bool expected);

/// Canonical manifest text: 1-space indented JSON and a final newline (diffable, reproducible).
std::string manifest_text(const nlohmann::json& m);

/// "0x3ff0000000000000"-style bit pattern of a double, and of a float.
std::string hex_bits_f64(double v);
std::string hex_bits_f32(float v);

std::vector<std::int64_t> shape_of(const nlohmann::json& j);

}  // namespace posenc::golden
