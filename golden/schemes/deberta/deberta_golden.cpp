// Golden cases for DeBERTa-v2/v3 disentangled attention. Formula: see reference/deberta.hpp.
//
//   bucket table (level 3, small): r = query - key in [-4096, 4096] for the v3 preset
//     (position_buckets 256, max_relative_positions 512). Input relative_position [8193] (i64);
//     expected buckets [8193] (i32, exact: make_log_bucket_position) and index [8193] (i32,
//     exact: clamp(bucket + 256, 0, 511)). The manifest lists the worked bucket values and
//     the hard positions with why.
//   attention (level 1): DeBERTa-v3-base shaped (position_buckets 256, max_relative_positions
//     512, head_dim 64, pos_att_type "p2c|c2p", share_att_key true) with one head and hidden 16
//     (the relative table is [512, hidden]; a small hidden keeps the mp50 projection cheap);
//     query blocks of 16 queries at positions 200..215 over 400 keys (delta in [-199, 215]: log
//     buckets on both sides), f32 and bf16; a share_att_key false case (2 heads of 32, pos_key_proj
//     / pos_query_proj); a c2p-only case with query length 8 != key length 300 (a shape HF runs:
//     c2p alone works for any lengths, p2c needs Tq == Tk). Inputs: q, k, v (already projected, [T,
//     H, d]), rel_embeddings [512, hidden] and the projection weights/biases, seeded and exact in
//     the target dtype. Expected stages: relative [Tq, Tk] (i32, exact: the bucketed delta), index
//     [Tq, Tk] (i32, exact: the c2p = p2c row), probs and out (golden/cases/attention_case.hpp:
//     conditioned, mp50 with an mp100 cross-check; both score terms scaled by 1/sqrt(d sf) in
//     mp50, not by the double params.scale the engines use, so the f64 companions are
//     correctly rounded).
//   negative control (result "invalid"): a v3 block whose expected values use the paper's
//     literal p2c index clamp(-rel + k); verify passes an engine only if it does NOT reproduce
//     them, and fails an engine with the p2c-literal-index mistake.
// Engine mistakes: sign-flipped (delta = key - query), p2c-literal-index, no-scale-factor
// (1/sqrt(d) instead of 1/sqrt(d sf)), share-att-key-ignored (key_proj / query_proj used for
// the relative table although share_att_key is false). A float32-bucket mistake does not
// exist here: HF's float32 buckets equal the exact ones for |r| <= 4096 at 256 / 512 (a test
// searches every r).
//
// Budgets (contract):
//   relative, index, buckets: exact integers in every profile (the float32 bucket formula
//     agrees on every distance these cases contain).
//   probs, out: attention_case's budgets (strict / fp32: K r with K = 16; bf16: 2 + K r and
//     2.5 + (K + T/2) r with 0.5 ulp, see golden/cases/attention_case.cpp) with the score
//     condition S_ij = scale * sum |q k| + kRelativeSensitivity * S^rel_ij, S^rel_ij =
//     ([c2p] sum |q_i| |Kr|_c + [p2c] sum |k_j| |Qr|_c) / sqrt(d sf), |Kr| = |P| |W|^T + |b|.
//     Why the factor 1.5: in bf16 HF rounds the relative term more often than the content
//     term: Kr / Qr (nn.Linear output, u), the bmm (u), the division by the scale (u) whose
//     bf16 value 13.875 differs from sqrt(192) = 13.856 by 0.34 u, the c2p + p2c sum (u) and
//     the final c2c + rel add (u): 5.34 u S^rel against the 4 u S the attention budget
//     allows per unit of S (2 eps_t), so S^rel counts 5.34 / 4 = 1.34 times; 1.5 leaves
//     margin for the float32 accumulations (64 terms, 2^-24 each, 2^-16 relative to u_bf16).
//     The content term: bmm (u), / scale (1.34 u), + rel (u) = 3.34 u <= 4 u.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "golden/cases/mistakes.hpp"
#include "golden/cases/attention_case.hpp"
#include "golden/cases/oracle_tensors.hpp"
#include "golden/cases/pipelines.hpp"
#include "golden/cases/registry.hpp"
#include "golden/format/prng.hpp"
#include "optimized/deberta.hpp"
#include "reference/common/errors.hpp"
#include "reference/common/rounding.hpp"
#include "reference/common/scalar.hpp"
#include "reference/deberta.hpp"
#include "reference/common/mutant.hpp"

