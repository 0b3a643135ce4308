// Helpers every generator and built-in engine shares: oracle values (mp50) rounded once to a
// stored dtype, the mp50/mp100 cross-check that makes a generator fail loudly, and engine
// outputs (float) rounded to the case dtype.
#pragma once
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "golden/format/format.hpp"
#include "golden/format/manifest.hpp"
#include "golden/format/profiles.hpp"
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

/// An input tensor of dtype t from values the generator drew representable in t (so exact).
inline Tensor input_tensor(const std::string& name, DType t, std::vector<std::int64_t> shape,
                           const std::vector<double>& x) {
  return target_tensor(name, t, std::move(shape), std::vector<mp50>(x.begin(), x.end()));
}

/// cross_check of one element (index i of tensor `name`).
inline void cross_check_one(const std::string& id, const std::string& name, DType t, std::size_t i,
                            const mp50& a, const mp100& b) {
  const double a64 = round_to_f64(a), b64 = round_to_f64(b);
  if ((a64 != b64 && std::nextafter(a64, b64) != b64) || round_to_dtype(a, t) != round_to_dtype(b, t)) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "; as double %a vs %a", a64, b64);
    throw std::runtime_error("generate: " + id + ": mp50 and mp100 round " + name + "[" + std::to_string(i) +
                             "] differently (" + a.str(60) + " vs " + b.str(60) + buf + ")");
  }
}

