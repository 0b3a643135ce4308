// Golden cases for Transformer-XL relative attention. Formula: see reference/transformer_xl.hpp.
//
//   attention (level 1): Transformer-XL wt103-shaped layers, scaled down (d_model 64, d_head 16,
//     4 heads; 2 in the long evaluation step, to keep generation short) with the real semantics
//     of the memory and clamp knobs: a training-style segment
//     (mem_len 150, a full memory mlen = 150, qlen 16, clamp_len 1000) in f32 and bf16; an
//     evaluation-style step whose distances pass clamp_len (mlen 1100, qlen 4, clamp_len 1000,
//     same_length with mem_len 1100: distances 1000 .. 1103 read position 1000, keys 1100 or
//     more behind are masked); a first segment without memory (mlen 0, same_length, mem_len 16).
//     Inputs q [qlen, H, d_head], k and v [klen, H, d_head] (memory keys first), r_w_bias and
//     r_r_bias [H, d_head], r_net [H * d_head, d_model]; seeded, exact in the target dtype.
//     Expected stages: rel_position [qlen, klen] (i32, exact: the sinusoid position
//     min(mlen + i - j, clamp_len) each visible (i, j) reads, -1 where masked); pos_emb
//     [klen, d_model] (the descending, clamped sinusoid table, conditioned; not in the long
//     evaluation case, for size); probs and out (golden/cases/attention_case.hpp:
//     conditioned, mp50 with an mp100 cross-check).
//   negative control (result "invalid"): the training-style segment in bf16 with the expected
//     values of an ASCENDING position table (row r holds position r instead of klen - 1 - r);
//     verify passes an engine only if it does NOT reproduce them.
// Engine mistakes: ascending-positions (R rows in the wrong order), rel-shift-off-by-one
// (`[:-1]` instead of `[1:]`: the wrong row of the padded buffer is dropped), no-u (r_w_bias
// missing), no-v (r_r_bias missing), clamp-ignored (clamp_len not applied),
// rel-shift-one-column (the zero column padded on the right: every distance one short, the
// query's own key reads the pad), no-rel-shift (BD used unshifted: key j reads row j whatever
// the query), memory-dropped (the segment memory restarted: memory keys not attended).
//
// Budgets (contract)
//   rel_position: exact in every profile (integers).
//   probs, out: attention_case's (docs/profiles.md), with bias_ij = scale * (u . k_j + BD_ij)
//     in the condition scale. strict: the optimized engine's bias is float GEMMs over a float r
//     table (optimized/transformer_xl.hpp: its own bound scales with sum |q + v| |r|, not |BD|);
//     on these cases it stays inside kAttentionMaxError * eps_f32 * S with the golden S
//     (TransformerXlGolden.OptimizedPassesVerify). The float pipelines (fp32,
//     fp32-recurrence and, as the source of the bias, bf16) compute the bias the PyTorch way in
//     float32: inv_freq = 1 / powf(10000, 2k / d_model), angle = fl(pos * inv_freq), sinf/cosf,
//     r = W_r R, (q + v) . r, u . k, each a float32 sum. Their extra (absolute, per (h, i, j)):
//       E = scale * [ (d_head + 2) u A + sum_x |q_ix + v_x| ((d_model + d_head + 3) u W_x.|R|
//                     + W_x.|dR|) ] + 2 u |bias|
//       A = sum_c |u_c k_jc|, W_x.|R| = sum_m |W_xm| |R_m(pos)|, u = 2^-24,
//       |dR_m| <= rho_k pos omega_k + 2^-23: rho_k the float angle's relative error
//       (budgets::product_rel_error of the HF inverse frequency's worst faithful powf), 2^-23
//       two ulps of sinf/cosf below 1.
//     The dot-product terms are worst-case (n u per n-term float sum), so these extras are loose
//     by design; the angle term dominates at large positions (pos 1000: about 500 ulps of R).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "golden/cases/mistakes.hpp"
#include "golden/cases/attention_case.hpp"
#include "golden/cases/budgets.hpp"
#include "golden/cases/oracle_tensors.hpp"
#include "golden/cases/pipelines.hpp"
#include "golden/cases/registry.hpp"
#include "golden/format/prng.hpp"
#include "optimized/transformer_xl.hpp"
#include "reference/common/errors.hpp"
#include "reference/common/scalar.hpp"
#include "reference/transformer_xl.hpp"
#include "reference/common/mutant.hpp"