namespace posenc::golden {

namespace {

/// The mistakes this file branches on (golden/cases/mistakes.hpp).
enum class MistakeId { kNone, kOther, kNoScaleFactor, kP2cLiteralIndex, kShareAttKeyIgnored, kSignFlipped };
const MistakeTable<MistakeId, 4> kMistakes(
    {"deberta"},
    {{
     {MistakeId::kNoScaleFactor, "no-scale-factor"},
     {MistakeId::kP2cLiteralIndex, "p2c-literal-index"},
     {MistakeId::kShareAttKeyIgnored, "share-att-key-ignored"},
     {MistakeId::kSignFlipped, "sign-flipped"}}});

}  // namespace

namespace {

using Json = nlohmann::json;
using reference::AttentionParams;
using reference::DebertaParams;

/// S^rel's weight in the score condition (contract above).
constexpr double kRelativeSensitivity = 1.5;

const char* kCitation =
    "P. He, X. Liu, J. Gao, W. Chen, DeBERTa: Decoding-enhanced BERT with Disentangled "
    "Attention, arXiv:2006.03654v6, Sec. 3.1; log buckets, att_span, share_att_key and the p2c "
    "index of huggingface/transformers models/deberta_v2/modeling_deberta_v2.py";

Json v3_base_config() {
  return {{"hidden_size", 768},
          {"num_attention_heads", 12},
          {"max_position_embeddings", 512},
          {"relative_attention", true},
          {"position_buckets", 256},
          {"max_relative_positions", -1},
          {"pos_att_type", "p2c|c2p"},
          {"share_att_key", true},
          {"norm_rel_ebd", "layer_norm"},
          {"position_biased_input", false}};
}

Json deberta_conventions(const DebertaParams& p) {
  const std::int64_t k = reference::deberta_att_span(p);
  return {
      {"relative_position",
       "delta = query position - key position (opposite sign to T5's key - query)"},
      {"bucket",
       "m = position_buckets / 2 = " + std::to_string(p.position_buckets / 2) +
           "; a = m - 1 if -m < delta < m else |delta|; bucket = delta if a <= m else sign(delta) "
           "* (ceil(ln(a / m) / ln((M - 1) / m) * (m - 1)) + m), M = max_relative_positions = " +
           std::to_string(p.max_relative_positions) + "; the ceil decided exactly"},
      {"index", "c = clamp(bucket + k, 0, 2k - 1), k = att_span = " + std::to_string(k) +
                    "; c2p AND p2c both use c (HF's gather + transpose), not the paper's "
                    "delta(j, i) for p2c"}};
}

// ---- bucket table -------------------------------------------------------------------------------

constexpr std::int64_t kTableRange = 4096;
const char* kBucketId = "deberta_buckets_b256_m512_r4096";

struct HardR {
  std::int64_t r;
  std::string why;
};

std::vector<HardR> hard_positions() {
  return {{-4096, "far: bucket -(ceil(...) + 128), index clamped to 0"},
          {-1000, "spec 12: -317 (index 0, clamped)"},
          {-511, "|r| = M - 1: x = m - 1 exactly before the ceil (tie), bucket -255, index 1"},
          {-129, "first log bucket below: -129 (index 127)"},
          {-128, "|r| = m: kept exact"},
          {-1, "previous key... query after key: delta -1 is the key AFTER the query"},
          {0, "own key: 0 (index 256)"},
          {1, "key one before the query: +1 (index 257); an engine with key - query gives -1"},
          {127, "|r| < m: exact"},
          {128, "|r| = m: kept exact (a <= m)"},
          {129, "first log bucket: x = 127 ln(129/128) / ln(511/128) = 0.71, ceil 1 -> 129"},
          {200, "spec 12: 169 (index 425); a floor instead of the ceil gives 168"},
          {255, "spec 12: 192 (index 448)"},
          {511,
           "|r| = M - 1: x = 127 exactly, bucket 255 (index 511); a float x just above "
           "127 would give 256"},
          {512, "spec 12: 256 (index 511, clamped)"},
          {1000, "spec 12: 317 (index 511)"},
          {4096, "far: clamped index 511"}};
}

GoldenCase bucket_generate() {
  DebertaParams p;  // the v3 preset
  reference::deberta_check(p, "deberta_generate");
  const std::int64_t n = 2 * kTableRange + 1;
  std::vector<std::int64_t> r(static_cast<std::size_t>(n));
  std::vector<std::int32_t> b(r.size()), c(r.size());
  for (std::int64_t x = 0; x < n; ++x) {
    r[x] = x - kTableRange;
    b[x] = static_cast<std::int32_t>(reference::deberta_relative_position(p, r[x], 0));
    c[x] = static_cast<std::int32_t>(reference::deberta_index_of(p, b[x]));
  }
  Json why = Json::array();
  for (const auto& h : hard_positions()) {
    const std::int64_t bb = reference::deberta_relative_position(p, h.r, 0);
    why.push_back({{"position", h.r},
                   {"bucket", bb},
                   {"index", reference::deberta_index_of(p, bb)},
                   {"why", h.why}});
  }
  std::vector<Tensor> tensors;
  tensors.push_back(tensor_from_i64("relative_position", {n}, r));
  std::vector<TensorSpec> inputs = {input_spec(tensors[0])};
  const Tensor tb = tensor_from_i32("buckets", {n}, b), tc = tensor_from_i32("index", {n}, c);
  ExpectedTensor eb, ec;
  eb.spec = {"buckets",
             "table",
             DType::kI32,
             {n},
             "",
             {CheckKind::kExact, exact_budgets(std::nullopt)},
             {{"r", "", {}, {"relative_position"}}}};
  eb.exact_tensor = &tb;
  ec.spec = {"index",
             "table",
             DType::kI32,
             {n},
             "",
             {CheckKind::kExact, exact_budgets(std::nullopt)},
             {{"r", "", {}, {"relative_position"}}}};
  ec.exact_tensor = &tc;
  std::vector<TensorSpec> expected = {add_expected(&tensors, std::move(eb)),
                                      add_expected(&tensors, std::move(ec))};
  Json m = manifest_header(kBucketId, "deberta", "log_buckets", "valid", 3);
  m["description"] =
      "DeBERTa-v3 log buckets (position_buckets 256, max_relative_positions 512) and table "
      "rows, r = query - key in [-4096, 4096] (level 3)";
  m["citation"] = kCitation;
  m["preset"] = {{"name", "deberta-v3-base"},
                 {"hf_model", "microsoft/deberta-v3-base"},
                 {"source", "microsoft/deberta-v3-base config.json"},
                 {"config", v3_base_config()}};
  m["conventions"] = deberta_conventions(p);
  m["params"] = {{"position_buckets", p.position_buckets},
                 {"max_relative_positions", p.max_relative_positions},
                 {"att_span", reference::deberta_att_span(p)},
                 {"r_min", -kTableRange},
                 {"r_max", kTableRange}};
  m["oracle"] = {{"backend",
                  "exact integer arithmetic: ceil(x) decided by (M-1)^n m^(m-1) >= a^(m-1) m^n "
                  "(boost cpp_int) wherever the double estimate of x lies within 2^-20 of an "
                  "integer"},
                 {"rounding", "none: integers"}};
  m["positions"] = why;
  m["flags"] = {"DebertaRelativeSign", "DebertaLogBucketCeil", "DebertaIndexClamp"};
  m["pipelines"] = {{"fp32",
                     "HF's float32 formula (logf of float32 ratios, ceil): the same "
                     "buckets for every r of this table (a test checks it)"}};
  manifest_add_tensors(m, kBucketId, inputs, expected);
  return GoldenCase{m, std::move(tensors)};
}

// ---- attention ----------------------------------------------------------------------------------

struct DebCase {
  AttentionCaseDef def;
  DebertaParams dp;
  std::string pos_att_type;
  std::int64_t hidden = 16;
  bool negative_control = false;
  std::string preset_note;
};

std::vector<DebCase> attention_cases() {
  struct Row {
    std::string tag, what, pos_att_type;
    bool share;
    int heads, head_dim;
    std::int64_t tq, offset, tk;
    DType dtype;
    bool control;
  };
  const std::vector<Row> rows = {
      {"v3_base", "v3-base shaped query block, queries 200..215 over 400 keys", "p2c|c2p", true, 1,
       64, 16, 200, 400, DType::kF32, false},
      {"v3_base", "v3-base shaped query block, queries 200..215 over 400 keys", "p2c|c2p", true, 1,
       64, 16, 200, 400, DType::kBF16, false},
      {"sep_keys",
       "share_att_key false (pos_key_proj / pos_query_proj), queries 150..165 over "
       "320 keys",
       "p2c|c2p", false, 2, 32, 16, 150, 320, DType::kF32, false},
      {"c2p_only",
       "pos_att_type c2p only, query length 8 != key length 300 (HF runs this "
       "shape)",
       "c2p", true, 1, 64, 8, 0, 300, DType::kF32, false},
      {"v3_base", "v3-base shaped query block, queries 150..157 over 300 keys", "p2c|c2p", true, 1,
       64, 8, 150, 300, DType::kBF16, true},
  };
  std::vector<DebCase> v;
  std::uint64_t seed = 0xdeb3a000;
  for (const auto& row : rows) {
    DebCase c;
    c.pos_att_type = row.pos_att_type;
    const auto types = reference::deberta_parse_pos_att_type(row.pos_att_type);
    c.dp.c2p = types.c2p;
    c.dp.p2c = types.p2c;
    c.dp.share_att_key = row.share;
    c.dp.n_heads = row.heads;
    c.dp.head_dim = row.head_dim;
    c.hidden = 16;
    c.negative_control = row.control;
    AttentionParams ap;
    ap.value_dim = row.head_dim;
    ap.query_offset = row.offset;
    AttentionCaseDef& d = c.def;
    const std::string shape = row.offset == 0
                                  ? "q" + std::to_string(row.tq) + "_k" + std::to_string(row.tk)
                                  : "q" + std::to_string(row.tq) + "_o" +
                                        std::to_string(row.offset) + "_k" + std::to_string(row.tk);
    d.id = "deberta_" + row.tag + "_h" + std::to_string(row.heads) + "_d" +
           std::to_string(row.head_dim) + "_" + shape +
           (row.control ? "_p2c_literal_invalid" : "") + "_" + std::string(dtype_short(row.dtype));
    d.scheme = "deberta";
    d.variant = row.pos_att_type + (row.share ? ", shared keys" : ", separate position keys");
    d.description = std::string(row.control ? "NEGATIVE CONTROL (expected values use the "
                                              "paper's literal p2c index): "
                                            : "") +
                    "DeBERTa disentangled self-attention, " + row.what + ", target " +
                    std::string(dtype_short(row.dtype));
    d.params = reference::deberta_attention_params(ap, c.dp, "deberta_generate");
    // The oracle scales the content term by 1/sqrt(d sf) exactly, as the relative term
    // (bias_closure); params.scale is its double, what the engines multiply by.
    d.scale_radicand = c.dp.head_dim * reference::deberta_scale_factor(c.dp);
    d.tq = row.tq;
    d.tk = row.tk;
    d.dtype = row.dtype;
    d.seed = seed++;
    d.value_range = 2.0;
    c.preset_note = row.share ? "deberta-v3-base attention (1 or 2 heads, hidden 16)"
                              : "deberta-v3-base with share_att_key false (a config variant)";
    v.push_back(std::move(c));
  }
  return v;
}

/// Weight element i of PRNG stream `stream`: dyadic, exact in t, in [-range, range] (drawn as
/// attention_case draws q, k, v).
double weight_value(DType t, double range, std::uint64_t seed, std::uint64_t stream,
                    std::uint64_t i) {
  const int bits = t == DType::kBF16 ? 7 : (t == DType::kF16 ? 10 : 23);
  const std::int64_t lim = (std::int64_t{1} << bits) - 1;
  return range * std::ldexp(static_cast<double>(prng_int(seed, stream, i, lim)), -bits);
}

/// Input streams beyond attention_case's q (1), k (2), v (3).
struct WeightStream {
  const char* name;
  std::uint64_t stream;
  double range;
};
const std::vector<WeightStream>& weight_streams() {
  static const std::vector<WeightStream> s = {
      {"rel_embeddings", 5, 1.0},      {"key_proj_weight", 6, 0.5},
      {"key_proj_bias", 7, 0.5},       {"query_proj_weight", 8, 0.5},
      {"query_proj_bias", 9, 0.5},     {"pos_key_proj_weight", 10, 0.5},
      {"pos_key_proj_bias", 11, 0.5},  {"pos_query_proj_weight", 12, 0.5},
      {"pos_query_proj_bias", 13, 0.5}};
  return s;
}

/// The weight tensors a case needs, with their shapes.
std::vector<std::pair<std::string, std::vector<std::int64_t>>> weight_shapes(const DebertaParams& p,
                                                                             std::int64_t hidden) {
  const std::int64_t k2 = 2 * reference::deberta_att_span(p),
                     out = std::int64_t{p.n_heads} * p.head_dim;
  std::vector<std::pair<std::string, std::vector<std::int64_t>>> v = {
      {"rel_embeddings", {k2, hidden}},
      {"key_proj_weight", {out, hidden}},
      {"key_proj_bias", {out}},
      {"query_proj_weight", {out, hidden}},
      {"query_proj_bias", {out}}};
  if (!p.share_att_key) {
    if (p.c2p) {
      v.push_back({"pos_key_proj_weight", {out, hidden}});
      v.push_back({"pos_key_proj_bias", {out}});
    }
    if (p.p2c) {
      v.push_back({"pos_query_proj_weight", {out, hidden}});
      v.push_back({"pos_query_proj_bias", {out}});
    }
  }
  return v;
}

template <class Real>
void set_weight(reference::DebertaWeights<Real>& w, const std::string& name, std::vector<Real> x) {
  if (name == "rel_embeddings") w.rel_embeddings = std::move(x);
  if (name == "key_proj_weight") w.key_w = std::move(x);
  if (name == "key_proj_bias") w.key_b = std::move(x);
  if (name == "query_proj_weight") w.query_w = std::move(x);
  if (name == "query_proj_bias") w.query_b = std::move(x);
  if (name == "pos_key_proj_weight") w.pos_key_w = std::move(x);
  if (name == "pos_key_proj_bias") w.pos_key_b = std::move(x);
  if (name == "pos_query_proj_weight") w.pos_query_w = std::move(x);
  if (name == "pos_query_proj_bias") w.pos_query_b = std::move(x);
}

template <class Real>
std::vector<Real> convert(const std::vector<double>& x) {
  return std::vector<Real>(x.begin(), x.end());
}

/// The bias closure of precision Real (relative term * 1/sqrt(d sf), all in Real).
template <class Real>
std::function<Real(int, std::int64_t, std::int64_t)> bias_closure(
    const DebertaParams& p, const std::map<std::string, std::vector<double>>& weights,
    std::int64_t hidden, const std::vector<double>& q, const std::vector<double>& k,
    std::int64_t offset, bool literal, const std::vector<bool>& rows) {
  reference::DebertaWeights<Real> w;
  w.hidden = hidden;
  for (const auto& [name, x] : weights) set_weight(w, name, convert<Real>(x));
  struct State {
    DebertaParams p;
    reference::DebertaPositionLayers<Real> l;
    std::vector<Real> q, k;
    Real scale;
    std::int64_t tq, tk;
    std::vector<Real> memo;  // [H, Tq, Tk]: the generator asks for each value more than once
    std::vector<bool> have;
  };
  const std::int64_t tq = static_cast<std::int64_t>(q.size()) / (p.n_heads * p.head_dim);
  const std::int64_t tk = static_cast<std::int64_t>(k.size()) / (p.n_heads * p.head_dim);
  auto s = std::make_shared<State>(State{p,
                                         reference::deberta_position_layers(p, w, &rows),
                                         convert<Real>(q),
                                         convert<Real>(k),
                                         reference::deberta_scale<Real>(p),
                                         tq,
                                         tk,
                                         {},
                                         {}});
  s->memo.assign(static_cast<std::size_t>(p.n_heads * tq * tk), Real(0));
  s->have.assign(s->memo.size(), false);
  return [s, offset, literal](int h, std::int64_t i, std::int64_t j) {
    const std::size_t x = static_cast<std::size_t>((h * s->tq + i) * s->tk + j);
    if (!s->have[x]) {
      s->memo[x] =
          reference::deberta_relative_term<Real>(s->p, s->l, s->q, s->k, h, i, j, offset, literal) *
          s->scale;
      s->have[x] = true;
    }
    return s->memo[x];
  };
}

GoldenCase attention_generate(DebCase c) {
  AttentionCaseDef& d = c.def;
  const DebertaParams& p = c.dp;
  const std::int64_t qo = d.params.query_offset;
  const bool literal = c.negative_control && !POSENC_MUTANT("gold_deberta_control_not_literal");
  // The inputs exactly as attention_case_generate draws them, and the weights.
  const AttentionCaseInputs in = attention_case_inputs(d);
  const std::vector<double>&q = in.q, &k = in.k;
  std::map<std::string, std::vector<double>> weights;
  const auto shapes = weight_shapes(p, c.hidden);
  for (const auto& [name, shape] : shapes) {
    std::int64_t n = 1;
    for (auto s : shape) n *= s;
    const auto ws = std::find_if(weight_streams().begin(), weight_streams().end(),
                                 [&](const WeightStream& w) { return name == w.name; });
    std::vector<double> x(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) {
      x[static_cast<std::size_t>(i)] =
          weight_value(d.dtype, ws->range, d.seed, ws->stream, static_cast<std::uint64_t>(i));
    }
    weights[name] = std::move(x);
  }
  // The table rows this block reaches (the oracle projects only those).
  std::vector<bool> rows(static_cast<std::size_t>(2 * reference::deberta_att_span(p)), false);
  for (std::int64_t i = 0; i < d.tq; ++i) {
    for (std::int64_t j = 0; j < d.tk; ++j) {
      const std::int64_t r = reference::deberta_relative_position(p, qo + i, j);
      rows[static_cast<std::size_t>(reference::deberta_index_of(p, r))] = true;
      if (literal) rows[static_cast<std::size_t>(reference::deberta_index_of(p, -r))] = true;
    }
  }
  d.bias50 = bias_closure<mp50>(p, weights, c.hidden, q, k, qo, literal, rows);
  d.bias100 = bias_closure<mp100>(p, weights, c.hidden, q, k, qo, literal, rows);
  {
    reference::DebertaWeights<double> w;
    w.hidden = c.hidden;
    for (const auto& [name, x] : weights) set_weight(w, name, x);
    auto absl = std::make_shared<reference::DebertaPositionLayers<double>>(
        reference::deberta_abs_layers(p, w, &rows));
    std::vector<double> qa(q), ka(k);
    for (double& x : qa) x = std::fabs(x);
    for (double& x : ka) x = std::fabs(x);
    const double mult =
        POSENC_MUTANT("gold_deberta_relative_sensitivity_dropped") ? 0.0 : kRelativeSensitivity;
    d.bias_cond = [p, absl, qa, ka, qo, mult, literal](int h, std::int64_t i, std::int64_t j) {
      return mult * reference::deberta_relative_sensitivity(p, *absl, qa, ka, h, i, j, qo, literal);
    };
  }
  Json flags = {"DebertaRelativeSign", "DebertaLogBucketCeil", "DebertaP2cIndex",
                "DebertaScaleFactor"};
  if (!p.share_att_key) flags.push_back("DebertaShareAttKey");
  d.extra = {{"citation", kCitation},
             {"preset",
              {{"name", "deberta-v3-base"},
               {"hf_model", "microsoft/deberta-v3-base"},
               {"source", "microsoft/deberta-v3-base config.json; " + c.preset_note},
               {"config", v3_base_config()}}},
             {"flags", flags}};
  if (c.negative_control) {
    d.extra["result"] = "invalid";
    d.extra["negative_control"] = {
        {"mistake", "p2c-literal-index"},
        {"expected_values_use", "p2c row clamp(-rel_ij + k): the paper's literal delta(j, i)"},
        {"meaning",
         "the expected tensors follow the WRONG p2c index; a correct engine differs from them "
         "(verify PASS), an engine with the paper's literal index reproduces them (verify "
         "FAIL)"}};
  }
  GoldenCase g = attention_case_generate(d);

  // The DeBERTa stages and inputs, added to the shared attention case.
  const auto rel = reference::deberta_relative_matrix(p, d.tq, d.tk, qo);
  const auto idx = reference::deberta_index_matrix(p, d.tq, d.tk, qo);
  const Tensor t_rel = tensor_from_i32("relative", {d.tq, d.tk}, rel);
  const Tensor t_idx = tensor_from_i32("index", {d.tq, d.tk}, idx);
  Json& m = g.manifest;
  for (const auto& [name, shape] : shapes) {
    Tensor t = input_tensor(name, d.dtype, shape, weights.at(name));
    m["inputs"].push_back(tensor_spec_to_json(input_spec(t), false));
    g.tensors.push_back(std::move(t));
  }
  ExpectedTensor er, ei;
  const std::vector<AxisSpec> axes = {{"query", "query_positions", {}, {}},
                                      {"key", "key_positions", {}, {}}};
  er.spec = {"relative",  "relative_positions",
             DType::kI32, {d.tq, d.tk},
             "",          {CheckKind::kExact, exact_budgets(d.dtype)},
             axes};
  er.exact_tensor = &t_rel;
  ei.spec = {"index",     "relative_positions",
             DType::kI32, {d.tq, d.tk},
             "",          {CheckKind::kExact, exact_budgets(d.dtype)},
             axes};
  ei.exact_tensor = &t_idx;
  const TensorSpec sr = add_expected(&g.tensors, std::move(er));
  const TensorSpec si = add_expected(&g.tensors, std::move(ei));
  Json ex = Json::array({tensor_spec_to_json(sr, true), tensor_spec_to_json(si, true)});
  for (const auto& e : m["expected"]) ex.push_back(e);
  m["expected"] = ex;
  m["params"]["position_buckets"] = p.position_buckets;
  m["params"]["max_relative_positions"] = p.max_relative_positions;
  m["params"]["att_span"] = reference::deberta_att_span(p);
  m["params"]["pos_att_type"] = c.pos_att_type;
  m["params"]["share_att_key"] = p.share_att_key;
  m["params"]["scale_factor"] = reference::deberta_scale_factor(p);
  m["params"]["hidden"] = c.hidden;
  const Json conventions = deberta_conventions(p);
  for (const auto& [key, val] : conventions.items()) m["conventions"][key] = val;
  m["conventions"]["scores"] =
      "s_ij = (q_i . k_j + [c2p] q_i . Kr[c_ij] + [p2c] k_j . Qr[c_ij]) / sqrt(head_dim * "
      "scale_factor), scale_factor = 1 + [c2p] + [p2c]";
  m["conventions"]["projections"] =
      "Kr = rel_embeddings @ W^T + b per nn.Linear ([2k, H*d], head h at columns h*d..): "
      "share_att_key true: key_proj (c2p) and query_proj (p2c); false: pos_key_proj and "
      "pos_query_proj; q, k, v are given already projected";
  m["conventions"]["queries"] =
      "query i sits at position query_offset + i: the rows query_offset.. of the full "
      "Tk x Tk forward (HF runs p2c only for Tq == Tk and offset 0)";
  m["conventions"]["table_layout"] =
      "rel_embeddings [2k, hidden] (as the attention sees it, after any LayerNorm); weights "
      "[H*d, hidden], biases [H*d]; relative and index [Tq, Tk]";
  m["detection"] = Json::array({{{"flag", "DebertaP2cIndex"},
                                 {"stages", {"probs", "out"}},
                                 {"blind", "relative and index are the same for c2p and p2c"}},
                                {{"flag", "DebertaRelativeSign"},
                                 {"stages", {"relative", "index", "probs", "out"}},
                                 {"blind", ""}}});
  m["prng"] =
      "splitmix64 counter: value(seed, stream, i); stream 1 = q, 2 = k (range 2), 3 = v "
      "(range 1), 5 = rel_embeddings (range 1), 6/7 = key_proj weight/bias, 8/9 = query_proj, "
      "10/11 = pos_key_proj, 12/13 = pos_query_proj (range 0.5); dyadic, exact in the target "
      "dtype";
  return g;
}

// ---- the case table ----------------------------------------------------------------------------

std::vector<CaseRow> deberta_cases() {
  std::vector<CaseRow> rows = {{kBucketId,
                                "DeBERTa-v3 log buckets and table rows, r in "
                                "[-4096, 4096] (level 3)"}};
  for (const auto& c : attention_cases()) rows.push_back({c.def.id, c.def.description});
  return rows;
}

GoldenCase deberta_generate(const std::string& id) {
  if (id == kBucketId) return bucket_generate();
  for (const auto& c : attention_cases()) {
    if (c.def.id == id) return attention_generate(c);
  }
  throw_invalid("deberta_generate", "no deberta case has this id", id);
}

// ---- the built-in engine ------------------------------------------------------------------------

std::vector<std::string> deberta_mistakes() {
  return {"sign-flipped", "p2c-literal-index", "no-scale-factor", "share-att-key-ignored"};
}

DebertaParams params_from_manifest(const Json& m) {
  const Json& pj = m.at("params");
  DebertaParams p;
  p.position_buckets = pj.at("position_buckets").get<int>();
  p.max_relative_positions = pj.at("max_relative_positions").get<std::int64_t>();
  if (pj.contains("pos_att_type")) {
    const auto t = reference::deberta_parse_pos_att_type(pj.at("pos_att_type").get<std::string>());
    p.c2p = t.c2p;
    p.p2c = t.p2c;
    p.share_att_key = pj.at("share_att_key").get<bool>();
    p.n_heads = pj.at("n_heads").get<int>();
    p.head_dim = pj.at("head_dim").get<int>();
  }
  return p;
}

/// An engine's relative term with a chosen index rule and scale: direct dot products per
/// element (slow; for the mistakes only).
class MistakeBias final : public optimized::AttentionBias {
 public:
  MistakeBias(const DebertaParams& p, reference::DebertaPositionLayers<float> l,
              std::vector<float> q, std::vector<float> k, std::int64_t offset, bool flip_sign,
              bool literal, float scale)
      : p_(p),
        l_(std::move(l)),
        q_(std::move(q)),
        k_(std::move(k)),
        offset_(offset),
        flip_(flip_sign),
        literal_(literal),
        scale_(scale) {}
  std::int64_t relative(std::int64_t i, std::int64_t j) const {
    const std::int64_t delta = offset_ + i - j;
    return reference::deberta_relative_position(p_, flip_ ? -delta : delta, 0);
  }
  void fill(int h, std::int64_t q0, int nq, std::int64_t k0, int nk, float* tile) const override {
    const int H = p_.n_heads, d = p_.head_dim;
    for (int r = 0; r < nq; ++r) {
      for (int c = 0; c < nk; ++c) {
        const std::int64_t i = q0 + r, j = k0 + c, rel = relative(i, j);
        float b = 0.0f;
        if (p_.c2p) {
          const std::int64_t x = reference::deberta_index_of(p_, rel);
          float s = 0.0f;
          for (int z = 0; z < d; ++z) s += q_[(i * H + h) * d + z] * l_.kr[(x * H + h) * d + z];
          b = s * scale_;
        }
        if (p_.p2c) {
          const std::int64_t x = reference::deberta_index_of(p_, literal_ ? -rel : rel);
          float s = 0.0f;
          for (int z = 0; z < d; ++z) s += k_[(j * H + h) * d + z] * l_.qr[(x * H + h) * d + z];
          b += s * scale_;
        }
        tile[r * nk + c] = b;
      }
    }
  }

