// -----------------------------------------------------------------------------
// DeBERTa-v2/v3 disentangled attention: content and relative-position terms (reference)
// -----------------------------------------------------------------------------
// Formula (code indices 0-based; query i at absolute position P = query_offset + i, key j at
// position j; H heads of size d; m = floor(position_buckets / 2)):
//
//   delta_ij = P - j                              relative position: QUERY minus KEY (the
//                                                 opposite sign of T5's key - query)
//   log buckets (position_buckets > 0, max_relative_positions M > 0), HF
//   make_log_bucket_position(r, bucket_size = position_buckets, max_position = M):
//     a(r) = m - 1 if -m < r < m, else |r|
//     b(r) = r                                                         if a(r) <= m
//          = sign(r) * (ceil(ln(a / m) / ln((M - 1) / m) * (m - 1)) + m)   otherwise
//     so |r| <= m is kept exact and larger distances are log-compressed; |r| = M - 1 gives
//     exactly m - 1 before the ceil (bucket 2m - 1), larger |r| give more (clamped below).
//   rel_ij = b(delta_ij) (or delta_ij itself without buckets)
//   k = att_span = position_buckets if > 0 else M;  rows 0 .. 2k - 1 of the table P are used
//   c_ij = clamp(rel_ij + k, 0, 2k - 1)            the row of the relative table, for c2p
//                                                 AND p2c (see below)
//   Kr = P Wk^T + bk,  Qr = P Wq^T + bq            [2k, H*d]; share_att_key: Wk, bk, Wq, bq are
//                                                 the content key_proj / query_proj; otherwise
//                                                 pos_key_proj (c2p) / pos_query_proj (p2c)
//   sf = 1 + [c2p] + [p2c]                         scale_factor
//   s_hij = (q_hi . k_hj + [c2p] q_hi . Kr_h,c_ij + [p2c] k_hj . Qr_h,c_ij) / sqrt(d * sf)
//   softmax over visible keys (reference/attention.hpp's masks), o_i = sum_j p_ij v_j.
//
//   The p2c index: HF computes p2c_att[j, c] = k_j . Qr_c, gathers it with
//   clamp(-rel(j, i) + k) on the key-major matrix and transposes, so the entry of (query i,
//   key j) uses clamp(-rel_ji + k) = clamp(rel_ij + k) (b is odd: b(-r) = -b(r)): the SAME
//   index as c2p, not the paper's literal delta(j, i) (an engine "p2c-literal-index" mistake
//   and this scheme's negative control; nntrainer PR #3982 confirms the same reading).
//
//   Exactness of the ceil: x = (m - 1) ln(a / m) / ln((M - 1) / m) > 0. For an integer n,
//   x <= n  <=>  (M - 1)^n m^(m - 1) >= a^(m - 1) m^n  (integers, all terms positive). This file
//   computes x in double (error a few 2^-53 x) and decides with boost cpp_int whenever x lies
//   within 2^-20 of an integer. The endpoint a = M - 1 is such a tie (x = m - 1 exactly).
//   HF's float32 form (ln of the float32 ratio a / m, divided by ln of float32((M - 1) / m),
//   times m - 1, all in float32, then ceil) is deberta_log_bucket_f32 below; a test searches
//   where the two differ (none for |r| <= 4096 with the v3 preset 256 / 512).
//
//   Query length != key length: HF's c2p works for any Tq, Tk (queries at 0 .. Tq - 1). HF's
//   p2c rebuilds the relative positions from key x key when Tq != Tk ([Tk, Tk] matrix), so the
//   p2c term is [Tk, Tk] and adding it to the [Tq, Tk] scores fails (a broadcast error; for
//   Tq = 1 it broadcasts to Tk rows and the later view fails). This reference instead defines
//   the p2c term of query i for any Tq via query_offset: rows query_offset .. of the full
//   Tk x Tk forward (which HF's key x key matrix also holds); for Tq == Tk and query_offset 0
//   both agree, and that is the only p2c case HF can run.
//
//   Symbols: DebertaParams below; HF names in brackets there.
//
// Source: P. He, X. Liu, J. Gao, W. Chen, "DeBERTa: Decoding-enhanced BERT with Disentangled
//   Attention", arXiv:2006.03654v6, Sec. 3.1 (eqs. 2-4: c2c + c2p + p2c, relative distance
//   delta(i, j) clamped to [0, 2k), scale 1/sqrt(3d)); P. He, J. Gao, W. Chen, "DeBERTaV3",
//   arXiv:2111.09543v4 (v3 keeps the v2 attention). Log buckets, att_span, share_att_key and
//   the p2c index are those of the released code (huggingface/transformers
//   models/deberta_v2/modeling_deberta_v2.py: make_log_bucket_position, build_relative_position,
//   DisentangledSelfAttention.disentangled_attention_bias); docs/schemes/deberta.md.
// Index note: the paper writes delta(i, j) = i - j clamped, and p2c with delta(j, i); the code
//   uses c(i, j) for both (see above). All positions 0-based.
// Names elsewhere: HF config position_buckets, max_relative_positions (< 1: use
//   max_position_embeddings), pos_att_type ("p2c|c2p", split on '|', lower-cased), share_att_key;
//   rel_embeddings (nn.Embedding [2k, hidden], LayerNorm-ed when norm_rel_ebd has layer_norm);
//   microsoft/DeBERTa disentangled_attention_bias; nntrainer's DeBERTa port.
// Not modelled: the LayerNorm of the relative table (an input here: rel_embeddings as the
//   attention sees it), dropout, the enhanced mask decoder, p2p (HF ignores it, issue #14621),
//   the v1 (DeBERTa, non-v2) code path, the hidden states and content projections (q, k, v are
//   inputs, already projected and split into heads).
#pragma once
#include <algorithm>
#include <boost/multiprecision/cpp_int.hpp>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "reference/attention.hpp"
#include "reference/common/errors.hpp"

