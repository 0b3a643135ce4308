// The RoPE family's stage budgets: the error analysis of each profile's pipeline
// (golden/cases/rope_case.hpp, rope_stage_budgets; docs/profiles.md has the table).
#include "golden/cases/rope_kit.hpp"

namespace posenc::golden {

using namespace rope_kit;
using reference::LongRopePolicy;
using reference::RopeLayout;
using reference::RopeParams;
using reference::RopeScaling;
using reference::RopeScalingType;
using reference::YarnForm;
using Json = nlohmann::json;
namespace bud = budgets;

// ---- budgets: the error analysis of each profile's pipeline (docs/profiles.md) -------------
//
// Symbols: t = target dtype, eps_t its machine epsilon, r = eps_f32 / eps_t, u = 2^-24,
// a = attention factor, h = head_dim, phi = p * theta_i the exact angle of position p and pair
// i, c = the element's condition scale. Budget (golden/format/manifest.hpp):
// bound * eps_t * c + ulps * ulp_t(y*) + extra.
// A = the attention factor's share of a table entry's error, in eps_f32: 0 when the pipeline's
// factor is exactly 1, else 0.5 (the product a * cos) + alpha / eps_f32, alpha = the relative
// error of the pipeline's float32 factor (HF: fl(a), u; ggml: its float32 mscale, from the
// interval model below).
//
// strict (`--pipeline exact`, posenc's kernel): theta_i in long double -> double, phi in
//   double (|d phi| <= 2^-52 |phi| <= 0.05 eps_f32 up to 2^24 + 1), a cos(phi) rounded once to
//   float32 and once more to t.
//     inv_freq  0.5 ulp + 2^-28 (double rounding through double)
//     cos, sin  bound 0.05 r, ulps 0.5 (f32) or 0.5 + 0.5 r (16-bit: f32 then t)
//     rotated   tables 0.5 eps_f32 a |x| + two products 0.5 eps_f32 c + angle 0.05: bound 1.05 r;
//               the sum's rounding and the cast: ulps as for the tables
//     scores    each rotated component is within R = 1.55 eps_f32 of its pair's c; a pair's
//               contribution to q.k moves by at most sqrt(2) R (|q_pair| |k_pair|) from each
//               side, and an f32 dot product of h terms adds gamma_h = h u = (h/2) eps_f32
//               of sum |q_c k_c| <= c: bound (2 sqrt(2) 1.55 + h/2) r; ulps 0.5 for 16-bit casts
//     attention_factor, softmax_scale: 0.5 ulp + 2^-28 (computed in long double / double)
// fp32 (HF, Meta, vLLM): float32 inv_freq, phi^ = fl(fl(p) inv_freq), cosf/sinf within 2 ulp
//   (CUDA). The angle error E_i(p) = |phi^ - phi|:
//     plain     inv_freq = 1/powf(base, fl(2i)/fl(d)) (budgets.hpp enumerates every faithful
//               powf: its worst relative error delta_i, exact); E = ((1 + rho_p)(1 + delta_i)
//               (1 + u) - 1) |phi| (rho_p: the position's float32 conversion error, 0 up to 2^24)
//     scaled    the rule as HF writes it (pipelines::hf_scaled_inv_freq) evaluated in interval
//               arithmetic (golden/cases/float_interval.hpp: every float32 result the code may
//               produce, faithful powf), and fl(fl(p) * inv_freq) likewise: E = the interval's
//               largest distance from the exact angle
//     inv_freq  extra = the largest distance of the float32 inv_freq from the exact one
//     cos, sin  bound (1 + A) r (2 ulp of |cos| < 1 is <= eps_f32), ulps = the cast (0.5 for
//               16-bit), extra a E
//     rotated   bound (1.5 + A) r (tables + products), ulps 0.5 (+ 0.5 r when cast), extra c E
//               (the chord of an angle error is shorter than its arc)
//     scores    R = (2 + A) eps_f32: bound (2 sqrt(2)(2 + A) + h/2) r, ulps the cast, extra
//               sum_i w_i (E_i(p_q) + E_i(p_k)), w_i = a^2 (|q_a|+|q_b|)(|k_a|+|k_b|)
//     attention_factor, softmax_scale: extra = the float32 value's interval distance (fl of
//               HF's double: u relative)
// fp32-recurrence (ggml): theta_0 = fl(p), theta_i = fl(theta_{i-1} ts), ts = powf(base,
//   -2.0f/d). Plain: ts's worst relative error delta_ts enumerated, E = ((1 + rho_p)
//   (1 + delta_ts)^i (1 + u)^i - 1)|phi_i|; scaled: ggml's rule (pipelines::ggml_scaled_thetas:
//   freq_scale, YaRN mix with float32 corr dims and ramp, rope_freqs factors) in interval
//   arithmetic, E = the interval's largest distance; dynamic NTK: the host's base' for the call
//   (pipelines::host_rope_base, in double) as freq_base, i.e. ts = powf(fl(base'), -2.0f/d) over
//   every faithful powf (within L, base' = base). Same bounds as fp32 with this E; inv_freq =
//   the pipeline's angles at position 1; except the scores of a 16-bit target:
//     scores    llama.cpp stores k_rot in its KV cache in the target dtype t (the case's dtype
//               stands for the cache's) and converts q_rot to t for the dot product, which it
//               accumulates in float32. Each of q_c, k_c carries one more rounding to t,
//               fl_t(x) = x (1 + d), |d| <= u_t = eps_t / 2, so a term q_c k_c moves by
//               (2 u_t + u_t^2) |q_c k_c| (budgets::stored_product_rel_error); the products of
//               16-bit values are exact in float32 and the accumulation is the gamma_h term
//               already counted. sum_c |q_c k_c| <= c (per pair |q_a k_a| + |q_b k_b| <=
//               |q_pair| |k_pair| = a^2 |x_q,pair| |x_k,pair| <= w_i; tail channels are exact
//               copies, already in t): bound (2 sqrt(2)(2 + A) + h/2) r + 1 + eps_t / 4.
//               Below t's smallest normal the rounding is absolute, up to eta_t / 2 (half the
//               subnormal spacing, budgets::stored_rounding_abs_floor): extra + eta_t / 2
//               sum_c (|q_c| + |k_c|) <= eta_t / 2 sqrt(2) sum_i (pair_sum_q,i + pair_sum_k,i).
// bf16, f16 (PyTorch eager in t): float32 tables as in fp32, cast to t; q*cos, rotate_half(q)
//   *sin and their sum each rounded to t; q_rot . k_rot accumulated in float32, rounded to t.
//     inv_freq, cos, sin   as fp32 (tables are float32, then cast)
//     rotated   tables (0.5 + (1 + A) r) eps_t a |x| + products 0.5 eps_t c: bound 1 + (1 + A) r,
//               ulps 0.5 (the sum), extra as fp32
//     scores    R = (1.5 + (1 + A) r) eps_t: bound 2 sqrt(2) R + (h/2) r, ulps 0.5, extra as fp32
// Every bound and extra gets 1% for the second-order terms the sums above leave out.
// Measured tightness (each pipeline emulated in float, `posenc engine --pipeline`):
// docs/profiles.md.

namespace {


StageBudgets rope_stage_budgets_derived(const std::string& profile, DType t, double A, int h) {
  const double r = bud::f32_in(t);
  const double cast = bud::cast_to(t);
  const double sum_ulps = t == DType::kF32 ? 0.5 : 0.5 + 0.5 * r;
  const double root2x2 = 2 * std::sqrt(2.0);
  const double s = kSecondOrder;
  StageBudgets b;
  if (profile == "strict") {
    b.inv_freq = bound_of(0.5 + 0x1p-28);
    b.scalar = bound_of(0.5 + 0x1p-28);
    b.table = bound_of(0.05 * r, sum_ulps);
    b.rotated = bound_of((POSENC_MUTANT("gold_rope_strict_products_dropped") ? 0.55 : 1.05) * r * s, sum_ulps);
    b.scores = bound_of((root2x2 * 1.55 + h / 2.0) * r * s, cast);
    return b;
  }
  const std::string na = activation_na(profile, t);
  if (!na.empty()) {
    b.inv_freq = b.table = b.rotated = b.scores = b.scalar = not_applicable(na);
    return b;
  }
  b.inv_freq = bound_of(0.0);
  b.scalar = bound_of(0.0);
  if (profile == "fp32" || profile == "fp32-recurrence") {
    b.table = bound_of((1 + A) * r * s, cast);
    b.rotated = bound_of((1.5 + A) * r * s, sum_ulps);
    // llama.cpp: q_rot and k_rot in the KV-cache dtype (the target) before the dot product
    const double kv = profile == "fp32-recurrence" && !POSENC_MUTANT("gold_rope_kv_storage_term_dropped")
                          ? bud::stored_product_rel_error(t) / dtype_eps(t)
                          : 0.0;
    b.scores = bound_of(((root2x2 * (2 + A) + h / 2.0) * r + kv) * s, cast);
  } else {  // bf16, f16: eager in the target dtype
    b.table = bound_of((1 + A) * r * s, cast);
    b.rotated = bound_of(((POSENC_MUTANT("gold_rope_eager_products_dropped") ? 0.5 : 1.0) + (1 + A) * r) * s, 0.5);
    b.scores = bound_of((root2x2 * (1.5 + (1 + A) * r) + h / 2.0 * r) * s, 0.5);
  }
  return b;
}

}  // namespace

RopeStageBudgets rope_stage_budgets(const std::string& profile, DType t, double A, int h) {
  StageBudgets b = rope_stage_budgets_derived(profile, t, A, h);
  for (ProfileBudget* x : {&b.inv_freq, &b.table, &b.rotated, &b.scores, &b.scalar}) {
    x->bound *= inflation();
    x->ulps *= inflation();
  }
  return b;
}

}  // namespace posenc::golden
