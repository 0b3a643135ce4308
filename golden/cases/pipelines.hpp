// Float emulations of the engine pipelines that the profiles model (golden/format/profiles.hpp):
// the steps several schemes' built-in engines share under `posenc engine --pipeline`. These are
// convention models, never the oracle: each reproduces, operation by operation, how a widely
// used engine computes, so that the budgets can be shown to hold and to be tight.
//
// Every operation is a separate float32 (or bf16/f16) rounding, as in the engines' eager code:
// the golden library is compiled with -ffp-contract=off so that no product and sum is fused.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "golden/format/format.hpp"
#include "golden/format/profiles.hpp"
#include "reference/common/dtype.hpp"
#include "reference/common/errors.hpp"

namespace posenc::golden::pipelines {

/// The pipeline names `posenc engine --pipeline` accepts, one per profile, in profile order.
inline std::vector<std::string> names() {
  std::vector<std::string> v;
  for (const auto& p : profiles()) v.push_back(p.pipeline);
  return v;
}

/// The profile a pipeline's outputs are judged by (exact -> strict, fp32 -> fp32, ...).
inline std::string profile_of(const std::string& pipeline) {
  for (const auto& p : profiles()) {
    if (p.pipeline == pipeline) return p.name;
  }
  throw_invalid("pipelines::profile_of", "pipeline must be one of exact, fp32, fp32-recurrence, "
                "bf16, f16", pipeline);
}

/// The dtype a pipeline computes its activations in: bf16 / f16 for the eager pipelines,
/// float32 otherwise.
inline DType compute_dtype(const std::string& pipeline) {
  if (pipeline == "bf16") return DType::kBF16;
  if (pipeline == "f16") return DType::kF16;
  return DType::kF32;
}

/// x rounded to dtype t (nearest even) and returned as a float: one operation in t.
inline float fl(float x, DType t) {
  if (t == DType::kBF16) return bf16_to_float(float_to_bf16(x));
  if (t == DType::kF16) return static_cast<float>(f16_to_double(double_to_f16(x)));
  return x;
}

/// HF / Meta / vLLM inverse frequencies: 1 / powf(fl(base), fl(2i) / fl(d)), all float32.
inline std::vector<float> hf_inv_freq(double base, int d) {
  std::vector<float> w(static_cast<std::size_t>(d / 2));
  const float b = static_cast<float>(base);
  for (int i = 0; i < d / 2; ++i) {
    const float e = static_cast<float>(2 * i) / static_cast<float>(d);
    w[i] = 1.0f / std::pow(b, e);
  }
  return w;
}

/// ggml's theta_scale = powf(fl(base), -2.0f / n_dims).
inline float ggml_theta_scale(double base, int d) {
  return std::pow(static_cast<float>(base), -2.0f / static_cast<float>(d));
}

/// ggml's angles for one position: theta_0 = float(p), theta_i = theta_{i-1} * ts (float32).
inline std::vector<float> ggml_thetas(std::int64_t p, float ts, int n) {
  std::vector<float> t(static_cast<std::size_t>(n));
  float theta = static_cast<float>(p);
  for (int i = 0; i < n; ++i) {
    t[i] = theta;
    theta = theta * ts;
  }
  return t;
}

/// BLOOM's float32 ALiBi slopes (HF build_alibi_tensor): base = fl32(2^(-8/c)) computed in
/// double, slopes base^1..base^c by torch.pow in float32; the extra heads use fl32(2^(-4/c))
/// and the odd powers 1, 3, 5, ...; c = 2^floor(log2 n).
inline std::vector<float> bloom_slopes(int n) {
  int c = 1;
  while (2 * c <= n) c *= 2;
  const float base = static_cast<float>(std::pow(2.0, -std::pow(2.0, -(std::log2(c) - 3))));
  const float extra = static_cast<float>(std::pow(2.0, -std::pow(2.0, -(std::log2(2 * c) - 3))));
  std::vector<float> m;
  for (int k = 1; k <= c && static_cast<int>(m.size()) < n; ++k) {
    m.push_back(std::pow(base, static_cast<float>(k)));
  }
  for (int k = 1; static_cast<int>(m.size()) < n; k += 2) {
    m.push_back(std::pow(extra, static_cast<float>(k)));
  }
  return m;
}

/// ggml's float32 ALiBi slopes (ggml_soft_max_ext, max_bias 8): m0 = powf(2, -8/c),
/// m1 = powf(2, -4/c), slope_h = powf(m0, h + 1) for h < c, else powf(m1, 2 (h - c) + 1).
inline std::vector<float> ggml_slopes(int n) {
  int c = 1;
  while (2 * c <= n) c *= 2;
  const float max_bias = 8.0f;
  const float m0 = std::pow(2.0f, -max_bias / static_cast<float>(c));
  const float m1 = std::pow(2.0f, -(max_bias / 2.0f) / static_cast<float>(c));
  std::vector<float> m(static_cast<std::size_t>(n));
  for (int h = 0; h < n; ++h) {
    m[h] = h < c ? std::pow(m0, static_cast<float>(h + 1))
                 : std::pow(m1, static_cast<float>(2 * (h - c) + 1));
  }
  return m;
}

/// HF's float32 T5 bucket (T5Attention._relative_position_bucket): the int64 distance as
/// float32, / max_exact, torch.log in float32, / the Python double ln(D/E) as a float32 operand,
/// * (N' - E) in float32, then .to(torch.long) (truncation).
inline int hf_t5_bucket_f32(std::int64_t r, bool bidirectional, int num_buckets,
                            std::int64_t max_distance) {
  std::int64_t base = 0, n = r;
  int nb = num_buckets;
  if (bidirectional) {
    nb /= 2;
    base = r > 0 ? nb : 0;
    n = r < 0 ? -r : r;
  } else {
    n = r < 0 ? -r : 0;
  }
  const int e = nb / 2;
  if (n < e) return static_cast<int>(base + n);
  const float lg = std::log(static_cast<float>(n) / static_cast<float>(e));
  const float denom = static_cast<float>(std::log(static_cast<double>(max_distance) / e));
  const float x = lg / denom * static_cast<float>(nb - e);
  const std::int64_t large = std::min<std::int64_t>(e + static_cast<std::int64_t>(x), nb - 1);
  return static_cast<int>(base + large);
}

/// Why a pipeline cannot run a case whose activations are in dtype t ("" when it can).
inline std::string dtype_mismatch(const std::string& pipeline, DType t) {
  const DType c = compute_dtype(pipeline);
  if (c != DType::kF32 && c != t) {
    return "the " + pipeline + " pipeline computes in " + std::string(dtype_short(c)) +
           "; this case's target is " + std::string(dtype_short(t));
  }
  return "";
}

}  // namespace posenc::golden::pipelines