namespace posenc::golden {

namespace {

/// The mistakes this file branches on (golden/cases/mistakes.hpp).
enum class MistakeId { kNone, kOther, kAscendingPositions, kClampIgnored, kMemoryDropped, kNoRelShift, kNoU, kNoV, kRelShiftOffByOne, kRelShiftOneColumn };
const MistakeTable<MistakeId, 8> kMistakes(
    {"transformer_xl"},
    {{
     {MistakeId::kAscendingPositions, "ascending-positions"},
     {MistakeId::kClampIgnored, "clamp-ignored"},
     {MistakeId::kMemoryDropped, "memory-dropped"},
     {MistakeId::kNoRelShift, "no-rel-shift"},
     {MistakeId::kNoU, "no-u"},
     {MistakeId::kNoV, "no-v"},
     {MistakeId::kRelShiftOffByOne, "rel-shift-off-by-one"},
     {MistakeId::kRelShiftOneColumn, "rel-shift-one-column"}}});

}  // namespace

namespace {

using Json = nlohmann::json;
using reference::AttentionParams;
using reference::TransformerXlParams;
using reference::TxlInputs;

const char* kCitation =
    "Z. Dai et al., Transformer-XL: Attentive Language Models Beyond a Fixed-Length Context, "
    "arXiv:1901.02860v3, Sec. 3.3 and Appendix B; positions, clamp_len, same_length and mems of "
    "kimiyoung/transformer-xl pytorch/mem_transformer.py";

struct TxlCase {
  std::string id, description;
  TransformerXlParams tp;
  std::int64_t qlen = 0, mlen = 0;
  DType dtype = DType::kF32;
  bool negative_control = false;  // expected values with an ascending position table
  bool pos_emb = true;            // with the pos_emb stage
  std::uint64_t seed = 0;
};

std::vector<TxlCase> txl_cases() {
  struct Row {
    std::string tag, what;
    std::int64_t mem_len, clamp_len, mlen, qlen;
    bool same_length;
    DType dtype;
    bool negative_control;
    int n_heads = 4;
    bool pos_emb = true;  // the pos_emb stage (left out of the long case: 1.4 MB)
  };
  const std::string train =
      "training-style segment: mem_len 150, full memory (mlen 150), "
      "qlen 16, clamp_len 1000";
  const std::string eval =
      "evaluation-style step past clamp_len: mlen 1100, qlen 4, clamp_len "
      "1000, same_length with mem_len 1100 (distances 1000..1103 read "
      "position 1000; keys 1100 or more behind masked)";
  const std::string first =
      "first segment, no memory (mlen 0), qlen 24, same_length with "
      "mem_len 16 (keys 16 or more behind masked)";
  const std::vector<Row> rows = {
      {"mem150_m150_q16_clamp1000", train, 150, 1000, 150, 16, false, DType::kF32, false},
      {"mem150_m150_q16_clamp1000", train, 150, 1000, 150, 16, false, DType::kBF16, false},
      {"mem1100_m1100_q4_clamp1000_samelen", eval, 1100, 1000, 1100, 4, true, DType::kF32, false, 2,
       false},
      {"mem16_m0_q24_clamp1000_samelen", first, 16, 1000, 0, 24, true, DType::kF32, false},
      {"mem150_m150_q16_clamp1000", train, 150, 1000, 150, 16, false, DType::kBF16, true},
  };
  std::vector<TxlCase> v;
  std::uint64_t seed = 0x7a11e500;
  for (const auto& r : rows) {
    TxlCase c;
    c.tp.n_heads = r.n_heads;
    c.pos_emb = r.pos_emb;
    c.tp.d_head = 16;
    c.tp.d_model = 64;
    c.tp.clamp_len = r.clamp_len;
    c.tp.mem_len = r.mem_len;
    c.tp.same_length = r.same_length;
    c.qlen = r.qlen;
    c.mlen = r.mlen;
    c.dtype = r.dtype;
    c.negative_control = r.negative_control;
    c.seed = seed++;
    c.id = "transformer_xl_wt103s_h" + std::to_string(r.n_heads) + "_d16_dm64_" + r.tag +
           (r.negative_control ? "_ascending_invalid" : "") + "_" +
           std::string(dtype_short(r.dtype));
    c.description = std::string(r.negative_control ? "NEGATIVE CONTROL (ascending position "
                                                     "table in the expected values): "
                                                   : "") +
                    "Transformer-XL wt103-shaped attention (scaled down: d_model 64, " +
                    std::to_string(r.n_heads) + " heads, d_head 16), " + r.what + ", target " +
                    std::string(dtype_short(r.dtype));
    v.push_back(std::move(c));
  }
  return v;
}

constexpr double kQkRange = 0.5, kBiasRange = 0.5, kRnetRange = 0.25;

/// A dyadic input exactly representable in t, in [-range, range]: the same draw as
/// golden/cases/attention_case.cpp's (so q, k, v here are the case's own q, k, v).
double input_value(DType t, double range, std::uint64_t seed, std::uint64_t stream,
                   std::uint64_t i) {
  const int bits = t == DType::kBF16 ? 7 : (t == DType::kF16 ? 10 : 23);
  const std::int64_t lim = (std::int64_t{1} << bits) - 1;
  return range * std::ldexp(static_cast<double>(prng_int(seed, stream, i, lim)), -bits);
}

/// The case inputs as doubles, drawn exactly as attention_case_generate draws q, k, v (streams
/// 1-3) and on streams 4-6 for r_w_bias, r_r_bias and r_net.
TxlInputs<double> case_inputs(const TxlCase& c) {
  const std::int64_t klen = c.mlen + c.qlen, hd = c.tp.n_heads * c.tp.d_head;
  auto draw = [&](std::uint64_t stream, double range, std::int64_t n) {
    std::vector<double> x(static_cast<std::size_t>(n));
    for (std::size_t i = 0; i < x.size(); ++i) {
      x[i] = input_value(c.dtype, range, c.seed, stream, i);
    }
    return x;
  };
  TxlInputs<double> x;
  x.q = draw(1, kQkRange, c.qlen * hd);
  x.k = draw(2, kQkRange, klen * hd);
  x.v = draw(3, 1.0, klen * hd);
  x.u = draw(4, kBiasRange, hd);
  x.v_bias = draw(5, kBiasRange, hd);
  x.w_r = draw(6, kRnetRange, hd * c.tp.d_model);
  return x;
}

template <class Real>
TxlInputs<Real> to_real(const TxlInputs<double>& x) {
  auto cv = [](const std::vector<double>& v) { return std::vector<Real>(v.begin(), v.end()); };
  return {cv(x.q), cv(x.k), cv(x.v), cv(x.u), cv(x.v_bias), cv(x.w_r)};
}

/// The position table row r holds for klen keys, per convention: descending (the model) or
/// ascending (the negative control's mistake).
std::int64_t row_position(const TransformerXlParams& p, std::int64_t klen, std::int64_t row,
                          bool ascending) {
  return ascending ? reference::txl_clamp(p, row) : reference::txl_table_position(p, klen, row);
}

/// The position (i, j) reads after a correct rel-shift: that of row j + qlen - 1 - i.
std::int64_t read_position(const TransformerXlParams& p, std::int64_t qlen, std::int64_t klen,
                           std::int64_t i, std::int64_t j, bool ascending) {
  if (!ascending) return reference::txl_clamp(p, reference::txl_distance(klen - qlen, i, j));
  return row_position(p, klen, j + qlen - 1 - i, true);
}

/// The bias closure (scale * (u . k_j + BD_ij)) in Real: the reference's hooks for the model's
/// convention, the same terms over an ascending table for the negative control.
template <class Real>
std::function<Real(int, std::int64_t, std::int64_t)> bias_closure(const TxlCase& c,
                                                                  const TxlInputs<Real>& x,
                                                                  bool ascending) {
  const std::int64_t klen = c.mlen + c.qlen;
  if (!ascending) return reference::txl_hooks<Real>(c.tp, x, c.qlen, klen).bias;
  using std::sqrt;
  const Real scale = Real(1) / sqrt(Real(c.tp.d_head));
  struct Cache {
    std::vector<Real> omega;
    std::map<std::int64_t, std::vector<Real>> sinusoid;                   // by position
    std::map<std::pair<int, std::int64_t>, std::vector<Real>> projected;  // by (head, position)
  };
  auto cache = std::make_shared<Cache>();
  cache->omega = reference::txl_frequencies<Real>(c.tp);
  const TxlCase cc = c;
  return [cc, x, klen, scale, cache](int h, std::int64_t i, std::int64_t j) {
    if (j > cc.mlen + i) return Real(0);
    const std::int64_t pos = read_position(cc.tp, cc.qlen, klen, i, j, true);
    auto& r = cache->projected[{h, pos}];
    if (r.empty()) {
      auto& e = cache->sinusoid[pos];
      if (e.empty()) e = reference::txl_sinusoid(cache->omega, pos);
      r = reference::txl_project(cc.tp, x.w_r, h, e);
    }
    return scale * (reference::txl_uk(cc.tp, x, h, j) + reference::txl_bd_row(cc.tp, x, h, i, r));
  };
}

/// Absolute error bound of the float32 pipelines' bias (contract above), per (h, i, j).
class PipelineBiasError {
 public:
  PipelineBiasError(const TxlCase& c, const TxlInputs<double>& x) : c_(c), x_(x) {
    const int half = c.tp.d_model / 2;
    for (int k = 0; k < half; ++k) {
      omega_.push_back(std::pow(10000.0, -2.0 * k / c.tp.d_model));
      inv_freq_err_.push_back(budgets::hf_inv_freq_rel_error(10000.0, c.tp.d_model, k));
    }
    bias_ = reference::txl_hooks<double>(c.tp, x, c.qlen, c.mlen + c.qlen).bias;
  }