 private:
  DebertaParams p_;
  reference::DebertaPositionLayers<float> l_;
  std::vector<float> q_, k_;
  std::int64_t offset_;
  bool flip_, literal_;
  float scale_;
};

/// HF's eager DisentangledSelfAttention in compute dtype c (snapshot 0038a3c): scale_t =
/// sqrt(float32(d) * sf) cast to c; c2c = fl(fl(q @ k^T) / scale_t); Kr, Qr = fl(nn.Linear) with
/// float32 accumulation; c2p = fl(fl(q @ Kr^T)[c] / scale_t); score = c2p; score =
/// fl(score + fl(fl(k @ Qr^T)[c] / scale_t)); scores = fl(c2c + score); XSoftmax (float32
/// internally, rounded to c); context = fl(probs @ v). Buckets by HF's float32 formula. For a
/// query block (query_offset > 0 or Tq != Tk with p2c, shapes HF's eager code cannot run: see
/// reference::deberta_hf_runs_shape) it computes rows query_offset.. of HF's full Tk x Tk
/// forward, whose per-row operations are the same.
TensorMap hf_pipeline(const CaseSpec& spec, const TensorMap& golden, const std::string& pipeline,
                      const DebertaParams& p, const AttentionParams& ap) {
  using pipelines::fl;
  const Json& pj = spec.manifest.at("params");
  const std::int64_t tq = pj.at("tq").get<std::int64_t>(), tk = pj.at("tk").get<std::int64_t>();
  const std::int64_t hidden = pj.at("hidden").get<std::int64_t>();
  const DType t = golden.at("q").dtype;
  if (const auto why = pipelines::dtype_mismatch(pipeline, t); !why.empty()) {
    throw_invalid("deberta_run_engine", why, pipeline);
  }
  const DType c = pipelines::compute_dtype(pipeline);
  const auto q = tensor_to_f32(golden.at("q")), k = tensor_to_f32(golden.at("k")),
             v = tensor_to_f32(golden.at("v"));
  const int H = p.n_heads, d = p.head_dim, dv = ap.value_dim;
  const std::int64_t kspan = reference::deberta_att_span(p), k2 = 2 * kspan,
                     out_w = std::int64_t{H} * d;
  const float scale_t = fl(
      std::sqrt(static_cast<float>(d) * static_cast<float>(reference::deberta_scale_factor(p))), c);
  const auto linear = [&](const std::string& wn, const std::string& bn) {
    const auto P = tensor_to_f32(golden.at("rel_embeddings"));
    const auto W = tensor_to_f32(golden.at(wn)), B = tensor_to_f32(golden.at(bn));
    std::vector<float> y(static_cast<std::size_t>(k2 * out_w));
    for (std::int64_t r = 0; r < k2; ++r) {
      for (std::int64_t o = 0; o < out_w; ++o) {
        float s = 0.0f;
        for (std::int64_t x = 0; x < hidden; ++x) s += P[r * hidden + x] * W[o * hidden + x];
        y[r * out_w + o] = fl(s + B[o], c);
      }
    }
    return y;
  };
  std::vector<float> kr, qr;
  if (p.c2p)
    kr = p.share_att_key ? linear("key_proj_weight", "key_proj_bias")
                         : linear("pos_key_proj_weight", "pos_key_proj_bias");
  if (p.p2c)
    qr = p.share_att_key ? linear("query_proj_weight", "query_proj_bias")
                         : linear("pos_query_proj_weight", "pos_query_proj_bias");
  const bool literal = POSENC_MUTANT("engine_deberta_pipeline_p2c_literal");
  std::vector<std::int32_t> rel(static_cast<std::size_t>(tq * tk)), idx(rel.size());
  for (std::int64_t i = 0; i < tq; ++i) {
    for (std::int64_t j = 0; j < tk; ++j) {
      const std::int64_t delta = ap.query_offset + i - j;
      const std::int64_t b = p.position_buckets > 0
                                 ? reference::deberta_log_bucket_f32(delta, p.position_buckets,
                                                                     p.max_relative_positions)
                                 : delta;
      rel[i * tk + j] = static_cast<std::int32_t>(b);
      idx[i * tk + j] = static_cast<std::int32_t>(std::clamp<std::int64_t>(b + kspan, 0, k2 - 1));
    }
  }
  std::vector<float> probs(static_cast<std::size_t>(H * tq * tk)),
      out(static_cast<std::size_t>(tq * H * dv));
  for (int h = 0; h < H; ++h) {
    for (std::int64_t i = 0; i < tq; ++i) {
      std::vector<float> s(static_cast<std::size_t>(tk));
      for (std::int64_t j = 0; j < tk; ++j) {
        const auto dot = [&](const std::vector<float>& a, std::int64_t ra,
                             const std::vector<float>& b, std::int64_t rb) {
          float acc = 0.0f;
          for (int z = 0; z < d; ++z) acc += a[(ra * H + h) * d + z] * b[(rb * H + h) * d + z];
          return fl(acc, c);
        };
        const float c2c = fl(dot(q, i, k, j) / scale_t, c);
        const std::int64_t x = idx[i * tk + j];
        float score = 0.0f;
        if (p.c2p) score = fl(dot(q, i, kr, x) / scale_t, c);
        if (p.p2c) {
          const std::int64_t xp =
              literal ? std::clamp<std::int64_t>(kspan - rel[i * tk + j], 0, k2 - 1) : x;
          const float p2c = fl(dot(k, j, qr, xp) / scale_t, c);
          score = p.c2p ? fl(score + p2c, c) : p2c;
        }
        s[j] = fl(c2c + score, c);
      }
      float mx = -std::numeric_limits<float>::infinity();
      for (float x : s) mx = std::max(mx, x);
      float sum = 0.0f;
      std::vector<float> e(static_cast<std::size_t>(tk));
      for (std::int64_t j = 0; j < tk; ++j) {
        e[j] = std::exp(s[j] - mx);
        sum += e[j];
      }
      float* prow = &probs[(static_cast<std::size_t>(h) * tq + i) * tk];
      for (std::int64_t j = 0; j < tk; ++j) prow[j] = fl(e[j] / sum, c);
      for (int cc = 0; cc < dv; ++cc) {
        float acc = 0.0f;
        for (std::int64_t j = 0; j < tk; ++j) acc += prow[j] * v[(j * H + h) * dv + cc];
        out[(i * H + h) * dv + cc] = fl(acc, c);
      }
    }
  }
  TensorMap res;
  res.emplace("out", engine_tensor("out", t, {tq, H, dv}, out));
  res.emplace("probs", engine_tensor("probs", t, {H, tq, tk}, probs));
  res.emplace("relative", tensor_from_i32("relative", {tq, tk}, rel));
  res.emplace("index", tensor_from_i32("index", {tq, tk}, idx));
  return res;
}

TensorMap deberta_run_engine(const CaseSpec& spec, const TensorMap& golden,
                             const EngineOptions& o) {
  const auto& mk = deberta_mistakes();
  if (!o.mistake.empty() && std::find(mk.begin(), mk.end(), o.mistake) == mk.end()) {
    throw_invalid("deberta_run_engine",
                  "unknown mistake (known: sign-flipped, p2c-literal-index, no-scale-factor, "
                  "share-att-key-ignored)",
                  o.mistake);
  }
  if (pipelines::of(o.pipeline) != Pipeline::kExact && !o.mistake.empty()) {
    throw_invalid("deberta_run_engine", "mistakes run on the exact pipeline only", o.mistake);
  }
  const bool flip =
      kMistakes.is(o.mistake, MistakeId::kSignFlipped) && !POSENC_MUTANT("engine_deberta_sign_mistake_noop");
  DebertaParams p = params_from_manifest(spec.manifest);
  TensorMap res;
  if (golden.count("relative_position")) {  // the bucket table
    const Tensor& tr = golden.at("relative_position");
    std::vector<std::int32_t> b(static_cast<std::size_t>(tr.numel())), c(b.size());
    for (std::size_t x = 0; x < b.size(); ++x) {
      std::int64_t r = tr.get_i64(static_cast<std::int64_t>(x));
      if (flip) r = -r;
      const std::int64_t bb =
          pipelines::of(o.pipeline) != Pipeline::kExact
              ? reference::deberta_log_bucket_f32(r, p.position_buckets, p.max_relative_positions)
              : reference::deberta_relative_position(p, r, 0);
      b[x] = static_cast<std::int32_t>(bb);
      c[x] = static_cast<std::int32_t>(reference::deberta_index_of(p, bb));
    }
    res.emplace("buckets", tensor_from_i32("buckets", {tr.numel()}, b));
    res.emplace("index", tensor_from_i32("index", {tr.numel()}, c));
    return res;
  }
  AttentionParams ap = attention_params_from_manifest(spec.manifest);
  if (pipelines::of(o.pipeline) != Pipeline::kExact) return hf_pipeline(spec, golden, o.pipeline, p, ap);
  const Json& pj = spec.manifest.at("params");
  const std::int64_t tq = pj.at("tq").get<std::int64_t>(), tk = pj.at("tk").get<std::int64_t>();
  optimized::DebertaWeightsF32 w;
  w.hidden = pj.at("hidden").get<std::int64_t>();
  for (const auto& ws : weight_streams()) {
    if (golden.count(ws.name)) set_weight(w, ws.name, tensor_to_f32(golden.at(ws.name)));
  }
  if (kMistakes.is(o.mistake, MistakeId::kShareAttKeyIgnored)) {
    w.pos_key_w = w.key_w;
    w.pos_key_b = w.key_b;
    w.pos_query_w = w.query_w;
    w.pos_query_b = w.query_b;
  }
  const auto q = tensor_to_f32(golden.at("q")), k = tensor_to_f32(golden.at("k"));
  const auto layers = optimized::deberta_position_layers(p, w);
  const optimized::DebertaBias good(p, layers, q, k, tq, tk, ap.query_offset);
  const bool no_sf = kMistakes.is(o.mistake, MistakeId::kNoScaleFactor);
  const float mistake_scale =
      static_cast<float>(1.0 / std::sqrt(static_cast<double>(p.head_dim) *
                                         (no_sf ? 1 : reference::deberta_scale_factor(p))));
  const MistakeBias bad(p, layers, q, k, ap.query_offset, flip, kMistakes.is(o.mistake, MistakeId::kP2cLiteralIndex),
                        mistake_scale);
  const bool use_bad = flip || no_sf || kMistakes.is(o.mistake, MistakeId::kP2cLiteralIndex);
  if (no_sf) ap.scale = 1.0 / std::sqrt(static_cast<double>(p.head_dim));
  const optimized::AttentionBias* bias =
      use_bad ? static_cast<const optimized::AttentionBias*>(&bad) : &good;
  res = attention_case_run_engine(spec, golden, bias, ap);
  std::vector<std::int32_t> rel(static_cast<std::size_t>(tq * tk)), idx(rel.size());
  for (std::int64_t i = 0; i < tq; ++i) {
    for (std::int64_t j = 0; j < tk; ++j) {
      const std::int64_t r = use_bad ? bad.relative(i, j) : good.relative(i, j);
      rel[i * tk + j] = static_cast<std::int32_t>(r);
      idx[i * tk + j] = use_bad ? static_cast<std::int32_t>(reference::deberta_index_of(p, r))
                                : good.c2p_index(i, j);
    }
  }
  res.emplace("relative", tensor_from_i32("relative", {tq, tk}, rel));
  res.emplace("index", tensor_from_i32("index", {tq, tk}, idx));
  return res;
}

}  // namespace

SchemeEntry deberta_scheme() {
  SchemeEntry e{
      "deberta",           "DeBERTa-v2/v3 disentangled attention: c2c + c2p + p2c, log buckets",
      &deberta_cases,      &deberta_generate,
      &deberta_run_engine, &deberta_mistakes};
  e.order = 120;  // its place in `posenc list` and the catalog
  return e;
}

}  // namespace posenc::golden
