// Shared attention-case generator and engine. Formula: see reference/attention.hpp.
#include "golden/oracle_tensors.hpp"
#include "golden/attention_case.hpp"

#include <cmath>
#include <stdexcept>

#include "golden/prng.hpp"
#include "reference/common/errors.hpp"
#include "reference/common/rounding.hpp"

namespace posenc::golden {
namespace {

using Json = nlohmann::json;
using reference::AttentionParams;

const char* scale_name(reference::AttentionScale s) {
  switch (s) {
    case reference::AttentionScale::kInvSqrtHeadDim: return "inv_sqrt_head_dim";
    case reference::AttentionScale::kNone: return "none";
    case reference::AttentionScale::kGiven: return "given";
  }
  return "?";
}

/// Dyadic input exactly representable in the target dtype, in [-range, range].
double input_value(DType t, double range, std::uint64_t seed, std::uint64_t stream,
                   std::uint64_t i) {
  const int bits = t == DType::kBF16 ? 7 : (t == DType::kF16 ? 10 : 23);
  const std::int64_t lim = (std::int64_t{1} << bits) - 1;
  return range * std::ldexp(static_cast<double>(prng_int(seed, stream, i, lim)), -bits);
}

template <class Real>
struct Oracle {
  std::vector<Real> probs, out;  // [H, Tq, Tk], [Tq, H, dv]
  std::vector<std::uint8_t> visible;  // [H, Tq, Tk]
};

template <class Real>
Oracle<Real> oracle(const AttentionCaseDef& c, const std::vector<double>& q,
                    const std::vector<double>& k, const std::vector<double>& v,
                    const std::function<Real(int, std::int64_t, std::int64_t)>& bias) {
  const AttentionParams& p = c.params;
  reference::AttentionMask mask;
  mask.key_padding = c.key_padding;
  reference::AttentionHooks<Real> hooks;
  hooks.bias = bias;
  const std::vector<Real> qr(q.begin(), q.end()), kr(k.begin(), k.end()), vr(v.begin(), v.end());
  Oracle<Real> o;
  o.out.assign(static_cast<std::size_t>(c.tq * p.n_heads * p.value_dim), Real(0));
  const int group = p.n_heads / p.n_kv_heads;
  for (int h = 0; h < p.n_heads; ++h) {
    const auto r = reference::attention_head<Real>(
        p, mask, h, reference::attention_slice(qr, c.tq, p.n_heads, p.head_dim, h),
        reference::attention_slice(kr, c.tk, p.n_kv_heads, p.head_dim, h / group),
        reference::attention_slice(vr, c.tk, p.n_kv_heads, p.value_dim, h / group), hooks);
    for (std::int64_t i = 0; i < c.tq; ++i) {
      for (std::int64_t j = 0; j < c.tk; ++j) o.probs.push_back(r.probs(i, j));
      for (int cc = 0; cc < p.value_dim; ++cc) {
        o.out[static_cast<std::size_t>((i * p.n_heads + h) * p.value_dim + cc)] = r.out(i, cc);
      }
    }
    o.visible.insert(o.visible.end(), r.visible.begin(), r.visible.end());
  }
  return o;
}

}  // namespace

GoldenCase attention_case_generate(const AttentionCaseDef& c) {
  const AttentionParams& p = c.params;
  reference::attention_check(p, c.tq, c.tk, "attention_case_generate");
  const int H = p.n_heads, Hkv = p.n_kv_heads, d = p.head_dim, dv = p.value_dim;
  const DType t = c.dtype;
  std::vector<double> q(static_cast<std::size_t>(c.tq * H * d));
  std::vector<double> k(static_cast<std::size_t>(c.tk * Hkv * d));
  std::vector<double> v(static_cast<std::size_t>(c.tk * Hkv * dv));
  for (std::size_t i = 0; i < q.size(); ++i) q[i] = input_value(t, c.value_range, c.seed, 1, i);
  for (std::size_t i = 0; i < k.size(); ++i) k[i] = input_value(t, c.value_range, c.seed, 2, i);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = input_value(t, 1.0, c.seed, 3, i);

  const auto o50 = oracle<mp50>(c, q, k, v, c.bias50);
  const auto o100 = oracle<mp100>(c, q, k, v, c.bias100);
  cross_check(c.id, "probs", t, o50.probs, o100.probs);
  cross_check(c.id, "out", t, o50.out, o100.out);

  // Condition scales (double is ample for a scale).
  const double scale = static_cast<double>(reference::attention_scale<mp50>(p));
  const int group = H / Hkv;
  std::vector<double> p_cond(o50.probs.size()), o_cond(o50.out.size(), 0.0);
  for (int h = 0; h < H; ++h) {
    for (std::int64_t i = 0; i < c.tq; ++i) {
      std::vector<double> sens(static_cast<std::size_t>(c.tk));
      double mean_sens = 0;
      const std::size_t row = (static_cast<std::size_t>(h) * c.tq + i) * c.tk;
      for (std::int64_t j = 0; j < c.tk; ++j) {
        double s = 0;
        for (int x = 0; x < d; ++x) {
          s += std::fabs(q[(i * H + h) * d + x] * k[(j * Hkv + h / group) * d + x]);
        }
        s *= scale;
        if (c.bias50) s += std::fabs(static_cast<double>(c.bias50(h, i, j)));
        sens[j] = s;
        mean_sens += static_cast<double>(o50.probs[row + j]) * s;
      }
      for (std::int64_t j = 0; j < c.tk; ++j) {
        const double pij = static_cast<double>(o50.probs[row + j]);
        p_cond[row + j] = o50.visible[row + j] ? pij * (1 + sens[j] + mean_sens) : 0.0;
      }
      for (int cc = 0; cc < dv; ++cc) {
        const std::size_t oi = static_cast<std::size_t>((i * H + h) * dv + cc);
        const double oic = static_cast<double>(o50.out[oi]);
        double a = 0, b = 0;
        for (std::int64_t j = 0; j < c.tk; ++j) {
          const double pij = static_cast<double>(o50.probs[row + j]);
          const double vj = v[(j * Hkv + h / group) * dv + cc];
          a += pij * std::fabs(vj);
          b += pij * std::fabs(vj - oic) * sens[j];
        }
        o_cond[oi] = a + b;
      }
    }
  }

  const double bound = t == DType::kF32 ? optimized::kAttentionMaxError : 4.0;
  auto spec = [&](const std::string& name, const std::string& stage,
                  std::vector<std::int64_t> shape) {
    TensorSpec s;
    s.name = name;
    s.stage = stage;
    s.dtype = t;
    s.shape = std::move(shape);
    s.check.kind = "conditioned";
    s.check.bounds = {{"strict", bound}};
    s.exact = name + ".exact";
    s.cond = name + ".cond";
    return s;
  };
  std::vector<TensorSpec> expected = {spec("probs", "probabilities", {H, c.tq, c.tk}),
                                      spec("out", "output", {c.tq, H, dv})};
  expected[0].axes = {{"head", "", {}}, {"query", "query_positions", {}}, {"key", "key_positions", {}}};
  expected[1].axes = {{"query", "query_positions", {}}, {"head", "", {}}, {"channel", "", {}}};

  std::vector<Tensor> tensors;
  std::vector<std::int64_t> qpos(static_cast<std::size_t>(c.tq)), kpos(static_cast<std::size_t>(c.tk));
  for (std::int64_t i = 0; i < c.tq; ++i) qpos[i] = p.query_offset + i;
  for (std::int64_t j = 0; j < c.tk; ++j) kpos[j] = j;
  tensors.push_back(tensor_from_i64("query_positions", {c.tq}, qpos));
  tensors.push_back(tensor_from_i64("key_positions", {c.tk}, kpos));
  auto input = [&](const std::string& name, std::vector<std::int64_t> shape,
                   const std::vector<double>& x) {
    return target_tensor(name, t, std::move(shape), std::vector<mp50>(x.begin(), x.end()));
  };
  tensors.push_back(input("q", {c.tq, H, d}, q));
  tensors.push_back(input("k", {c.tk, Hkv, d}, k));
  tensors.push_back(input("v", {c.tk, Hkv, dv}, v));
  std::vector<TensorSpec> inputs = {
      {"query_positions", "input", DType::kI64, {c.tq}, "", {}, {}, "", "", ""},
      {"key_positions", "input", DType::kI64, {c.tk}, "", {}, {}, "", "", ""},
      {"q", "input", t, {c.tq, H, d}, "", {}, {}, "", "", ""},
      {"k", "input", t, {c.tk, Hkv, d}, "", {}, {}, "", "", ""},
      {"v", "input", t, {c.tk, Hkv, dv}, "", {}, {}, "", "", ""},
  };
  if (!c.key_padding.empty()) {
    std::vector<std::int32_t> kp(c.key_padding.begin(), c.key_padding.end());
    tensors.push_back(tensor_from_i32("key_padding", {c.tk}, kp));
    inputs.push_back({"key_padding", "input", DType::kI32, {c.tk}, "", {}, {}, "", "", ""});
  }
  for (std::size_t i = 0; i < inputs.size(); ++i) inputs[i].sha256 = sha256_hex(tensors[i].data);
  const std::vector<const std::vector<mp50>*> values = {&o50.probs, &o50.out};
  const std::vector<const std::vector<double>*> conds = {&p_cond, &o_cond};
  for (std::size_t e = 0; e < expected.size(); ++e) {
    TensorSpec& s = expected[e];
    tensors.push_back(target_tensor(s.name, t, s.shape, *values[e]));
    s.sha256 = sha256_hex(tensors.back().data);
    tensors.push_back(tensor_from_f64(s.exact, s.shape, to_f64(*values[e])));
    tensors.push_back(tensor_from_f32(s.cond, s.shape, std::vector<float>(conds[e]->begin(), conds[e]->end())));
  }

  Json m = manifest_header(c.id, c.scheme, c.variant, "valid", 1);
  m["description"] = c.description;
  m["conventions"] = {
      {"scores", "s_ij = scale * (q_i . k_j) + bias_ij; masked entries excluded from the softmax"},
      {"positions", "query i is at absolute position query_offset + i, key j at position j"},
      {"causal", "key j visible to query i iff j <= query_offset + i"},
      {"window", "when window w > 0: key j visible iff query_offset + i - w < j"},
      {"key_padding", "key j hidden when key_padding[j] != 0"},
      {"fully_masked_row", "probabilities all 0 and output the zero vector"},
      {"heads", "kv head of query head h = h / (n_heads / n_kv_heads)"},
      {"layout", "q [Tq, H, d], k [Tk, Hkv, d], v [Tk, Hkv, dv], out [Tq, H, dv], probs [H, Tq, Tk]"}};
  m["params"] = {{"n_heads", H},
                 {"n_kv_heads", Hkv},
                 {"head_dim", d},
                 {"value_dim", dv},
                 {"scale_kind", scale_name(p.scale_kind)},
                 {"scale", p.scale},
                 {"causal", p.causal},
                 {"window", p.window},
                 {"query_offset", p.query_offset},
                 {"tq", c.tq},
                 {"tk", c.tk},
                 {"dtype", std::string(dtype_short(t))}};
  m["oracle"] = mp_oracle_json();
  m["seed"] = c.seed;
  m["prng"] = "splitmix64 counter: value(seed, stream, i); stream 1 = q, 2 = k, 3 = v";
  for (const auto& [key, val] : c.extra.items()) m[key] = val;
  manifest_add_tensors(m, c.id, inputs, expected);
  return GoldenCase{m, std::move(tensors)};
}

AttentionParams attention_params_from_manifest(const Json& m) {
  const Json& pj = m.at("params");
  AttentionParams p;
  p.n_heads = pj.at("n_heads").get<int>();
  p.n_kv_heads = pj.at("n_kv_heads").get<int>();
  p.head_dim = pj.at("head_dim").get<int>();
  p.value_dim = pj.at("value_dim").get<int>();
  const std::string sk = pj.at("scale_kind").get<std::string>();
  p.scale_kind = sk == "none" ? reference::AttentionScale::kNone
                 : sk == "given" ? reference::AttentionScale::kGiven
                                 : reference::AttentionScale::kInvSqrtHeadDim;
  p.scale = pj.at("scale").get<double>();
  p.causal = pj.at("causal").get<bool>();
  p.window = pj.at("window").get<std::int64_t>();
  p.query_offset = pj.at("query_offset").get<std::int64_t>();
  return p;
}

TensorMap attention_case_run_engine(const CaseSpec& spec, const TensorMap& golden,
                                    const optimized::AttentionBias* bias,
                                    const AttentionParams& p) {
  const Json& pj = spec.manifest.at("params");
  const std::int64_t tq = pj.at("tq").get<std::int64_t>(), tk = pj.at("tk").get<std::int64_t>();
  reference::AttentionMask mask;
  if (auto it = golden.find("key_padding"); it != golden.end()) {
    for (std::int64_t j = 0; j < it->second.numel(); ++j) {
      mask.key_padding.push_back(it->second.get_i64(j) != 0);
    }
  }
  const auto q = tensor_to_f32(golden.at("q")), k = tensor_to_f32(golden.at("k")),
             v = tensor_to_f32(golden.at("v"));
  std::vector<float> out(static_cast<std::size_t>(tq * p.n_heads * p.value_dim));
  std::vector<float> probs(static_cast<std::size_t>(p.n_heads * tq * tk));
  optimized::attention_forward(p, mask, tq, tk, q, k, v, out, bias);
  optimized::attention_probs(p, mask, tq, tk, q, k, probs, bias);
  const DType t = golden.at("q").dtype;
  TensorMap res;
  res.emplace("out", engine_tensor("out", t, {tq, p.n_heads, p.value_dim}, out));
  res.emplace("probs", engine_tensor("probs", t, {p.n_heads, tq, tk}, probs));
  return res;
}

}  // namespace posenc::golden