  double operator()(int h, std::int64_t i, std::int64_t j) const {
    const TransformerXlParams& p = c_.tp;
    const std::int64_t delta = c_.mlen + i - j;
    if (delta < 0) return 0.0;
    const std::int64_t pos = reference::txl_clamp(p, delta);
    const auto& w = weights(h, pos);
    const int d = p.d_head, H = p.n_heads;
    const double u = budgets::kU32, scale = 1.0 / std::sqrt(static_cast<double>(d));
    double a = 0, b = 0;
    for (int c = 0; c < d; ++c) {
      a += std::fabs(x_.u[h * d + c] * x_.k[(j * H + h) * d + c]);
      const double qv = std::fabs(x_.q[(i * H + h) * d + c] + x_.v_bias[h * d + c]);
      b += qv * ((p.d_model + d + 3) * u * w[2 * c] + w[2 * c + 1]);
    }
    double e = scale * ((d + 2) * u * a + b) + 2 * u * std::fabs(bias_(h, i, j));
    if (POSENC_MUTANT("gold_txl_pipeline_extra_dropped")) e = 0;
    return e;
  }

  double bias(int h, std::int64_t i, std::int64_t j) const { return bias_(h, i, j); }

 private:
  /// Per row x of head h: W_x.|R(pos)| and W_x.|dR(pos)|, interleaved [2 * d_head].
  const std::vector<double>& weights(int h, std::int64_t pos) const {
    auto& w = cache_[{h, pos}];
    if (!w.empty()) return w;
    const TransformerXlParams& p = c_.tp;
    const int half = p.d_model / 2;
    std::vector<double> r(static_cast<std::size_t>(p.d_model)), dr(r.size());
    const double rho_p = budgets::position_rel_error_f32(pos);
    for (int k = 0; k < half; ++k) {
      const double a = static_cast<double>(pos) * omega_[k];
      r[k] = std::fabs(std::sin(a));
      r[half + k] = std::fabs(std::cos(a));
      double angle_err = budgets::product_rel_error(rho_p, inv_freq_err_[k]) * a;
      if (POSENC_MUTANT("gold_txl_angle_error_dropped")) angle_err = 0;
      dr[k] = dr[half + k] = angle_err + 0x1p-23;
    }
    w.resize(static_cast<std::size_t>(2 * p.d_head));
    for (int x = 0; x < p.d_head; ++x) {
      const std::size_t row = static_cast<std::size_t>(h * p.d_head + x) * p.d_model;
      double s = 0, sd = 0;
      for (int m = 0; m < p.d_model; ++m) {
        s += std::fabs(x_.w_r[row + m]) * r[m];
        sd += std::fabs(x_.w_r[row + m]) * dr[m];
      }
      w[2 * x] = s;
      w[2 * x + 1] = sd;
    }
    return w;
  }

