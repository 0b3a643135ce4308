// -----------------------------------------------------------------------------
// q/k normalization: the per-head RMS norm some models put on queries and keys (reference)
// -----------------------------------------------------------------------------
// Formula (x = one head vector of h = head_dim channels, c = 0 .. h - 1; eps from the config):
//
//   r(x)  = 1 / sqrt(mean_c x_c^2 + eps)        mean over the head's h channels
//   rms       y_c = x_c r(x) (o + w_c)          learned weights w [h]; o = weight_offset:
//                                               1 for Gemma 3's (1 + w) form, 0 for the plain
//                                               w form (Qwen3, Gemma 4)
//   rms_unit  y_c = x_c r(x)                    no weights
//   l2        y_c = x_c r(x)                    Llama 4's Llama4TextL2Norm: despite its name it
//                                               divides by the RMS (mean of squares), not by the
//                                               L2 norm; the same values as rms_unit
//
//   Where it sits (QkNormPosition): before RoPE (Gemma 3, Gemma 4, Qwen3: q_norm / k_norm on
//   the projections, then the rotation) or after RoPE (Llama 4, on its RoPE layers when
//   use_qk_norm). Every q head and every k head is normalized on its own; values never.
//   Without weights the norm commutes with a full rotation of attention factor 1 (a rotation
//   keeps every pair's norm, so mean_c x_c^2 is unchanged); with weights that are not constant
//   it does not, so before and after differ.
//
//   eps is a decimal written in a config (1e-5, 1e-6); it enters the oracle as that decimal
//   exactly (config_decimal, reference/query_temperature.hpp), rounded once in Real.
//
// Source: B. Zhang, R. Sennrich, "Root Mean Square Layer Normalization", arXiv:1910.07467v1,
//   Sec. 3, Eq. (4) (RMSNorm); Gemma Team, "Gemma 3 Technical Report", arXiv:2503.19786v1,
//   Sec. 2 (QK-norm replaces Gemma 2's soft-capping); HF transformers Gemma3RMSNorm (1 + w),
//   Qwen3RMSNorm (w), Llama4TextL2Norm (no weights, eps = rms_norm_eps, applied after
//   apply_rotary_emb when use_qk_norm and the layer rotates).
// Index note: the paper's a_i / RMS(a) g_i is y_c = x_c r(x) w_c with o = 0 and eps = 0.
// Names elsewhere: HF q_norm / k_norm (Gemma 3, Qwen3, Gemma 4), qk_norm (Llama 4),
//   rms_norm_eps; ggml_rms_norm followed by ggml_mul with the weight tensor.
// Not modelled: the float32 evaluation of the mean and rsqrt (the kernel's bound and the plan
//   profiles' budgets cover it); Gemma 4's v_norm (values are not positions).
#pragma once
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "reference/common/errors.hpp"
#include "reference/common/span.hpp"
#include "reference/query_temperature.hpp"  // config_decimal

namespace posenc::reference {

enum class QkNormKind { kNone, kRms, kRmsUnit, kL2 };
enum class QkNormPosition { kBeforeRope, kAfterRope };

constexpr const char* qk_norm_kind_name(QkNormKind k) {
  return k == QkNormKind::kNone      ? "none"
         : k == QkNormKind::kRms     ? "rms"
         : k == QkNormKind::kRmsUnit ? "rms_unit"
                                     : "l2";
}

constexpr const char* qk_norm_position_name(QkNormPosition p) {
  return p == QkNormPosition::kBeforeRope ? "before_rope" : "after_rope";
}

/// One model's q/k normalization.
struct QkNorm {
  QkNormKind kind = QkNormKind::kNone;
  QkNormPosition position = QkNormPosition::kBeforeRope;
  double eps = 1e-6;           // rms_norm_eps, >= 0
  double weight_offset = 0.0;  // o: 1 for Gemma 3's (1 + w), 0 for w (kRms only)
  bool has_weights() const { return kind == QkNormKind::kRms; }
};

/// InvalidArgument naming `function` unless the norm is usable on heads of `head_dim`.
inline void qk_norm_check(const QkNorm& n, int head_dim, const char* function = "qk_norm_check") {
  if (n.kind == QkNormKind::kNone) return;
  if (head_dim <= 0) throw_invalid(function, "head_dim must be positive", head_dim);
  if (!std::isfinite(n.eps) || n.eps < 0.0) {
    throw_invalid(function, "eps (rms_norm_eps) must be finite and >= 0", n.eps);
  }
  if (n.kind == QkNormKind::kRms && n.weight_offset != 0.0 && n.weight_offset != 1.0) {
    throw_invalid(function, "weight_offset must be 0 (w) or 1 (Gemma's 1 + w)", n.weight_offset);
  }
}

/// r(x) = 1 / sqrt(mean(x^2) + eps) of one head vector; InvalidArgument when it is infinite
/// (x = 0 with eps = 0).
template <class Real>
Real qk_norm_scale(const QkNorm& n, const std::vector<Real>& x) {
  using std::sqrt;
  Real sum = 0;
  for (const Real& v : x) sum += v * v;
  const Real ms = sum / Real(static_cast<std::int64_t>(x.size())) + config_decimal<Real>(n.eps);
  if (!(ms > Real(0))) throw_invalid("qk_norm_scale", "mean(x^2) + eps must be > 0", 0);
  return Real(1) / sqrt(ms);
}

/// One head vector normalized; `w` holds head_dim weights for kRms, else is ignored (may be
/// empty). kNone returns x.
template <class Real>
std::vector<Real> qk_norm_apply(const QkNorm& n, const std::vector<Real>& x,
                                const std::vector<Real>& w) {
  qk_norm_check(n, static_cast<int>(x.size()), "qk_norm_apply");
  if (n.kind == QkNormKind::kNone) return x;
  if (n.has_weights() && w.size() != x.size()) {
    throw_invalid("qk_norm_apply",
                  "weights must have head_dim = " + std::to_string(x.size()) + " entries",
                  w.size());
  }
  const Real r = qk_norm_scale(n, x);
  std::vector<Real> y(x.size());
  for (std::size_t c = 0; c < x.size(); ++c) {
    y[c] = x[c] * r;
    if (n.has_weights()) y[c] *= Real(n.weight_offset) + w[c];
  }
  return y;
}

/// Row-major [rows, head_dim] in and out: each row one head vector.
template <class Real>
void qk_norm_apply_rows(const QkNorm& n, int head_dim, span<const Real> x, span<const Real> w,
                        span<Real> y) {
  qk_norm_check(n, head_dim, "qk_norm_apply_rows");
  const std::size_t h = static_cast<std::size_t>(head_dim);
  if (x.size() % h != 0 || y.size() != x.size()) {
    throw_invalid(
        "qk_norm_apply_rows",
        "x and y must have the same multiple of head_dim = " + std::to_string(h) + " entries",
        x.size());
  }
  const std::vector<Real> weights(w.begin(), w.end());
  for (std::size_t r = 0; r < x.size() / h; ++r) {
    const std::vector<Real> row(x.begin() + r * h, x.begin() + (r + 1) * h);
    const std::vector<Real> out = qk_norm_apply(n, row, weights);
    for (std::size_t c = 0; c < h; ++c) y[r * h + c] = out[c];
  }
}

}  // namespace posenc::reference