/// Throws unless mp50 and mp100 round every value to the same dtype-t value and to doubles at
/// most one ulp apart. (The double is the `.exact` companion, which budgets read: an exact
/// value on a double midpoint, as a same-position score a^2 q.k with a rational a^2 can be,
/// is rounded the way mp50 sees it.)
inline void cross_check(const std::string& id, const std::string& name, DType t,
                        const std::vector<mp50>& a, const std::vector<mp100>& b) {
  for (std::size_t i = 0; i < a.size(); ++i) cross_check_one(id, name, t, i, a[i], b[i]);
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

/// Spec of an input tensor (stage "input"), SHA-256 included.
inline TensorSpec input_spec(const Tensor& t) {
  TensorSpec s;
  s.name = t.name;
  s.stage = "input";
  s.dtype = t.dtype;
  s.shape = t.shape;
  s.sha256 = sha256_hex(t.data);
  return s;
}

/// A profile's budget: `bound` times eps * cond (or ulp), `ulps` times ulp(y*) (conditioned
/// checks), plus the extra companion if the generator gives one for this profile.
inline ProfileBudget bound_of(double bound, double ulps = 0.0, std::string note = "") {
  ProfileBudget b;
  b.bound = bound;
  b.ulps = ulps;
  b.note = std::move(note);
  return b;
}

/// A profile that does not apply to a tensor, with the reason verify prints.
inline ProfileBudget not_applicable(std::string why) {
  ProfileBudget b;
  b.applies = false;
  b.not_applicable = std::move(why);
  return b;
}

/// For a tensor held in the target dtype t (an activation): why profile bf16 or f16 does not
/// apply to it, or "" when it does.
inline std::string activation_na(const std::string& profile, DType t) {
  if (profile == "bf16" && t != DType::kBF16) {
    return "the bf16 pipeline writes bf16 activations; this case's target is " +
           std::string(dtype_short(t)) + " (verify its _bf16 twin)";
  }
  if (profile == "f16" && t != DType::kF16) {
    return "the f16 pipeline writes f16 activations; this case's target is " +
           std::string(dtype_short(t)) + " (verify its _f16 twin, where one exists)";
  }
  return "";
}

/// Budgets of an exact check: the same bits under every profile. In a case with a target dtype
/// (case_dtype), bf16 and f16 apply only when it is theirs (their pipelines run their own
/// dtype's cases); a case without one (a slope or bucket table) is judged under every profile.
inline std::map<std::string, ProfileBudget> exact_budgets(std::optional<DType> case_dtype) {
  std::map<std::string, ProfileBudget> m;
  for (const auto& prof : profiles()) {
    const std::string na = case_dtype ? activation_na(prof.name, *case_dtype) : "";
    m[prof.name] = na.empty() ? bound_of(0.0) : not_applicable(na);
  }
  return m;
}

/// An expected tensor for add_expected: its spec (name, stage, dtype, shape, check kind and a
/// budget for every profile, axes), the oracle values, and what its budgets need.
struct ExpectedTensor {
  TensorSpec spec;
  std::vector<mp50> values;   // oracle values (rounded once to spec.dtype); or
  const Tensor* exact_tensor = nullptr;  // the expected tensor itself (exact checks)
  // Or values rounded elsewhere (the fast oracle, fast_rope.hpp): the target-dtype tensor and
  // the double roundings (the `.exact` companion), both correctly rounded from the oracle value.
  std::optional<Tensor> rounded;
  std::vector<double> exact64;
  std::vector<double> cond;   // condition scale (conditioned checks)
  std::map<std::string, std::vector<double>> extra;  // profile -> extra budget per element
  /// Saturation report (optional): the element's position and the largest deviation an
  /// arbitrary angle could cause; an element is saturated under a profile when its extra
  /// budget reaches 2 * amp (any angle passes).
  std::vector<std::int64_t> positions;
  std::vector<double> amp;
  struct Alternative {
    std::string name, description;
    std::vector<double> exact, cond;
  };
  std::vector<Alternative> alternatives;
};

/// An ExpectedTensor whose spec names the tensor (its budgets and data follow).
inline ExpectedTensor expected_tensor(std::string name, std::string stage, DType t,
                                      std::vector<std::int64_t> shape, CheckKind kind,
                                      std::vector<AxisSpec> axes = {}) {
  ExpectedTensor e;
  e.spec.name = std::move(name);
  e.spec.stage = std::move(stage);
  e.spec.dtype = t;
  e.spec.shape = std::move(shape);
  e.spec.check.kind = kind;
  e.spec.axes = std::move(axes);
  return e;
}

/// Scales and budgets are stored in float32 rounded up, so a budget never shrinks (a tiny
/// probability's scale does not flush to 0).
inline float f32_up(double v) {
  float f = static_cast<float>(v);
  if (static_cast<double>(f) < v) f = std::nextafter(f, INFINITY);
  return f;
}

/// Appends the expected tensor and its companions (exact f64; cond, extras and alternatives'
/// cond f32) to `tensors`; returns the spec with SHA-256, companions and extras filled in.
inline TensorSpec add_expected(std::vector<Tensor>* tensors, ExpectedTensor e) {
  TensorSpec s = std::move(e.spec);
  for (const auto& p : profiles()) {
    if (!s.check.profiles.count(p.name)) {
      throw std::logic_error("add_expected(" + s.name + "): no budget for profile " + p.name);
    }
  }
  auto push_companion = [&](const std::string& role, Tensor t) {
    s.companions.push_back({role, t.name, t.dtype, sha256_hex(t.data)});
    tensors->push_back(std::move(t));
  };
  auto f32v = [](const std::vector<double>& v) {
    std::vector<float> f(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) f[i] = f32_up(v[i]);
    return f;
  };
  if (e.exact_tensor) {
    Tensor t = *e.exact_tensor;
    t.name = s.name;
    s.sha256 = sha256_hex(t.data);
    tensors->push_back(std::move(t));
  } else if (e.rounded) {
    e.rounded->name = s.name;
    s.sha256 = sha256_hex(e.rounded->data);
    tensors->push_back(std::move(*e.rounded));
    push_companion("exact", tensor_from_f64(s.name + ".exact", s.shape, e.exact64));
    s.exact = s.name + ".exact";
  } else {
    tensors->push_back(target_tensor(s.name, s.dtype, s.shape, e.values));
    s.sha256 = sha256_hex(tensors->back().data);
    push_companion("exact", tensor_from_f64(s.name + ".exact", s.shape, to_f64(e.values)));
    s.exact = s.name + ".exact";
  }
  if (s.check.kind == CheckKind::kConditioned) {
    push_companion("cond", tensor_from_f32(s.name + ".cond", s.shape, f32v(e.cond)));
    s.cond = s.name + ".cond";
  }
  std::map<std::vector<double>, std::string> written;  // identical extras share one companion
  for (const auto& prof : profiles()) {  // in profile order: a shared extra keeps the first name
    auto found = e.extra.find(prof.name);
    if (found == e.extra.end()) continue;
    const std::string& profile = found->first;
    const std::vector<double>& values = found->second;
    ProfileBudget& b = s.check.profiles.at(profile);
    if (!b.applies) continue;
    b.extra = s.name + ".extra." + profile;
    if (!e.amp.empty() && !e.positions.empty()) {
      std::map<std::int64_t, std::pair<std::int64_t, std::int64_t>> count;  // pos -> (sat, all)
      for (std::size_t j = 0; j < values.size(); ++j) {
        auto& c = count[e.positions[j]];
        ++c.second;
        if (e.amp[j] > 0 && values[j] >= 2 * e.amp[j]) ++c.first;
      }
      for (const auto& [pos, c] : count) {
        if (c.first > 0) b.saturated[pos] = static_cast<double>(c.first) / c.second;
      }
    }
    if (auto it = written.find(values); it != written.end()) {
      b.extra = it->second;
      continue;
    }
    written.emplace(values, b.extra);
    push_companion("extra." + profile, tensor_from_f32(b.extra, s.shape, f32v(values)));
  }
  for (auto& a : e.alternatives) {
    const std::string base = s.name + ".alt." + a.name;
    push_companion("alt." + a.name + ".exact", tensor_from_f64(base + ".exact", s.shape, a.exact));
    if (s.check.kind == CheckKind::kConditioned) {
      push_companion("alt." + a.name + ".cond", tensor_from_f32(base + ".cond", s.shape, f32v(a.cond)));
    }
    s.alternatives.push_back({a.name, a.description, base + ".exact",
                              s.check.kind == CheckKind::kConditioned ? base + ".cond" : ""});
  }
  return s;
}

/// add_expected for a conditioned tensor too large to hold (a long call's scores): the elements
/// arrive one by one in C order and go straight to spill files (TensorSpill), each value
/// rounded at once; finish() gives the same tensors (names and bytes), spec (companions,
/// shared extras, saturation) as add_expected of the whole ExpectedTensor. Memory: one block
/// per companion and one count per position. An alternative whose exact values all equal the
/// tensor's is dropped (as the generators' add_alternative does).
class StreamedExpected {
 public:
  /// `spec` holds a budget for every profile; `extra_profiles` (in profiles() order) are the
  /// profiles whose extra every element carries, `alternatives` name and describe each
  /// alternative, in add()'s order.
  StreamedExpected(TensorSpec spec, std::vector<std::string> extra_profiles,
                   std::vector<std::pair<std::string, std::string>> alternatives)
      : spec_(std::move(spec)), extra_profiles_(std::move(extra_profiles)), alts_(std::move(alternatives)) {
    for (const auto& p : profiles()) {
      if (!spec_.check.profiles.count(p.name)) {
        throw std::logic_error("StreamedExpected(" + spec_.name + "): no budget for profile " + p.name);
      }
    }
    if (spec_.check.kind != CheckKind::kConditioned) throw std::logic_error("StreamedExpected: conditioned checks only");
    value_ = spill(spec_.name, spec_.dtype);
    exact_ = spill(spec_.name + ".exact", DType::kF64);
    cond_ = spill(spec_.name + ".cond", DType::kF32);
    for (const auto& prof : extra_profiles_) {
      const bool applies = spec_.check.profiles.at(prof).applies;
      extras_.push_back(applies ? spill(spec_.name + ".extra." + prof, DType::kF32) : nullptr);
    }
    equal_.assign(extra_profiles_.size() * extra_profiles_.size(), true);
    saturation_.resize(extra_profiles_.size());
    for (const auto& a : alts_) {
      alt_exact_.push_back(spill(spec_.name + ".alt." + a.first + ".exact", DType::kF64));
      alt_cond_.push_back(spill(spec_.name + ".alt." + a.first + ".cond", DType::kF32));
    }
    alt_differs_.assign(alts_.size(), false);
  }

  void add(const mp50& value, double cond, double amp, std::int64_t position, const double* extras,
           const double* alt_exact, const double* alt_cond) {
    const double exact = round_to_f64(value);
    if (spec_.dtype == DType::kF32) {
      value_->f32.push_back(round_to_f32(value));
    } else if (spec_.dtype == DType::kF64) {
      value_->f64.push_back(exact);
    } else {
      value_->b16.push_back(spec_.dtype == DType::kBF16 ? round_to_bf16(value) : round_to_f16(value));
    }
    exact_->f64.push_back(exact);
    cond_->f32.push_back(f32_up(cond));
    const std::size_t np = extra_profiles_.size();
    for (std::size_t p = 0; p < np; ++p) {
      if (!extras_[p]) continue;
      extras_[p]->f32.push_back(f32_up(extras[p]));
      for (std::size_t q = 0; q < p; ++q) equal_[p * np + q] = equal_[p * np + q] && extras[p] == extras[q];
      auto& c = saturation_[p][position];
      ++c.second;
      if (amp > 0 && extras[p] >= 2 * amp) ++c.first;
    }
    for (std::size_t a = 0; a < alts_.size(); ++a) {
      alt_exact_[a]->f64.push_back(alt_exact[a]);
      alt_cond_[a]->f32.push_back(f32_up(alt_cond[a]));
      if (alt_exact[a] != exact) alt_differs_[a] = true;
    }
    if (exact_->f64.size() >= kBlock) flush();
  }

  TensorSpec finish(std::vector<SpilledTensor>* out) {
    flush();
    TensorSpec s = std::move(spec_);
    auto put = [&](Spill& sp) {
      SpilledTensor t = sp.spill.finish();
      out->push_back(t);
      return t;
    };
    s.sha256 = put(*value_).sha256;
    s.companions.push_back({"exact", s.name + ".exact", DType::kF64, put(*exact_).sha256});
    s.exact = s.name + ".exact";
    s.companions.push_back({"cond", s.name + ".cond", DType::kF32, put(*cond_).sha256});
    s.cond = s.name + ".cond";
    const std::size_t np = extra_profiles_.size();
    std::vector<bool> written(np, false);
    for (std::size_t p = 0; p < np; ++p) {
      if (!extras_[p]) continue;
      ProfileBudget& b = s.check.profiles.at(extra_profiles_[p]);
      b.extra = s.name + ".extra." + extra_profiles_[p];
      for (const auto& [pos, c] : saturation_[p]) {
        if (c.first > 0) b.saturated[pos] = static_cast<double>(c.first) / c.second;
      }
      std::size_t same = np;  // the first written profile with the same values
      for (std::size_t q = 0; q < p && same == np; ++q) {
        if (written[q] && equal_[p * np + q]) same = q;
      }
      if (same != np) {
        b.extra = s.name + ".extra." + extra_profiles_[same];
        continue;
      }
      written[p] = true;
      s.companions.push_back({"extra." + extra_profiles_[p], b.extra, DType::kF32, put(*extras_[p]).sha256});
    }
    for (std::size_t a = 0; a < alts_.size(); ++a) {
      if (!alt_differs_[a]) continue;
      const std::string base = s.name + ".alt." + alts_[a].first;
      s.companions.push_back({"alt." + alts_[a].first + ".exact", base + ".exact", DType::kF64, put(*alt_exact_[a]).sha256});
      s.companions.push_back({"alt." + alts_[a].first + ".cond", base + ".cond", DType::kF32, put(*alt_cond_[a]).sha256});
      s.alternatives.push_back({alts_[a].first, alts_[a].second, base + ".exact", base + ".cond"});
    }
    return s;
  }

 private:
  static constexpr std::size_t kBlock = std::size_t{1} << 14;
  struct Spill {
    TensorSpill spill;
    DType dtype;
    std::vector<float> f32;
    std::vector<double> f64;
    std::vector<std::uint16_t> b16;
    Spill(const std::string& name, DType t, const std::vector<std::int64_t>& shape) : spill(name, t, shape), dtype(t) {}
    void flush() {
      Tensor t;
      if (dtype == DType::kF32) t = tensor_from_f32("block", {static_cast<std::int64_t>(f32.size())}, f32);
      else if (dtype == DType::kF64) t = tensor_from_f64("block", {static_cast<std::int64_t>(f64.size())}, f64);
      else t = tensor_from_bits16("block", dtype, {static_cast<std::int64_t>(b16.size())}, b16);
      spill.append(t.data);
      f32.clear();
      f64.clear();
      b16.clear();
    }
  };
  std::unique_ptr<Spill> spill(const std::string& name, DType t) {
    return std::make_unique<Spill>(name, t, spec_.shape);
  }
  void flush() {
    value_->flush();
    exact_->flush();
    cond_->flush();
    for (auto& e : extras_) {
      if (e) e->flush();
    }
    for (auto& e : alt_exact_) e->flush();
    for (auto& e : alt_cond_) e->flush();
  }

  TensorSpec spec_;
  std::vector<std::string> extra_profiles_;
  std::vector<std::pair<std::string, std::string>> alts_;
  std::unique_ptr<Spill> value_, exact_, cond_;
  std::vector<std::unique_ptr<Spill>> extras_, alt_exact_, alt_cond_;
  std::vector<bool> equal_, alt_differs_;
  std::vector<std::map<std::int64_t, std::pair<std::int64_t, std::int64_t>>> saturation_;
};

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