  TxlCase c_;
  TxlInputs<double> x_;
  std::vector<double> omega_, inv_freq_err_;
  std::function<double(int, std::int64_t, std::int64_t)> bias_;
  mutable std::map<std::pair<int, std::int64_t>, std::vector<double>> cache_;
};

// pos_emb budgets (as golden/schemes/sinusoidal/sinusoidal_golden.cpp's pe, c = 1; r = eps_f32 / eps_t):
//   strict   bound 0.1 r, ulps 0.5 (f32) or 0.5 + 0.5 r (16-bit): double, rounded once
//   fp32, fp32-recurrence, bf16   bound 1.01 r (sinf / cosf within 2 ulp <= eps_f32), ulps the
//            cast, extra |phi| rho_k 1.01: the float angle fl(fl(pos) inv_freq_k) (the same
//            PyTorch table for all three pipelines here)
ExpectedTensor pos_emb_expected(const TxlCase& c, bool ascending) {
  const std::int64_t klen = c.mlen + c.qlen;
  const int dm = c.tp.d_model, half = dm / 2;
  const DType t = c.dtype;
  const double r = budgets::f32_in(t), cast = budgets::cast_to(t), s = 1.01;
  const auto w50 = reference::txl_frequencies<mp50>(c.tp);
  const auto w100 = reference::txl_frequencies<mp100>(c.tp);
  std::vector<mp50> v50;
  std::vector<mp100> v100;
  std::vector<double> extra(static_cast<std::size_t>(klen * dm)), cond(extra.size(), 1.0);
  std::vector<std::int64_t> el_pos(extra.size());
  std::vector<double> rho(static_cast<std::size_t>(half));
  for (int k = 0; k < half; ++k) rho[k] = budgets::hf_inv_freq_rel_error(10000.0, dm, k);
  for (std::int64_t row = 0; row < klen; ++row) {
    const std::int64_t pos = row_position(c.tp, klen, row, ascending);
    const auto e50 = reference::txl_sinusoid(w50, pos);
    const auto e100 = reference::txl_sinusoid(w100, pos);
    v50.insert(v50.end(), e50.begin(), e50.end());
    v100.insert(v100.end(), e100.begin(), e100.end());
    const double rho_p = budgets::position_rel_error_f32(pos);
    for (int k = 0; k < half; ++k) {
      const double phi = static_cast<double>(pos) * static_cast<double>(w50[k]);
      double x = phi * budgets::product_rel_error(rho_p, rho[k]) * s;
      if (POSENC_MUTANT("gold_txl_angle_error_dropped")) x = 0;
      extra[row * dm + k] = extra[row * dm + half + k] = x;
      el_pos[row * dm + k] = el_pos[row * dm + half + k] = pos;
    }
  }
  cross_check(c.id, "pos_emb", t, v50, v100);
  ExpectedTensor e = expected_tensor("pos_emb", "table", t, {klen, dm}, CheckKind::kConditioned);
  e.spec.axes = {{"row", "", {}, {}}, {"channel", "", {}, {}}};
  e.values = v50;
  e.cond = cond;
  e.positions = el_pos;
  e.amp.assign(cond.size(), 1.0);
  const double sum_ulps = t == DType::kF32 ? 0.5 : 0.5 + 0.5 * r;
  for (const auto& prof : profiles()) {
    const std::string na = activation_na(prof.name, t);
    if (!na.empty()) {
      e.spec.check.profiles[prof.name] = not_applicable(na);
    } else if (prof.name == "strict") {
      e.spec.check.profiles[prof.name] = bound_of(0.1 * r, sum_ulps);
    } else {
      e.spec.check.profiles[prof.name] = bound_of(r * s, cast);
      e.extra[prof.name] = extra;
    }
  }
  return e;
}

GoldenCase txl_generate(const TxlCase& c) {
  const std::int64_t klen = c.mlen + c.qlen;
  const bool ascending = c.negative_control && !POSENC_MUTANT("gold_txl_control_not_flipped");
  const TxlInputs<double> x = case_inputs(c);
  const TxlInputs<mp50> x50 = to_real<mp50>(x);
  const TxlInputs<mp100> x100 = to_real<mp100>(x);
  AttentionCaseDef d;
  d.id = c.id;
  d.scheme = "transformer_xl";
  d.variant = c.tp.same_length ? "same_length" : "causal_memory";
  d.description = c.description;
  d.params = reference::txl_attention_params(c.tp, c.qlen, klen, "transformer_xl_generate");
  d.tq = c.qlen;
  d.tk = klen;
  d.dtype = c.dtype;
  d.seed = c.seed;
  d.value_range = kQkRange;
  d.bias50 = bias_closure<mp50>(c, x50, ascending);
  d.bias100 = bias_closure<mp100>(c, x100, ascending);
  auto err = std::make_shared<PipelineBiasError>(c, x);
  d.bias_rel_error = [err](const std::string&, int h, std::int64_t i, std::int64_t j) {
    const double b = std::fabs(err->bias(h, i, j));
    return b > 0 ? (*err)(h, i, j) / b : 0.0;
  };
  Json flags = {"TxlDescendingPositions", "TxlRelShift", "TxlContentBias", "TxlPositionBias",
                "KvCacheOffset"};
  if (klen > c.tp.clamp_len + 1) flags.push_back("TxlClampLen");
  if (c.tp.same_length) flags.push_back("TxlSameLength");
  d.extra = {{"citation", kCitation},
             {"preset",
              {{"name", "transfo-xl-wt103 (scaled down)"},
               {"hf_model", "transfo-xl/transfo-xl-wt103"},
               {"source", "TransfoXLConfig defaults; run_wt103_base.sh mem_len 150"},
               {"config",
                {{"d_model", 1024},
                 {"n_head", 16},
                 {"d_head", 64},
                 {"mem_len", 1600},
                 {"clamp_len", 1000},
                 {"same_length", true},
                 {"attn_type", 0}}},
               {"scaled_to",
                {{"d_model", c.tp.d_model}, {"n_head", c.tp.n_heads}, {"d_head", c.tp.d_head}}}}},
             {"flags", flags}};
  if (c.negative_control) {
    d.extra["result"] = "invalid";
    d.extra["negative_control"] = {
        {"mistake", "ascending-positions"},
        {"expected_values_use", "an ascending position table: row r holds position r"},
        {"meaning",
         "the expected tensors follow the WRONG position order; a correct engine differs "
         "from them (verify PASS), an engine with ascending positions reproduces them "
         "(verify FAIL)"}};
  }
  GoldenCase g = attention_case_generate(d);

  // The position stage and the extra inputs, added to the shared attention case.
  std::vector<std::int32_t> positions = reference::txl_position_matrix(c.tp, c.qlen, klen);
  if (ascending) {
    for (std::int64_t i = 0; i < c.qlen; ++i) {
      for (std::int64_t j = 0; j < klen; ++j) {
        auto& v = positions[static_cast<std::size_t>(i * klen + j)];
        if (v >= 0) v = static_cast<std::int32_t>(read_position(c.tp, c.qlen, klen, i, j, true));
      }
    }
  }
  const int H = c.tp.n_heads, dh = c.tp.d_head;
  std::vector<Tensor> in_t;
  in_t.push_back(input_tensor("r_w_bias", c.dtype, {H, dh}, x.u));
  in_t.push_back(input_tensor("r_r_bias", c.dtype, {H, dh}, x.v_bias));
  in_t.push_back(input_tensor("r_net", c.dtype, {H * dh, c.tp.d_model}, x.w_r));
  const Tensor t_pos = tensor_from_i32("rel_position", {c.qlen, klen}, positions);
  std::vector<ExpectedTensor> emb;
  if (c.pos_emb) emb.push_back(pos_emb_expected(c, ascending));
  Json& m = g.manifest;
  for (auto& t : in_t) {
    m["inputs"].push_back(tensor_spec_to_json(input_spec(t), false));
    g.tensors.push_back(std::move(t));
  }
  ExpectedTensor ep;
  ep.spec = {"rel_position",
             "table",
             DType::kI32,
             {c.qlen, klen},
             "",
             {CheckKind::kExact, exact_budgets(c.dtype)},
             {{"query", "query_positions", {}, {}}, {"key", "key_positions", {}, {}}}};
  ep.exact_tensor = &t_pos;
  const TensorSpec sp = add_expected(&g.tensors, std::move(ep));
  Json ex = Json::array({tensor_spec_to_json(sp, true)});
  for (auto& e : emb)
    ex.push_back(tensor_spec_to_json(add_expected(&g.tensors, std::move(e)), true));
  for (const auto& e : m["expected"]) ex.push_back(e);
  m["expected"] = ex;
  m["params"]["d_model"] = c.tp.d_model;
  m["params"]["d_head"] = c.tp.d_head;
  m["params"]["clamp_len"] = c.tp.clamp_len;
  m["params"]["mem_len"] = c.tp.mem_len;
  m["params"]["same_length"] = c.tp.same_length;
  m["params"]["mlen"] = c.mlen;
  m["params"]["qlen"] = c.qlen;
  m["params"]["klen"] = klen;
  m["params"]["has_pos_emb"] = c.pos_emb;
  m["conventions"]["scores"] =
      "s_ij = ((q_i + r_w_bias) . k_j + (q_i + r_r_bias) . r_net(R(pos_ij))) / sqrt(d_head)";
  m["conventions"]["positions"] =
      "query i at absolute position mlen + i (memory keys first), key j at j; the sinusoid "
      "table is DESCENDING (row r holds klen - 1 - r) and the rel-shift makes (i, j) read "
      "pos_ij = min(mlen + i - j, clamp_len) (query minus key)";
  m["conventions"]["sinusoid"] =
      "R(pos) = [sin(pos w_k) | cos(pos w_k)] (halves concatenated), w_k = 10000^(-2k/d_model)";
  m["conventions"]["masks"] =
      "causal: key j visible iff j <= mlen + i (triu(ones(qlen, klen), 1 + mlen) masked); "
      "same_length: also masked when mlen + i - j >= mem_len (the window of the params)";
  m["conventions"]["rel_position"] = "rel_position[i, j] = pos_ij for visible keys, -1 masked";
  m["conventions"]["pos_emb"] =
      "pos_emb [klen, d_model]: row r = R(min(klen - 1 - r, clamp_len)), the engines' "
      "descending table before r_net (absent from the long evaluation case, for size)";
  m["conventions"]["layout"] =
      "q [qlen, H, d_head], k and v [klen, H, d_head], r_w_bias and r_r_bias [H, d_head], "
      "r_net [H * d_head, d_model] (nn.Linear weight), out [qlen, H, d_head], probs [H, qlen, "
      "klen], rel_position [qlen, klen]";
  m["detection"] = Json::array({{{"flag", "TxlContentBias"},
                                 {"stages", {"probs", "out"}},
                                 {"blind", "rel_position does not read r_w_bias or r_r_bias"}},
                                {{"flag", "TxlDescendingPositions"},
                                 {"stages", {"rel_position", "probs", "out"}},
                                 {"blind", ""}}});
  m["prng"] =
      "splitmix64 counter: value(seed, stream, i); stream 1 = q, 2 = k, 3 = v, 4 = r_w_bias, "
      "5 = r_r_bias, 6 = r_net (dyadic, exact in the target dtype; ranges 0.5, 0.5, 1, 0.5, "
      "0.5, 0.25)";
  m["pipelines"] = {
      {"fp32",
       "PyTorch eager float32: inv_freq = 1 / powf(10000, 2k / d_model), angle = "
       "fl(pos * inv_freq), sinf / cosf, r_net, the AC and BD dot products in float32 "
       "(budget extra: the angle's error grows with the position)"},
      {"bf16", "the bias as fp32, then attention_case's bf16 eager attention"}};
  return g;
}

// ---- the case table ----------------------------------------------------------------------------

std::vector<CaseRow> transformer_xl_cases() {
  std::vector<CaseRow> rows;
  for (const auto& c : txl_cases()) rows.push_back({c.id, c.description});
  return rows;
}

GoldenCase transformer_xl_generate(const std::string& id) {
  for (const auto& c : txl_cases()) {
    if (c.id == id) return txl_generate(c);
  }
  throw_invalid("transformer_xl_generate", "no transformer_xl case has this id", id);
}

// ---- the built-in engine: posenc's optimized kernels, fed and read through files ----------------

/// The engine mistakes and their words: the bug in engine terms, as diagnose names it.
const std::vector<std::pair<std::string, std::string>>& txl_mistake_table() {
  static const std::vector<std::pair<std::string, std::string>> v = {
      {"ascending-positions", "the position table R in ascending order (row r holds position r)"},
      {"rel-shift-off-by-one", "rel-shift dropping the wrong row of the padded buffer ([:-1] for [1:])"},
      {"no-u", "the content bias u (r_w_bias) missing"},
      {"no-v", "the position bias v (r_r_bias) missing"},
      {"clamp-ignored", "clamp_len not applied to the distances"},
      {"rel-shift-one-column", "rel-shift by one column: the zero column padded on the right, every "
                               "distance one short and the query's own key reading the pad"},
      {"no-rel-shift", "rel-shift missing: key j reads row j of R whatever the query"},
      {"memory-dropped", "segment memory restarted: the memory keys are not attended"}};
  return v;
}

std::vector<std::string> transformer_xl_mistakes() {
  std::vector<std::string> names;
  for (const auto& m : txl_mistake_table()) names.push_back(m.first);
  return names;
}

std::string transformer_xl_mistake_words(const std::string& mistake) {
  for (const auto& m : txl_mistake_table()) {
    if (m.first == mistake) return m.second;
  }
  return "";
}

/// A bias materialised as [H, qlen, klen] (the mistaken engines and the float pipelines).
class MatrixBias final : public optimized::AttentionBias {
 public:
  MatrixBias(std::vector<float> b, std::int64_t qlen, std::int64_t klen)
      : b_(std::move(b)), qlen_(qlen), klen_(klen) {}
  void fill(int head, std::int64_t q0, int nq, std::int64_t k0, int nk,
            float* tile) const override {
    for (int r = 0; r < nq; ++r) {
      for (int c = 0; c < nk; ++c) tile[r * nk + c] = at(head, q0 + r, k0 + c);
    }
  }
  float at(int h, std::int64_t i, std::int64_t j) const {
    return b_[static_cast<std::size_t>((h * qlen_ + i) * klen_ + j)];
  }

