// Helpers every generator and built-in engine shares: oracle values (mp50) rounded once to a
// stored dtype, the mp50/mp100 cross-check that makes a generator fail loudly, and engine
// outputs (float) rounded to the case dtype.
#pragma once
#include <cstdint>
#include <map>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "golden/format.hpp"
#include "golden/manifest.hpp"
#include "reference/common/rounding.hpp"
#include "reference/common/scalar.hpp"

namespace posenc::golden {

/// Oracle values correctly rounded (once) to dtype t.
inline Tensor target_tensor(const std::string& name, DType t, std::vector<std::int64_t> shape,
                            const std::vector<mp50>& v) {
  if (t == DType::kF32) {
    std::vector<float> f;
    for (const auto& x : v) f.push_back(round_to_f32(x));
    return tensor_from_f32(name, std::move(shape), f);
  }
  if (t == DType::kF64) {
    std::vector<double> d;
    for (const auto& x : v) d.push_back(round_to_f64(x));
    return tensor_from_f64(name, std::move(shape), d);
  }
  std::vector<std::uint16_t> b;
  for (const auto& x : v) b.push_back(t == DType::kBF16 ? round_to_bf16(x) : round_to_f16(x));
  return tensor_from_bits16(name, t, std::move(shape), b);
}

/// Throws unless mp50 and mp100 round every value to the same double and the same dtype-t value.
inline void cross_check(const std::string& id, const std::string& name, DType t,
                        const std::vector<mp50>& a, const std::vector<mp100>& b) {
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (round_to_f64(a[i]) != round_to_f64(b[i]) ||
        round_to_dtype(a[i], t) != round_to_dtype(b[i], t)) {
      throw std::runtime_error("generate: " + id + ": mp50 and mp100 round " + name + "[" +
                               std::to_string(i) + "] differently (" + a[i].str(40) + " vs " +
                               b[i].str(40) + ")");
    }
  }
}

/// Oracle values rounded to double (the `.exact` companions).
inline std::vector<double> to_f64(const std::vector<mp50>& v) {
  std::vector<double> d;
  d.reserve(v.size());
  for (const auto& x : v) d.push_back(round_to_f64(x));
  return d;
}

/// An engine's float output rounded to the case dtype (nearest even).
inline Tensor engine_tensor(const std::string& name, DType t, std::vector<std::int64_t> shape,
                            const std::vector<float>& v) {
  if (t == DType::kF32) return tensor_from_f32(name, std::move(shape), v);
  std::vector<std::uint16_t> b;
  for (float x : v) b.push_back(t == DType::kBF16 ? float_to_bf16(x) : double_to_f16(x));
  return tensor_from_bits16(name, t, std::move(shape), b);
}

/// The keys every manifest starts with (schema, version, generator, id, scheme, variant,
/// result, level, description); generators add the scheme's own keys.
inline nlohmann::json manifest_header(const std::string& id, const std::string& scheme,
                                      const std::string& variant, const std::string& result,
                                      int level, const std::string& description = "") {
  nlohmann::json m;
  m["schema"] = kSchemaName;
  m["version"] = kSchemaVersion;
  m["generator"] = {{"name", kGeneratorName}, {"version", kGeneratorVersion}};
  m["id"] = id;
  m["scheme"] = scheme;
  m["variant"] = variant;
  m["result"] = result;
  m["level"] = level;
  m["description"] = description;
  return m;
}

/// The manifest's "oracle" block for values computed in mp50 and cross-checked in mp100.
inline nlohmann::json mp_oracle_json(
    const std::string& rounding = "correct rounding to nearest-even, once (round-to-odd for bf16)") {
  return {{"backend", "mpfr (boost::multiprecision mpfr_float_backend<50>, et_off)"},
          {"precision_bits", std::numeric_limits<mp50>::digits},
          {"cross_check_bits", std::numeric_limits<mp100>::digits},
          {"rounding", rounding}};
}

/// Angle epsilon of the fp32-angles profile (derivations in rope_golden.cpp and
/// sinusoidal_golden.cpp): 4 eps_f32, i.e. 8u of angle error per unit of |phi| and of bound.
inline constexpr double kPhaseEpsF32 = 4 * 0x1p-23;

/// An expected tensor with companions <name>.exact, .cond (conditioned checks) and .phase
/// (when `phase`: the fp32-angles profile then adds kPhaseEpsF32 * phase to the scale).
inline TensorSpec expected_spec(const std::string& name, const std::string& stage, DType t,
                                std::vector<std::int64_t> shape, const std::string& kind,
                                std::map<std::string, double> bounds, bool phase) {
  TensorSpec s;
  s.name = name;
  s.stage = stage;
  s.dtype = t;
  s.shape = std::move(shape);
  s.check.kind = kind;
  s.check.bounds = std::move(bounds);
  s.exact = name + ".exact";
  if (kind == "conditioned") s.cond = name + ".cond";
  if (phase) {
    s.phase = name + ".phase";
    s.check.phase_eps = {{"fp32-angles", kPhaseEpsF32}};
  }
  return s;
}

/// Adds tensors_file, inputs and expected (with their SHA-256 already set) to a manifest.
inline void manifest_add_tensors(nlohmann::json& m, const std::string& id,
                                 const std::vector<TensorSpec>& inputs,
                                 const std::vector<TensorSpec>& expected) {
  m["tensors_file"] = id + ".safetensors";
  nlohmann::json jin = nlohmann::json::array(), jex = nlohmann::json::array();
  for (const auto& s : inputs) jin.push_back(tensor_spec_to_json(s, false));
  for (const auto& s : expected) jex.push_back(tensor_spec_to_json(s, true));
  m["inputs"] = jin;
  m["expected"] = jex;
}

}  // namespace posenc::golden
