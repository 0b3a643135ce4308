// Golden case manifest (schema "posenc-golden", version 2): the parsed, validated view of the
// JSON that verify and check need, and helpers that generators use to write it.
//
// The JSON itself is documented in docs/file-format.md. Every expected tensor carries a
// check: a kind (exact | ulp | conditioned) and, for every profile of golden/format/profiles.hpp,
// either a budget or the reason the profile does not apply. Companion tensors live in the same
// safetensors file and are listed, with dtype and SHA-256, under the tensor's "companions":
//   exact            f64, the oracle value y* (mp50 rounded to double)
//   cond             f32, the condition scale c of a conditioned check
//   extra.<profile>  f32, the profile's extra budget per element (absolute), when it has one;
//                    profiles with identical extras share the first one's companion
//   alt.<name>.exact, alt.<name>.cond   a declared alternative convention's values
// Budget of element j under profile P (bound b_P, ulps r_P, extra x_P):
//   ulp:          b_P * ulp_dtype(y*_j) + x_P[j]
//   conditioned:  b_P * eps_dtype * c_j + r_P * ulp_dtype(y*_j) + x_P[j]   (c_j > 0)
//                 x_P[j]                                                 (c_j = 0: exact)
//   exact:        bit patterns equal (b_P = 0)
// b_P * eps * c covers arithmetic whose error scales with the inputs (c is the sensitivity),
// r_P * ulp(y*) the rounding of the value itself to the stored dtype, x_P what grows with
// position or pair (angles, powers of a rounded base).
// An element passes when |y_j - y*_j| <= budget_j; verify reports |y - y*| / budget.
#pragma once
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "golden/format/format.hpp"
#include "reference/common/dtype.hpp"

namespace posenc::golden {

inline constexpr const char* kSchemaName = "posenc-golden";
inline constexpr int kSchemaVersion = 2;
inline constexpr const char* kGeneratorName = "posenc";
inline constexpr const char* kGeneratorVersion = "0.2.0";

/// One profile's budget for one expected tensor.
struct ProfileBudget {
  bool applies = true;
  std::string not_applicable;  // why the profile does not apply (when !applies)
  double bound = 0;            // multiple of eps * cond (conditioned) or of ulp (ulp)
  double ulps = 0;             // conditioned only: multiple of ulp(y*) (final roundings)
  std::string extra;           // companion with the per-element extra budget, or ""
  /// Positions where the budget admits any value for a share of the elements (every angle
  /// passes): position -> share of that position's elements, only shares > 0.
  std::map<std::int64_t, double> saturated;
  std::string note;            // one line on where the budget comes from (optional)
};

/// An expected tensor's check kind (the manifest's "exact", "ulp", "conditioned"): the strings
/// appear only where a manifest is read or written and where a report prints the kind.
enum class CheckKind { kExact, kUlp, kConditioned };
/// "exact", "ulp" or "conditioned".
std::string to_string(CheckKind kind);
/// The kind a manifest names; nullopt for an unknown name.
std::optional<CheckKind> parse_check_kind(std::string_view name);

struct CheckSpec {
  CheckKind kind = CheckKind::kExact;
  std::map<std::string, ProfileBudget> profiles;  // every profile of profiles() present
  /// The budget of a canonical profile name; InvalidArgument for an unknown one.
  const ProfileBudget& profile(const std::string& name) const;
};

/// How to print an index along one axis of an expected tensor.
struct AxisSpec {
  std::string name;            // "token", "head", "channel", "query", "key", "pair"
  std::string positions;       // input tensor with this axis' positions, or ""
  std::vector<int> pair_map;   // channel -> pair index (-1 = tail), or empty
  std::vector<std::string> labels;  // input tensors indexed along this axis, printed as "name v"
};

/// A companion tensor of an expected tensor (role "exact", "cond", "extra.fp32", ...).
struct CompanionSpec {
  std::string role, name;
  DType dtype = DType::kF64;
  std::string sha256;
};

/// A declared alternative convention for some elements (e.g. fully masked attention rows):
/// its values are the companions alt.<name>.exact / alt.<name>.cond; an engine may follow it.
struct AlternativeSpec {
  std::string name, description;
  std::string exact, cond;  // companion tensor names
};

struct TensorSpec {
  std::string name;
  std::string stage;  // "input", "table", "rotated", "scores", ...
  DType dtype = DType::kF32;
  std::vector<std::int64_t> shape;
  std::string sha256;  // of the raw data bytes
  CheckSpec check;     // expected tensors only
  std::vector<AxisSpec> axes;
  std::string exact, cond;                    // companion names ("" if none)
  std::vector<CompanionSpec> companions;      // every companion, with dtype and SHA-256
  std::vector<AlternativeSpec> alternatives;  // declared alternative conventions
};

/// Which stages can see a class of bug (manifest "detection"), so verify can say when the
/// outputs an engine gave cannot detect it.
struct DetectionSpec {
  std::string flag;
  std::vector<std::string> stages;
  std::string blind;  // why the other stages cannot see it
};

struct CaseSpec {
  std::string id, scheme, variant, result;
  std::string tensors_file;
  std::vector<TensorSpec> inputs;
  std::vector<TensorSpec> expected;
  std::vector<DetectionSpec> detection;
  /// Manifest "mistake_detection" (measured when the case is generated): per profile, each
  /// engine mistake of the scheme and the stages that show it under that profile.
  std::map<std::string, std::map<std::string, std::vector<std::string>>> mistake_stages;
  /// Manifest "control_detection" (negative controls, measured when the case is generated):
  /// per profile, the stages whose values under the right convention lie more than two of that
  /// profile's budgets from the known-wrong values at some element (an exact stage: that
  /// differ at all), so an output within budget of the right values cannot reproduce the
  /// wrong ones there. Given none of them, verify answers INCONCLUSIVE.
  std::map<std::string, std::vector<std::string>> control_stages;
  nlohmann::json manifest;
};

/// Parses and strictly validates a manifest; GoldenFileError "<source>: ..." naming the field.
CaseSpec case_spec_from_json(const nlohmann::json& m, const std::string& source);
CaseSpec case_spec_read(const std::filesystem::path& manifest_path);

nlohmann::json tensor_spec_to_json(const TensorSpec& t, bool expected);

/// Canonical manifest text: 1-space indented JSON and a final newline (diffable, reproducible).
std::string manifest_text(const nlohmann::json& m);

/// "0x3ff0000000000000"-style bit pattern of a double, and of a float.
std::string hex_bits_f64(double v);
std::string hex_bits_f32(float v);

std::vector<std::int64_t> shape_of(const nlohmann::json& j);

/// True when s is a plain file name: not empty, not "." or "..", no '/', '\\' or NUL.
bool is_plain_file_name(const std::string& s);

}  // namespace posenc::golden