 private:
  std::vector<float> b_;
  std::int64_t qlen_, klen_;
};

/// A mistaken engine: the rel-shift route in double with one deliberate bug; returns the bias
/// [H, qlen, klen] and the positions read ([qlen, klen], -1 for the zero pad or a future key).
struct MistakeResult {
  std::vector<float> bias;
  std::vector<std::int32_t> positions;
  std::vector<float> pos_emb;  // [klen, d_model]
};

/// pos_emb rows at the given positions, double rounded to float.
std::vector<float> emb_rows(int d_model, const std::vector<std::int64_t>& row_pos) {
  const int half = d_model / 2;
  std::vector<float> e(row_pos.size() * d_model);
  for (std::size_t row = 0; row < row_pos.size(); ++row) {
    for (int k = 0; k < half; ++k) {
      const double a = static_cast<double>(row_pos[row]) * std::pow(10000.0, -2.0 * k / d_model);
      e[row * d_model + k] = static_cast<float>(std::sin(a));
      e[row * d_model + half + k] = static_cast<float>(std::cos(a));
    }
  }
  return e;
}

MistakeResult mistaken_bias(const TransformerXlParams& p0, std::int64_t qlen, std::int64_t klen,
                            const TxlInputs<float>& x, const std::string& mistake) {
  TransformerXlParams p = p0;
  if (kMistakes.is(mistake, MistakeId::kClampIgnored)) p.clamp_len = 0;
  const bool ascending =
      kMistakes.is(mistake, MistakeId::kAscendingPositions) && !POSENC_MUTANT("engine_txl_ascending_noop");
  const bool off_by_one = kMistakes.is(mistake, MistakeId::kRelShiftOffByOne);
  const bool pad_right = kMistakes.is(mistake, MistakeId::kRelShiftOneColumn), unshifted = kMistakes.is(mistake, MistakeId::kNoRelShift);
  const bool no_memory = kMistakes.is(mistake, MistakeId::kMemoryDropped);
  const int H = p.n_heads, d = p.d_head, hd = H * d;
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  const std::vector<double> r = optimized::txl_r_table(p, klen, x.w_r);  // positions 0..klen-1
  std::vector<std::int64_t> row_pos(static_cast<std::size_t>(klen));
  for (std::int64_t row = 0; row < klen; ++row)
    row_pos[row] = row_position(p, klen, row, ascending);
  // Padded [qlen, klen + 1] buffer of raw indices: -1 = the zero column, else the table row.
  // The shift reads flat element skip + i * klen + j, skip = qlen (`[1:]`) or 0 (`[:-1]`). The
  // zero column is column 0 (column klen when padded on the right); unshifted: row j directly.
  const std::int64_t skip = off_by_one ? 0 : qlen;
  const std::int64_t mlen = klen - qlen;
  MistakeResult res;
  res.pos_emb = emb_rows(p.d_model, row_pos);
  res.bias.assign(static_cast<std::size_t>(H * qlen * klen), 0.0f);
  res.positions.assign(static_cast<std::size_t>(qlen * klen), -1);
  for (std::int64_t i = 0; i < qlen; ++i) {
    for (std::int64_t j = 0; j < klen; ++j) {
      if (j > klen - qlen + i) continue;  // a future key: masked
      if (no_memory && j < mlen) {  // not attended: a bias far below every other score
        for (int h = 0; h < H; ++h) res.bias[(h * qlen + i) * klen + j] = -1e30f;
        continue;
      }
      const std::int64_t f = skip + i * klen + j;
      std::int64_t src_i = f / (klen + 1), col = f % (klen + 1);
      if (unshifted) {
        src_i = i;
        col = j + 1;
      }
      const std::int64_t row = pad_right ? col : col - 1;  // the table row, or the pad
      const std::int64_t pos = row < 0 || row >= klen ? -1 : row_pos[row];
      res.positions[i * klen + j] = static_cast<std::int32_t>(pos);
      for (int h = 0; h < H; ++h) {
        double uk = 0, bd = 0;
        for (int c = 0; c < d; ++c) {
          if (!kMistakes.is(mistake, MistakeId::kNoU))
            uk += static_cast<double>(x.u[h * d + c]) * x.k[(j * H + h) * d + c];
          if (pos >= 0) {
            const double qv = static_cast<double>(x.q[(src_i * H + h) * d + c]) +
                              (kMistakes.is(mistake, MistakeId::kNoV) ? 0.0 : x.v_bias[h * d + c]);
            bd += qv * r[static_cast<std::size_t>(pos) * hd + h * d + c];
          }
        }
        res.bias[(h * qlen + i) * klen + j] = static_cast<float>(scale * (uk + bd));
      }
    }
  }
  return res;
}

/// The float32 PyTorch pipeline's bias [H, qlen, klen] (contract at the top).
std::vector<float> pipeline_bias(const TransformerXlParams& p, std::int64_t qlen, std::int64_t klen,
                                 const TxlInputs<float>& x, std::vector<float>* pos_emb) {
  const int H = p.n_heads, d = p.d_head, dm = p.d_model, half = dm / 2;
  const std::vector<float> inv_freq = pipelines::hf_inv_freq(10000.0, dm);
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
  const bool clamp = !POSENC_MUTANT("engine_txl_pipeline_no_clamp");
  const std::int64_t mlen = klen - qlen;
  std::vector<std::vector<float>> rh(static_cast<std::size_t>(klen));  // by position
  const auto emb_of = [&](std::int64_t pos) {
    std::vector<float> emb(static_cast<std::size_t>(dm));
    const float pf = static_cast<float>(pos);
    for (int k = 0; k < half; ++k) {
      const float a = pf * inv_freq[k];
      emb[k] = std::sin(a);
      emb[half + k] = std::cos(a);
    }
    return emb;
  };
  pos_emb->assign(static_cast<std::size_t>(klen * dm), 0.0f);
  for (std::int64_t row = 0; row < klen; ++row) {
    std::int64_t pos = klen - 1 - row;
    if (clamp && p.clamp_len > 0) pos = std::min(pos, p.clamp_len);
    const auto e = emb_of(pos);
    std::copy(e.begin(), e.end(), pos_emb->begin() + row * dm);
  }
  auto r_of = [&](std::int64_t pos) -> const std::vector<float>& {
    auto& v = rh[static_cast<std::size_t>(pos)];
    if (!v.empty()) return v;
    const std::vector<float> emb = emb_of(pos);
    v.resize(static_cast<std::size_t>(H * d));
    for (int o = 0; o < H * d; ++o) {
      float s = 0;
      for (int m = 0; m < dm; ++m) s += x.w_r[static_cast<std::size_t>(o) * dm + m] * emb[m];
      v[o] = s;
    }
    return v;
  };
  std::vector<float> b(static_cast<std::size_t>(H * qlen * klen), 0.0f);
  for (std::int64_t i = 0; i < qlen; ++i) {
    for (std::int64_t j = 0; j <= std::min(klen - 1, mlen + i); ++j) {
      std::int64_t pos = mlen + i - j;
      if (clamp && p.clamp_len > 0) pos = std::min(pos, p.clamp_len);
      const auto& r = r_of(pos);
      for (int h = 0; h < H; ++h) {
        float uk = 0, bd = 0;
        for (int c = 0; c < d; ++c) {
          uk += x.u[h * d + c] * x.k[(j * H + h) * d + c];
          bd += (x.q[(i * H + h) * d + c] + x.v_bias[h * d + c]) * r[h * d + c];
        }
        b[(h * qlen + i) * klen + j] = (uk + bd) * scale;
      }
    }
  }
  return b;
}

TensorMap transformer_xl_run_engine(const CaseSpec& spec, const TensorMap& golden,
                                    const EngineOptions& o) {
  const auto& mk = transformer_xl_mistakes();
  if (!o.mistake.empty() && std::find(mk.begin(), mk.end(), o.mistake) == mk.end()) {
    std::string known;
    for (const auto& m : mk) known += (known.empty() ? "" : ", ") + m;
    throw_invalid("transformer_xl_run_engine", "unknown mistake (known: " + known + ")", o.mistake);
  }
  if (pipelines::of(o.pipeline) != Pipeline::kExact && !o.mistake.empty()) {
    throw_invalid("transformer_xl_run_engine", "mistakes run on the exact pipeline only",
                  o.mistake);
  }
  const AttentionParams ap = attention_params_from_manifest(spec.manifest);
  const Json& pj = spec.manifest.at("params");
  TransformerXlParams tp;
  tp.n_heads = ap.n_heads;
  tp.d_head = pj.at("d_head").get<int>();
  tp.d_model = pj.at("d_model").get<int>();
  tp.clamp_len = pj.at("clamp_len").get<std::int64_t>();
  tp.mem_len = pj.at("mem_len").get<std::int64_t>();
  tp.same_length = pj.at("same_length").get<bool>();
  const std::int64_t qlen = pj.at("qlen").get<std::int64_t>(),
                     klen = pj.at("klen").get<std::int64_t>();
  TxlInputs<float> x;
  x.q = tensor_to_f32(golden.at("q"));
  x.k = tensor_to_f32(golden.at("k"));
  x.u = tensor_to_f32(golden.at("r_w_bias"));
  x.v_bias = tensor_to_f32(golden.at("r_r_bias"));
  x.w_r = tensor_to_f32(golden.at("r_net"));
  const auto visible = [&](std::int64_t i, std::int64_t j) {
    return reference::attention_visible(ap, reference::AttentionMask{}, klen, i, j);
  };
  std::vector<std::int32_t> positions(static_cast<std::size_t>(qlen * klen), -1);
  std::vector<float> pos_emb(static_cast<std::size_t>(klen * tp.d_model));
  TensorMap res;
  if (pipelines::of(o.pipeline) != Pipeline::kExact) {
    const MatrixBias b(pipeline_bias(tp, qlen, klen, x, &pos_emb), qlen, klen);
    const PipelineBias pb = [&b](int h, std::int64_t i, std::int64_t j) { return b.at(h, i, j); };
    res = attention_case_run_pipeline(spec, golden, o.pipeline, pb, ap);
    for (std::int64_t i = 0; i < qlen; ++i) {
      for (std::int64_t j = 0; j < klen; ++j) {
        if (visible(i, j)) {
          positions[i * klen + j] =
              static_cast<std::int32_t>(reference::txl_clamp(tp, klen - qlen + i - j));
        }
      }
    }
  } else if (!o.mistake.empty()) {
    MistakeResult mr = mistaken_bias(tp, qlen, klen, x, o.mistake);
    const MatrixBias b(std::move(mr.bias), qlen, klen);
    pos_emb = std::move(mr.pos_emb);
    res = attention_case_run_engine(spec, golden, &b, ap);
    for (std::int64_t i = 0; i < qlen; ++i) {
      for (std::int64_t j = 0; j < klen; ++j) {
        if (visible(i, j)) positions[i * klen + j] = mr.positions[i * klen + j];
      }
    }
  } else {
    const optimized::TransformerXlBias b(tp, qlen, klen, x.q, x.k, x.u, x.v_bias, x.w_r);
    res = attention_case_run_engine(spec, golden, &b, ap);
    optimized::txl_pos_emb(tp, klen, pos_emb);
    for (std::int64_t i = 0; i < qlen; ++i) {
      for (std::int64_t j = 0; j < klen; ++j) {
        if (visible(i, j)) positions[i * klen + j] = b.position(i, j);
      }
    }
  }
  res.emplace("rel_position", tensor_from_i32("rel_position", {qlen, klen}, positions));
  if (pj.value("has_pos_emb", false)) {
    res.emplace("pos_emb",
                engine_tensor("pos_emb", golden.at("q").dtype, {klen, tp.d_model}, pos_emb));
  }
  return res;
}

}  // namespace

SchemeEntry transformer_xl_scheme() {
  SchemeEntry e{"transformer_xl",
                "Transformer-XL relative attention: descending sinusoid table, rel-shift, "
                "u/v biases, clamp_len, segment memory",
                &transformer_xl_cases,
                &transformer_xl_generate,
                &transformer_xl_run_engine,
                &transformer_xl_mistakes,
                &transformer_xl_mistake_words};
  e.order = 110;  // its place in `posenc list` and the catalog
  return e;
}

}  // namespace posenc::golden