namespace posenc::reference {

/// Largest position_buckets and max_relative_positions the exactness argument above covers.
inline constexpr int kDebertaMaxBuckets = 4096;
inline constexpr std::int64_t kDebertaMaxPosition = std::int64_t{1} << 30;

/// Configuration shared by reference, optimized, properties and golden code.
struct DebertaParams {
  int position_buckets = 256;                 // [position_buckets]; <= 0: no log buckets
  std::int64_t max_relative_positions = 512;  // [max_relative_positions], already resolved (> 0)
  bool c2p = true;                            // "c2p" in [pos_att_type]
  bool p2c = true;                            // "p2c" in [pos_att_type]
  bool share_att_key = true;                  // [share_att_key]
  int n_heads = 1;                            // [num_attention_heads]
  int head_dim = 64;                          // [attention_head_size]
};

/// The attention types of an HF pos_att_type string ("p2c|c2p"): split on '|', trimmed and
/// lower-cased; "p2p" is accepted and ignored (HF issue #14621); anything else is rejected.
struct DebertaAttTypes {
  bool c2p = false, p2c = false;
};
inline DebertaAttTypes deberta_parse_pos_att_type(const std::string& s) {
  DebertaAttTypes t;
  std::size_t start = 0;
  while (start <= s.size()) {
    std::size_t end = s.find('|', start);
    if (end == std::string::npos) end = s.size();
    std::string tok = s.substr(start, end - start);
    const auto b = tok.find_first_not_of(" \t"), e = tok.find_last_not_of(" \t");
    tok = b == std::string::npos ? "" : tok.substr(b, e - b + 1);
    for (char& ch : tok) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    if (tok == "c2p") {
      t.c2p = true;
    } else if (tok == "p2c") {
      t.p2c = true;
    } else if (tok != "p2p" && !(tok.empty() && s.find_first_not_of(" \t") == std::string::npos)) {
      throw_invalid("deberta_parse_pos_att_type",
                    "each '|'-separated entry must be c2p, p2c or p2p (ignored), got '" + tok + "'",
                    s);
    }
    start = end + 1;
  }
  return t;
}

/// HF's rule: max_relative_positions < 1 means max_position_embeddings.
inline std::int64_t deberta_resolve_max_relative_positions(std::int64_t max_relative_positions,
                                                           std::int64_t max_position_embeddings) {
  return max_relative_positions < 1 ? max_position_embeddings : max_relative_positions;
}

/// k = att_span: position_buckets if > 0 else max_relative_positions.
inline std::int64_t deberta_att_span(const DebertaParams& p) {
  return p.position_buckets > 0 ? p.position_buckets : p.max_relative_positions;
}

/// sf = 1 + [c2p] + [p2c].
inline int deberta_scale_factor(const DebertaParams& p) {
  return 1 + (p.c2p ? 1 : 0) + (p.p2c ? 1 : 0);
}

/// Throws InvalidArgument naming `function` for bucket arguments the formula cannot take.
inline void deberta_check_buckets(int bucket_size, std::int64_t max_position,
                                  const char* function = "deberta_check_buckets") {
  if (bucket_size < 2 || bucket_size > kDebertaMaxBuckets) {
    throw_invalid(function, "position_buckets must lie in [2, 4096] (m = buckets / 2 >= 1)",
                  bucket_size);
  }
  const std::int64_t mid = bucket_size / 2;
  if (max_position - 1 <= mid || max_position > kDebertaMaxPosition) {
    throw_invalid(function,
                  "max_relative_positions must exceed position_buckets / 2 + 1 = " +
                      std::to_string(mid + 1) + " (ln((M - 1) / m) > 0) and be at most 2^30",
                  max_position);
  }
}

/// Throws InvalidArgument naming `function` unless p is a valid configuration.
inline void deberta_check(const DebertaParams& p, const char* function = "deberta_check") {
  if (p.max_relative_positions < 1) {
    throw_invalid(function,
                  "max_relative_positions must be >= 1 (resolve < 1 to max_position_embeddings "
                  "first)",
                  p.max_relative_positions);
  }
  if (p.position_buckets > 0)
    deberta_check_buckets(p.position_buckets, p.max_relative_positions, function);
  if (p.position_buckets <= 0 && p.max_relative_positions > kDebertaMaxPosition) {
    throw_invalid(function, "max_relative_positions must be at most 2^30",
                  p.max_relative_positions);
  }
  if (p.n_heads <= 0) throw_invalid(function, "n_heads must be positive", p.n_heads);
  if (p.head_dim <= 0) throw_invalid(function, "head_dim must be positive", p.head_dim);
}

namespace detail {

/// x <= n for x = (m - 1) ln(a / m) / ln((M - 1) / m), decided exactly (see the header).
inline bool deberta_log_at_most(std::uint64_t a, std::int64_t mid, std::int64_t max_position,
                                std::int64_t n) {
  using boost::multiprecision::cpp_int;
  using boost::multiprecision::pow;
  const auto um = static_cast<unsigned>(mid - 1), un = static_cast<unsigned>(n);
  return pow(cpp_int(max_position - 1), un) * pow(cpp_int(mid), um) >=
         pow(cpp_int(a), um) * pow(cpp_int(mid), un);
}

/// ceil(x), exactly.
inline std::int64_t deberta_log_steps(std::uint64_t a, std::int64_t mid,
                                      std::int64_t max_position) {
  const double x = static_cast<double>(mid - 1) *
                   (std::log(static_cast<double>(a) / static_cast<double>(mid)) /
                    std::log(static_cast<double>(max_position - 1) / static_cast<double>(mid)));
  const double n = std::nearbyint(x);
  if (std::fabs(x - n) > 0x1p-20) return static_cast<std::int64_t>(std::ceil(x));
  const auto ni = static_cast<std::int64_t>(n);
  if (ni < 0) return 0;  // unreachable: a > m makes x > 0
  return deberta_log_at_most(a, mid, max_position, ni) ? ni : ni + 1;
}

}  // namespace detail

/// HF make_log_bucket_position(r, bucket_size, max_position), exactly.
inline std::int64_t deberta_log_bucket(std::int64_t r, int bucket_size, std::int64_t max_position) {
  deberta_check_buckets(bucket_size, max_position, "deberta_log_bucket");
  const std::int64_t mid = bucket_size / 2;
  const std::uint64_t mag =
      r < 0 ? std::uint64_t{0} - static_cast<std::uint64_t>(r) : static_cast<std::uint64_t>(r);
  const std::uint64_t a = (-mid < r && r < mid) ? static_cast<std::uint64_t>(mid - 1) : mag;
  if (a <= static_cast<std::uint64_t>(mid)) return r;
  const std::int64_t log = detail::deberta_log_steps(a, mid, max_position) + mid;
  return r < 0 ? -log : log;
}

/// HF's float32 evaluation of make_log_bucket_position: ln(float32(a) / float32(m)) /
/// ln(float32((M - 1) / m computed in double)) * float32(m - 1), in float32 (logf), then ceil.
inline std::int64_t deberta_log_bucket_f32(std::int64_t r, int bucket_size,
                                           std::int64_t max_position) {
  deberta_check_buckets(bucket_size, max_position, "deberta_log_bucket_f32");
  const std::int64_t mid = bucket_size / 2;
  const std::int64_t a = (-mid < r && r < mid) ? mid - 1 : (r < 0 ? -r : r);
  if (a <= mid) return r;
  const float ratio = static_cast<float>(a) / static_cast<float>(mid);
  const float den = std::log(
      static_cast<float>(static_cast<double>(max_position - 1) / static_cast<double>(mid)));
  const float x = std::log(ratio) / den * static_cast<float>(mid - 1);
  const float log = std::ceil(x) + static_cast<float>(mid);
  return r < 0 ? -static_cast<std::int64_t>(log) : static_cast<std::int64_t>(log);
}

/// rel = b(query_pos - key_pos) (or the plain difference without buckets).
inline std::int64_t deberta_relative_position(const DebertaParams& p, std::int64_t query_pos,
                                              std::int64_t key_pos) {
  const std::int64_t delta = query_pos - key_pos;
  if (p.position_buckets > 0 && p.max_relative_positions > 0) {
    return deberta_log_bucket(delta, p.position_buckets, p.max_relative_positions);
  }
  return delta;
}

/// Whether HF's eager DisentangledSelfAttention runs a [Tq, Tk] block (queries 0 .. Tq - 1):
/// c2p runs for any lengths; with p2c and Tq != Tk HF rebuilds the relative positions from
/// key x key, so its p2c term is [Tk, Tk] and adding it to the [Tq, Tk] scores fails.
inline bool deberta_hf_runs_shape(const DebertaParams& p, std::int64_t tq, std::int64_t tk) {
  return !p.p2c || tq == tk;
}

/// c = clamp(rel + k, 0, 2k - 1): the row of the relative table for c2p and p2c.
inline std::int64_t deberta_index_of(const DebertaParams& p, std::int64_t rel) {
  const std::int64_t k = deberta_att_span(p);
  return std::clamp<std::int64_t>(rel + k, 0, 2 * k - 1);
}

/// c2p index of (query position, key position).
inline std::int64_t deberta_c2p_index(const DebertaParams& p, std::int64_t query_pos,
                                      std::int64_t key_pos) {
  return deberta_index_of(p, deberta_relative_position(p, query_pos, key_pos));
}

/// p2c index: the same as c2p (see the header).
inline std::int64_t deberta_p2c_index(const DebertaParams& p, std::int64_t query_pos,
                                      std::int64_t key_pos) {
  return deberta_index_of(p, deberta_relative_position(p, query_pos, key_pos));
}

/// Relative positions [Tq, Tk] (bucketed) of queries at query_offset + i against keys 0 .. Tk-1.
inline std::vector<std::int32_t> deberta_relative_matrix(const DebertaParams& p, std::int64_t tq,
                                                         std::int64_t tk,
                                                         std::int64_t query_offset) {
  deberta_check(p, "deberta_relative_matrix");
  std::vector<std::int32_t> r(static_cast<std::size_t>(tq * tk));
  for (std::int64_t i = 0; i < tq; ++i) {
    for (std::int64_t j = 0; j < tk; ++j) {
      r[static_cast<std::size_t>(i * tk + j)] =
          static_cast<std::int32_t>(deberta_relative_position(p, query_offset + i, j));
    }
  }
  return r;
}

/// Indices c_ij [Tq, Tk].
inline std::vector<std::int32_t> deberta_index_matrix(const DebertaParams& p, std::int64_t tq,
                                                      std::int64_t tk, std::int64_t query_offset) {
  deberta_check(p, "deberta_index_matrix");
  std::vector<std::int32_t> c(static_cast<std::size_t>(tq * tk));
  for (std::int64_t i = 0; i < tq; ++i) {
    for (std::int64_t j = 0; j < tk; ++j) {
      c[static_cast<std::size_t>(i * tk + j)] =
          static_cast<std::int32_t>(deberta_c2p_index(p, query_offset + i, j));
    }
  }
  return c;
}

/// The relative table and projection weights (HF nn.Linear layout: weight [out, in]).
/// hidden = rel_embeddings row width; out = n_heads * head_dim.
template <class Real>
struct DebertaWeights {
  std::int64_t hidden = 0;
  std::vector<Real> rel_embeddings;            // [2k, hidden] (rows 0 .. 2k - 1 of the table)
  std::vector<Real> key_w, key_b;              // key_proj [H*d, hidden], [H*d]
  std::vector<Real> query_w, query_b;          // query_proj
  std::vector<Real> pos_key_w, pos_key_b;      // pos_key_proj (c2p when !share_att_key)
  std::vector<Real> pos_query_w, pos_query_b;  // pos_query_proj (p2c when !share_att_key)
};

/// The projection weights of c2p (Kr) and p2c (Qr): key_proj / query_proj when share_att_key,
/// else pos_key_proj / pos_query_proj.
template <class Real>
struct DebertaProjection {
  const std::vector<Real>* w = nullptr;
  const std::vector<Real>* b = nullptr;
};
template <class Real>
DebertaProjection<Real> deberta_c2p_projection(const DebertaParams& p,
                                               const DebertaWeights<Real>& w) {
  if (p.share_att_key) return {&w.key_w, &w.key_b};
  return {&w.pos_key_w, &w.pos_key_b};
}
template <class Real>
DebertaProjection<Real> deberta_p2c_projection(const DebertaParams& p,
                                               const DebertaWeights<Real>& w) {
  if (p.share_att_key) return {&w.query_w, &w.query_b};
  return {&w.pos_query_w, &w.pos_query_b};
}

/// Throws InvalidArgument unless the weights have the shapes p needs.
template <class Real>
void deberta_check_weights(const DebertaParams& p, const DebertaWeights<Real>& w,
                           const char* function) {
  deberta_check(p, function);
  const std::int64_t k2 = 2 * deberta_att_span(p), out = std::int64_t{p.n_heads} * p.head_dim;
  if (w.hidden <= 0) throw_invalid(function, "hidden must be positive", w.hidden);
  const auto need = [&](const std::vector<Real>& v, std::int64_t n, const char* what) {
    if (static_cast<std::int64_t>(v.size()) != n) {
      throw_invalid(function, std::string(what) + " must have " + std::to_string(n) + " entries",
                    v.size());
    }
  };
  need(w.rel_embeddings, k2 * w.hidden, "rel_embeddings ([2k, hidden])");
  if (p.c2p) {
    const auto pr = deberta_c2p_projection(p, w);
    need(*pr.w, out * w.hidden,
         p.share_att_key ? "key_proj weight ([H*d, hidden])"
                         : "pos_key_proj weight ([H*d, hidden])");
    need(*pr.b, out, p.share_att_key ? "key_proj bias ([H*d])" : "pos_key_proj bias ([H*d])");
  }
  if (p.p2c) {
    const auto pr = deberta_p2c_projection(p, w);
    need(*pr.w, out * w.hidden,
         p.share_att_key ? "query_proj weight ([H*d, hidden])"
                         : "pos_query_proj weight ([H*d, hidden])");
    need(*pr.b, out, p.share_att_key ? "query_proj bias ([H*d])" : "pos_query_proj bias ([H*d])");
  }
}

/// y = P W^T + b: [2k, H*d] (row-major, head h at columns h*d .. h*d + d - 1).
/// rows (optional, 2k flags): only these rows are computed, the others stay 0.
template <class Real>
std::vector<Real> deberta_project(const DebertaParams& p, const DebertaWeights<Real>& w,
                                  const std::vector<Real>& weight, const std::vector<Real>& bias,
                                  const std::vector<bool>* rows = nullptr) {
  const std::int64_t k2 = 2 * deberta_att_span(p), out = std::int64_t{p.n_heads} * p.head_dim;
  std::vector<Real> y(static_cast<std::size_t>(k2 * out), Real(0));
  for (std::int64_t r = 0; r < k2; ++r) {
    if (rows && !(*rows)[static_cast<std::size_t>(r)]) continue;
    for (std::int64_t o = 0; o < out; ++o) {
      Real s = bias[static_cast<std::size_t>(o)];
      for (std::int64_t x = 0; x < w.hidden; ++x) {
        s += w.rel_embeddings[static_cast<std::size_t>(r * w.hidden + x)] *
             weight[static_cast<std::size_t>(o * w.hidden + x)];
      }
      y[static_cast<std::size_t>(r * out + o)] = s;
    }
  }
  return y;
}

/// The projected relative tables Kr (c2p) and Qr (p2c), [2k, H*d] each (empty when unused).
template <class Real>
struct DebertaPositionLayers {
  std::vector<Real> kr, qr;
};

/// Kr = P Wk^T + bk and Qr = P Wq^T + bq with the weights share_att_key selects.
/// rows: as deberta_project (the rows a block's indices reach; null = all 2k).
template <class Real>
DebertaPositionLayers<Real> deberta_position_layers(const DebertaParams& p,
                                                    const DebertaWeights<Real>& w,
                                                    const std::vector<bool>* rows = nullptr) {
  deberta_check_weights(p, w, "deberta_position_layers");
  DebertaPositionLayers<Real> l;
  if (p.c2p) {
    const auto pr = deberta_c2p_projection(p, w);
    l.kr = deberta_project(p, w, *pr.w, *pr.b, rows);
  }
  if (p.p2c) {
    const auto pr = deberta_p2c_projection(p, w);
    l.qr = deberta_project(p, w, *pr.w, *pr.b, rows);
  }
  return l;
}

/// The relative part of score (h, i, j) BEFORE the 1/sqrt(d sf) scale:
/// [c2p] q_hi . Kr_h,c + [p2c] k_hj . Qr_h,c. q [Tq, H, d], k [Tk, H, d].
/// p2c_literal: the paper's literal p2c index delta(j, i) = clamp(-rel_ij + k) instead of HF's
/// (NOT DeBERTa as released: for negative controls and the engine mistake only).
template <class Real>
Real deberta_relative_term(const DebertaParams& p, const DebertaPositionLayers<Real>& l,
                           const std::vector<Real>& q, const std::vector<Real>& k, int h,
                           std::int64_t i, std::int64_t j, std::int64_t query_offset,
                           bool p2c_literal = false) {
  const int H = p.n_heads, d = p.head_dim;
  Real s = Real(0);
  if (p.c2p) {
    const std::int64_t c = deberta_c2p_index(p, query_offset + i, j);
    for (int x = 0; x < d; ++x) {
      s += q[static_cast<std::size_t>((i * H + h) * d + x)] *
           l.kr[static_cast<std::size_t>((c * H + h) * d + x)];
    }
  }
  if (p.p2c) {
    const std::int64_t c =
        p2c_literal ? deberta_index_of(p, -deberta_relative_position(p, query_offset + i, j))
                    : deberta_p2c_index(p, query_offset + i, j);
    for (int x = 0; x < d; ++x) {
      s += k[static_cast<std::size_t>((j * H + h) * d + x)] *
           l.qr[static_cast<std::size_t>((c * H + h) * d + x)];
    }
  }
  return s;
}

/// 1 / sqrt(d * sf) in Real.
template <class Real>
Real deberta_scale(const DebertaParams& p) {
  using std::sqrt;
  return Real(1) / sqrt(Real(p.head_dim) * Real(deberta_scale_factor(p)));
}

/// The attention params of DeBERTa: n_heads / head_dim from p, score scale 1/sqrt(d sf)
/// (kGiven, as a double: what optimized::attention_forward multiplies q . k by), no causal mask.
inline AttentionParams deberta_attention_params(AttentionParams ap, const DebertaParams& p,
                                                const char* function = "deberta_attention_params") {
  deberta_check(p, function);
  ap.n_heads = ap.n_kv_heads = p.n_heads;
  ap.head_dim = p.head_dim;
  if (ap.value_dim <= 0) ap.value_dim = p.head_dim;
  ap.scale_kind = AttentionScale::kGiven;
  ap.scale = 1.0 / std::sqrt(static_cast<double>(p.head_dim) * deberta_scale_factor(p));
  ap.causal = false;
  ap.window = 0;
  return ap;
}

/// The bias hook (relative part, scaled) for reference/attention.hpp. The content part uses
/// attention_head's given scale.
template <class Real>
AttentionHooks<Real> deberta_hooks(const DebertaParams& p, const DebertaPositionLayers<Real>& l,
                                   const std::vector<Real>& q, const std::vector<Real>& k,
                                   std::int64_t query_offset) {
  deberta_check(p, "deberta_hooks");
  AttentionHooks<Real> hooks;
  const Real scale = deberta_scale<Real>(p);
  hooks.bias = [p, l, q, k, query_offset, scale](int h, std::int64_t i, std::int64_t j) {
    return deberta_relative_term<Real>(p, l, q, k, h, i, j, query_offset) * scale;
  };
  return hooks;
}

/// The reference accepts any Tq, Tk, query_offset (rows of the full forward, see the header).
/// DeBERTa self-attention: q [Tq, H, d], k [Tk, H, d], v [Tk, H, dv] -> [Tq, H, dv]. Every
/// score is (q.k + relative term) / sqrt(d sf) computed in Real (no double scale).
template <class Real>
std::vector<Real> deberta_forward(const DebertaParams& p, const AttentionParams& ap,
                                  const AttentionMask& mask, std::int64_t tq, std::int64_t tk,
                                  const DebertaWeights<Real>& w, const std::vector<Real>& q,
                                  const std::vector<Real>& k, const std::vector<Real>& v) {
  constexpr const char* fn = "deberta_forward";
  const AttentionParams pp = deberta_attention_params(ap, p, fn);
  attention_check(pp, tq, tk, fn);
  const int H = p.n_heads, d = p.head_dim, dv = pp.value_dim;
  const auto n = [](std::int64_t a, int b, int c) { return static_cast<std::size_t>(a * b * c); };
  if (q.size() != n(tq, H, d)) throw_invalid(fn, "q must have Tq*H*d elements", q.size());
  if (k.size() != n(tk, H, d)) throw_invalid(fn, "k must have Tk*H*d elements", k.size());
  if (v.size() != n(tk, H, dv)) throw_invalid(fn, "v must have Tk*H*dv elements", v.size());
  const DebertaPositionLayers<Real> l = deberta_position_layers(p, w);
  const Real scale = deberta_scale<Real>(p);
  std::vector<Real> out(n(tq, H, dv), Real(0));
  for (int h = 0; h < H; ++h) {
    for (std::int64_t i = 0; i < tq; ++i) {
      std::vector<Real> s(static_cast<std::size_t>(tk));
      std::vector<bool> vis(static_cast<std::size_t>(tk));
      for (std::int64_t j = 0; j < tk; ++j) {
        Real c2c = Real(0);
        for (int x = 0; x < d; ++x) {
          c2c += q[static_cast<std::size_t>((i * H + h) * d + x)] *
                 k[static_cast<std::size_t>((j * H + h) * d + x)];
        }
        s[j] = (c2c + deberta_relative_term<Real>(p, l, q, k, h, i, j, pp.query_offset)) * scale;
        vis[j] = attention_visible(pp, mask, tk, i, j);
      }
      const std::vector<Real> pr = attention_softmax(s, vis);
      for (int c = 0; c < dv; ++c) {
        Real o = Real(0);
        for (std::int64_t j = 0; j < tk; ++j)
          o += pr[j] * v[static_cast<std::size_t>((j * H + h) * dv + c)];
        out[static_cast<std::size_t>((i * H + h) * dv + c)] = o;
      }
    }
  }
  return out;
}

}  // namespace posenc::reference

namespace posenc::reference {

/// Condition scale of the relative term (double is ample for a scale): with |Kr|_cx =
/// sum_m |P_cm Wk_xm| + |bk_x| (and |Qr| likewise), the sensitivity of score (h, i, j) to
/// relative errors in the projections and dot products is
///   ([c2p] sum_x |q_hix| |Kr|_h,c,x + [p2c] sum_x |k_hjx| |Qr|_h,c,x) / sqrt(d sf).
/// Returns the per-element absolute tables |Kr|, |Qr| for deberta_relative_sensitivity.
inline DebertaPositionLayers<double> deberta_abs_layers(const DebertaParams& p,
                                                        const DebertaWeights<double>& w,
                                                        const std::vector<bool>* rows = nullptr) {
  deberta_check_weights(p, w, "deberta_abs_layers");
  DebertaWeights<double> a = w;
  for (auto* v : {&a.rel_embeddings, &a.key_w, &a.key_b, &a.query_w, &a.query_b, &a.pos_key_w,
                  &a.pos_key_b, &a.pos_query_w, &a.pos_query_b}) {
    for (double& x : *v) x = std::fabs(x);
  }
  return deberta_position_layers(p, a, rows);
}

/// The relative term's condition scale of (h, i, j), scaled by 1/sqrt(d sf) (see above);
/// qa, ka: |q|, |k|.
inline double deberta_relative_sensitivity(const DebertaParams& p,
                                           const DebertaPositionLayers<double>& abs_layers,
                                           const std::vector<double>& qa,
                                           const std::vector<double>& ka, int h, std::int64_t i,
                                           std::int64_t j, std::int64_t query_offset,
                                           bool p2c_literal = false) {
  return deberta_relative_term<double>(p, abs_layers, qa, ka, h, i, j, query_offset, p2c_literal) /
         std::sqrt(static_cast<double>(p.head_dim) * deberta_scale_factor(p));
}

}  // namespace posenc::reference
