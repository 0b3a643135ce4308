// Golden cases for Shaw relative position representations. Formula: see reference/shaw.hpp.
//
//   attention (level 1): tensor2tensor transformer_relative shaped self-attention
//     (max_relative_position K = 20, tables shared across heads, q scaled by depth^-1/2; small
//     dims: 2-4 heads, depth 16-64) with up to 64 keys, so distances beyond K occur and clip:
//     an encoder block (bidirectional, 48 tokens: r in [-47, 47]), a decoder prefill (causal,
//     40 tokens) and decode steps (causal, fewer queries than keys, at the LAST key positions
//     as tensor2tensor's cache mode: 1 query over 48 keys, 4 queries over 64 keys); f32 and
//     bf16 targets. Inputs: q, k, v and the tables relations_keys [2K + 1, d] and
//     relations_values [2K + 1, dv], seeded and exact in the target dtype. Expected stages:
//     relative_index [Tq, Tk] (i32, exact: clip(key - query, -K, K) + K), probs and out
//     (golden/cases/attention_case.hpp: conditioned, mp50 with an mp100 cross-check; the
//     condition scales count both relative terms).
//   negative control (result "invalid"): the encoder block with the expected values of the
//     sign-flipped distance (query - key); verify passes an engine only if it does NOT
//     reproduce them. Sign flipping equals reversing the tables' rows (clip(i - j) + K =
//     2K - (clip(j - i) + K)), which is how the expected values are computed.
// Engine mistakes (bug class Q of docs/bug-classes.md: shifts, clipping, plumbing): sign-flipped
// (query - key), clip-off-by-one (clip to K - 1), values-missing (no aV term, the keys-only
// variant), no-offset (decode queries placed at positions 0.. instead of the last keys).
//
// Budgets (contract): probs and out use attention_case's budgets (strict / fp32: the float32
// kernel's kShawMaxError = kAttentionMaxError times the condition scale, plus the cast to the
// target dtype; bf16: PyTorch-eager roundings) with the Shaw condition scales:
//   S_ij = scale (sum_x |q_ix k_jx| + sum_x |q_ix aK_rx|)   (both score terms, as computed)
//   A_ic = sum_j p_ij (|v_jc| + |aV_rc|),  B_ic = sum_j p_ij |v_jc + aV_rc - o_ic| S_ij
// The eager (bf16) score rounds four times as plain attention's (q * depth^-1/2, q k^T,
// q aK^T, their sum), each <= u_t S_ij; its output rounds twice more than plain attention
// (p v and p aV are each rounded to t before their sum: u_t |p v| + u_t |p aV| <= u_t A_ic):
// eager_out_extra = 0.5 eps_t. relative_index is an integer: exact under every profile.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "golden/cases/mistakes.hpp"
#include "golden/cases/attention_case.hpp"
#include "golden/cases/oracle_tensors.hpp"
#include "golden/cases/pipelines.hpp"
#include "golden/cases/registry.hpp"
#include "golden/format/prng.hpp"
#include "optimized/shaw.hpp"
#include "reference/common/errors.hpp"
#include "reference/common/rounding.hpp"
#include "reference/common/scalar.hpp"
#include "reference/shaw.hpp"
#include "reference/common/mutant.hpp"

namespace posenc::golden {

namespace {

/// The mistakes this file branches on (golden/cases/mistakes.hpp).
enum class MistakeId { kNone, kOther, kClipOffByOne, kNoOffset, kSignFlipped, kValuesMissing };
const MistakeTable<MistakeId, 4> kMistakes(
    {"shaw"},
    {{
     {MistakeId::kClipOffByOne, "clip-off-by-one"},
     {MistakeId::kNoOffset, "no-offset"},
     {MistakeId::kSignFlipped, "sign-flipped"},
     {MistakeId::kValuesMissing, "values-missing"}}});

}  // namespace

namespace {

using Json = nlohmann::json;
using reference::AttentionParams;
using reference::ShawParams;

const char* kCitation =
    "P. Shaw, J. Uszkoreit, A. Vaswani, Self-Attention with Relative Position Representations, "
    "arXiv:1803.02155v2, Sec. 3; signs, clipping and scaling of tensorflow/tensor2tensor "
    "common_attention.py dot_product_attention_relative";

constexpr int kK = 20;  // tensor2tensor transformer_relative max_relative_position

struct ShawCase {
  AttentionCaseDef def;
  ShawParams sp;
  bool negative_control = false;  // expected values of query - key
};

std::vector<ShawCase> shaw_cases_table() {
  struct Shape {
    std::string tag, what;
    bool causal;
    int heads, depth;
    std::int64_t tq, tk;  // queries at the last tq of tk key positions
  };
  const Shape enc{"enc", "encoder self-attention, 48 tokens (r in [-47, 47], clipped at +-20)",
                  false, 2, 32, 48, 48};
  const Shape prefill{"dec", "decoder prefill of 40 tokens (causal, r in [-39, 0])", true, 2,
                      64, 40, 40};
  const Shape decode1{"dec",
                      "decoder decode step: 1 query at position 47 over a 48-key cache "
                      "(distance row -47 .. 0, tensor2tensor cache mode)",
                      true, 4, 32, 1, 48};
  const Shape decode4{"dec",
                      "decoder decode block: 4 queries at positions 60..63 over 64 keys "
                      "(causal, r in [-63, 3])",
                      true, 2, 16, 4, 64};
  struct Row {
    Shape shape;
    DType dtype;
    bool negative_control;
  };
  const std::vector<Row> rows = {
      {enc, DType::kF32, false},     {enc, DType::kBF16, false},  {prefill, DType::kBF16, false},
      {decode1, DType::kF32, false}, {decode4, DType::kBF16, false}, {decode4, DType::kF32, false},
      {enc, DType::kF32, true},
  };
  std::vector<ShawCase> v;
  std::uint64_t seed = 0x5a4a0000;
  for (const auto& row : rows) {
    const Shape& s = row.shape;
    ShawCase c;
    c.sp.max_relative_position = kK;
    c.negative_control = row.negative_control;
    AttentionParams ap;
    ap.n_heads = ap.n_kv_heads = s.heads;
    ap.head_dim = ap.value_dim = s.depth;
    ap.causal = s.causal;
    ap.query_offset = s.tk - s.tq;
    AttentionCaseDef& d = c.def;
    const std::string shape_id = s.tq == s.tk ? "t" + std::to_string(s.tq)
                                              : "q" + std::to_string(s.tq) + "_o" +
                                                    std::to_string(ap.query_offset) + "_k" +
                                                    std::to_string(s.tk);
    d.id = "shaw_" + s.tag + "_k" + std::to_string(kK) + "_h" + std::to_string(s.heads) + "_d" +
           std::to_string(s.depth) + "_" + shape_id +
           (row.negative_control ? "_sign_flipped_invalid" : "") + "_" +
           std::string(dtype_short(row.dtype));
    d.scheme = "shaw";
    d.variant = s.causal ? "causal" : "bidirectional";
    d.description = std::string(row.negative_control ? "NEGATIVE CONTROL (distance query - key "
                                                       "in the expected values): "
                                                     : "") +
                    "Shaw relative attention (K = 20, transformer_relative), " + s.what +
                    ", target " + std::string(dtype_short(row.dtype));
    d.params = ap;
    d.tq = s.tq;
    d.tk = s.tk;
    d.dtype = row.dtype;
    d.seed = seed++;
    d.value_range = 0.5;
    v.push_back(std::move(c));
  }
  return v;
}

/// Table entry i of stream s (4 = relations_keys, 5 = relations_values), exact in the target
/// dtype, in [-0.5, 0.5]: f32 m * 2^-23 (|m| < 2^22), bf16 m * 2^-8 (|m| <= 127).
double table_value(DType t, std::uint64_t seed, std::uint64_t s, std::uint64_t i) {
  if (t == DType::kBF16) return std::ldexp(static_cast<double>(prng_int(seed, s, i, 127)), -8);
  return std::ldexp(static_cast<double>(prng_int(seed, s, i, (1 << 22) - 1)), -23);
}

/// The table with its rows reversed: row r becomes row 2K - r (the sign flip of the distance).
std::vector<double> reversed_rows(const std::vector<double>& t, int rows, int width) {
  std::vector<double> r(t.size());
  for (int x = 0; x < rows; ++x) {
    std::copy_n(t.begin() + static_cast<std::ptrdiff_t>(x) * width, width,
                r.begin() + static_cast<std::ptrdiff_t>(rows - 1 - x) * width);
  }
  return r;
}

GoldenCase shaw_case_generate(ShawCase c) {
  AttentionCaseDef& d = c.def;
  const ShawParams& sp = c.sp;
  const AttentionParams& ap = d.params;
  const int rows = reference::shaw_table_rows(sp), dk = ap.head_dim, dv = ap.value_dim;
  const int H = ap.n_heads;
  std::vector<double> rel_k(static_cast<std::size_t>(rows) * dk);
  std::vector<double> rel_v(static_cast<std::size_t>(rows) * dv);
  for (std::size_t i = 0; i < rel_k.size(); ++i) rel_k[i] = table_value(d.dtype, d.seed, 4, i);
  for (std::size_t i = 0; i < rel_v.size(); ++i) rel_v[i] = table_value(d.dtype, d.seed, 5, i);
  // The tables the expected values use: reversed rows = the distance query - key.
  const bool flip = c.negative_control && !POSENC_MUTANT("gold_shaw_control_not_flipped");
  const std::vector<double> ek = flip ? reversed_rows(rel_k, rows, dk) : rel_k;
  const std::vector<double> ev = flip ? reversed_rows(rel_v, rows, dv) : rel_v;
  const AttentionCaseInputs in = attention_case_inputs(d);
  const auto hooks50 = reference::shaw_hooks<mp50>(
      sp, ap, d.tq, d.tk, std::vector<mp50>(in.q.begin(), in.q.end()),
      std::vector<mp50>(ek.begin(), ek.end()), std::vector<mp50>(ev.begin(), ev.end()));
  const auto hooks100 = reference::shaw_hooks<mp100>(
      sp, ap, d.tq, d.tk, std::vector<mp100>(in.q.begin(), in.q.end()),
      std::vector<mp100>(ek.begin(), ek.end()), std::vector<mp100>(ev.begin(), ev.end()));
  d.bias50 = hooks50.bias;
  d.bias100 = hooks100.bias;
  d.value_hook50 = hooks50.value_hook;
  d.value_hook100 = hooks100.value_hook;
  const std::vector<std::int32_t> idx =
      reference::shaw_index_matrix(sp, d.tq, d.tk, ap.query_offset);
  const auto row_of = [&idx, &d, flip, rows](std::int64_t i, std::int64_t j) {
    const int r = idx[static_cast<std::size_t>(i * d.tk + j)];
    return flip ? rows - 1 - r : r;
  };
  const double scale = 1.0 / std::sqrt(static_cast<double>(dk));
  const std::vector<double> q = in.q;
  if (!POSENC_MUTANT("gold_shaw_bias_cond_dropped")) {
    d.bias_cond = [q, rel_k, row_of, scale, H, dk](int h, std::int64_t i, std::int64_t j) {
      const std::size_t r = static_cast<std::size_t>(row_of(i, j)) * dk;
      double s = 0;
      for (int x = 0; x < dk; ++x) s += std::fabs(q[(i * H + h) * dk + x] * rel_k[r + x]);
      return scale * s;
    };
  }
  if (!POSENC_MUTANT("gold_shaw_value_offset_dropped")) {
    d.value_offset = [rel_v, row_of, dv](int, std::int64_t i, std::int64_t j, int x) {
      return rel_v[static_cast<std::size_t>(row_of(i, j)) * dv + x];
    };
  }
  // No mutant drops this term: no test can see it go (the bf16 pipeline's out reaches 0.24 of
  // the budget with it, and other terms of the bound cover the same rounding in practice).
  d.eager_out_extra = 0.5;
  Json flags = {"ShawRelativeSign", "ShawClipping", "ShawRelativeValues", "ShawScaleBothTerms"};
  if (ap.query_offset > 0) flags.push_back("KvCacheOffset");
  d.extra = {{"citation", kCitation},
             {"preset",
              {{"name", "transformer_relative"},
               {"source",
                "tensorflow/tensor2tensor models/transformer.py transformer_relative "
                "(max_relative_position 20, self_attention_type dot_product_relative); "
                "small heads and depth for level 1"},
               {"config", {{"max_relative_position", kK}}}}},
             {"flags", flags}};
  if (c.negative_control) {
    d.extra["result"] = "invalid";
    d.extra["negative_control"] = {
        {"mistake", "sign-flipped"},
        {"expected_values_use", "distance = query position - key position"},
        {"meaning",
         "the expected tensors follow the WRONG sign; a correct engine differs from them "
         "(verify PASS), an engine that computes query - key reproduces them (verify FAIL)"}};
  }
  GoldenCase g = attention_case_generate(d);

  std::vector<std::int32_t> eidx(idx.size());
  for (std::int64_t i = 0; i < d.tq; ++i) {
    for (std::int64_t j = 0; j < d.tk; ++j) eidx[i * d.tk + j] = row_of(i, j);
  }
  Tensor t_k = input_tensor("relations_keys", d.dtype, {rows, dk}, rel_k);
  Tensor t_v = input_tensor("relations_values", d.dtype, {rows, dv}, rel_v);
  const Tensor t_idx = tensor_from_i32("relative_index", {d.tq, d.tk}, eidx);
  const TensorSpec in_k = input_spec(t_k), in_v = input_spec(t_v);
  g.tensors.push_back(std::move(t_k));
  g.tensors.push_back(std::move(t_v));
  ExpectedTensor ei;
  ei.spec = {"relative_index", "table", DType::kI32, {d.tq, d.tk}, "",
             {CheckKind::kExact, exact_budgets(d.dtype)},
             {{"query", "query_positions", {}, {}}, {"key", "key_positions", {}, {}}}};
  ei.exact_tensor = &t_idx;
  const TensorSpec si = add_expected(&g.tensors, std::move(ei));

  Json& m = g.manifest;
  m["inputs"].push_back(tensor_spec_to_json(in_k, false));
  m["inputs"].push_back(tensor_spec_to_json(in_v, false));
  Json ex = Json::array({tensor_spec_to_json(si, true)});
  for (const auto& e : m["expected"]) ex.push_back(e);
  m["expected"] = ex;
  m["params"]["max_relative_position"] = sp.max_relative_position;
  m["params"]["table_rows"] = rows;
  m["conventions"]["relative_distance"] =
      "r = key position - query position (tensor2tensor range_k[None, :] - range_q[:, None])";
  m["conventions"]["relative_index"] = "relative_index[i, j] = clip(r_ij, -K, K) + K, in [0, 2K]";
  m["conventions"]["scores"] =
      "s_ij = (q_i / sqrt(d)) . (k_j + relations_keys[relative_index[i, j]]): the 1/sqrt(d) "
      "scales both terms; masked entries excluded";
  m["conventions"]["output"] =
      "out_i = sum_j p_ij (v_j + relations_values[relative_index[i, j]])";
  m["conventions"]["decode"] =
      "fewer queries than keys: the queries sit at the LAST key positions (query_offset = "
      "Tk - Tq; tensor2tensor cache mode, distance row -Tk + 1 .. 0 for one query)";
  m["conventions"]["table_layout"] =
      "relations_keys [2K + 1, d], relations_values [2K + 1, dv], row r = distance r - K, "
      "shared by all heads";
  m["detection"] = Json::array(
      {{{"flag", "ShawRelativeSign"},
        {"stages", {"relative_index", "probs", "out"}},
        {"blind", ""}},
       {{"flag", "ShawClipping"}, {"stages", {"relative_index", "probs", "out"}}, {"blind", ""}},
       {{"flag", "ShawRelativeValues"},
        {"stages", {"out"}},
        {"blind", "relative_index and probs do not read relations_values"}}});
  m["prng"] =
      "splitmix64 counter: value(seed, stream, i); stream 1 = q, 2 = k, 3 = v, 4 = "
      "relations_keys, 5 = relations_values (f32: integer * 2^-23, |integer| < 2^22; bf16: "
      "integer * 2^-8, |integer| <= 127)";
  return g;
}

std::vector<CaseRow> shaw_cases() {
  std::vector<CaseRow> rows;
  for (const auto& c : shaw_cases_table()) rows.push_back({c.def.id, c.def.description});
  return rows;
}

GoldenCase shaw_generate(const std::string& id) {
  for (const auto& c : shaw_cases_table()) {
    if (c.def.id == id) return shaw_case_generate(c);
  }
  throw_invalid("shaw_generate", "no shaw case has this id", id);
}

// ---- the built-in engine ---------------------------------------------------------------------

std::vector<std::string> shaw_mistakes() {
  return {"sign-flipped", "clip-off-by-one", "values-missing", "no-offset"};
}

/// The rows of the distances of a block under a mistake (sign-flipped: query - key;
/// clip-off-by-one: clip to K - 1), otherwise the optimized kernel's table.
optimized::ShawIndexTable mistaken_index(const ShawParams& sp, std::int64_t tq, std::int64_t tk,
                                         std::int64_t query_offset, const std::string& mistake) {
  optimized::ShawIndexTable t = optimized::shaw_index_table(sp, tq, tk, query_offset);
  const int k = sp.max_relative_position;
  for (std::size_t x = 0; x < t.index.size(); ++x) {
    const std::int64_t r = t.r_min + static_cast<std::int64_t>(x);
    if (kMistakes.is(mistake, MistakeId::kSignFlipped) && !POSENC_MUTANT("engine_shaw_sign_mistake_noop")) {
      t.index[x] = static_cast<std::int32_t>(std::clamp<std::int64_t>(-r, -k, k) + k);
    } else if (kMistakes.is(mistake, MistakeId::kClipOffByOne)) {
      t.index[x] = static_cast<std::int32_t>(std::clamp<std::int64_t>(r, -(k - 1), k - 1) + k);
    }
  }
  return t;
}

/// PyTorch-eager style emulation of tensor2tensor's dot_product_attention_relative in the
/// pipeline's compute dtype c: q *= depth^-1/2 (rounded to c); logits = q k^T + q aK^T gathered
/// (each a float32 accumulation rounded to c, then their sum rounded); the mask adds c's
/// lowest; softmax in float32 cast to c; out = p v + p aV gathered (each rounded to c, then
/// the sum).
TensorMap shaw_run_pipeline(const CaseSpec& spec, const TensorMap& golden,
                            const std::string& pipeline, const ShawParams& sp,
                            const AttentionParams& p) {
  const Json& pj = spec.manifest.at("params");
  const std::int64_t tq = pj.at("tq").get<std::int64_t>(), tk = pj.at("tk").get<std::int64_t>();
  const DType t = golden.at("q").dtype;
  if (const auto why = pipelines::dtype_mismatch(pipeline, t); !why.empty()) {
    throw_invalid("shaw_run_pipeline", why, pipeline);
  }
  const DType c = pipelines::compute_dtype(pipeline);
  using pipelines::fl;
  const auto q = tensor_to_f32(golden.at("q")), k = tensor_to_f32(golden.at("k")),
             v = tensor_to_f32(golden.at("v"));
  const auto rk = tensor_to_f32(golden.at("relations_keys")),
             rv = tensor_to_f32(golden.at("relations_values"));
  const int H = p.n_heads, Hkv = p.n_kv_heads, d = p.head_dim, dv = p.value_dim;
  const int group = H / Hkv;
  const float scale = static_cast<float>(static_cast<double>(reference::attention_scale<mp50>(p)));
  const float lowest = c == DType::kF32 ? std::numeric_limits<float>::lowest()
                       : c == DType::kBF16 ? bf16_to_float(0xff7f)
                                           : -65504.0f;
  const auto idx = reference::shaw_index_matrix(sp, tq, tk, p.query_offset);
  const bool rel_unscaled = POSENC_MUTANT("engine_shaw_pipeline_rel_unscaled");
  std::vector<float> probs(static_cast<std::size_t>(H * tq * tk)),
      out(static_cast<std::size_t>(tq * H * dv));
  for (int h = 0; h < H; ++h) {
    const int kh = h / group;
    for (std::int64_t i = 0; i < tq; ++i) {
      std::vector<float> qs(static_cast<std::size_t>(d)), qu(static_cast<std::size_t>(d));
      for (int x = 0; x < d; ++x) {
        qu[x] = q[(i * H + h) * d + x];
        qs[x] = fl(qu[x] * scale, c);
      }
      std::vector<float> s(static_cast<std::size_t>(tk));
      for (std::int64_t j = 0; j < tk; ++j) {
        const float* a = &rk[static_cast<std::size_t>(idx[i * tk + j]) * d];
        float dot = 0, rel = 0;
        for (int x = 0; x < d; ++x) {
          dot += qs[x] * k[(j * Hkv + kh) * d + x];
          rel += (rel_unscaled ? qu[x] : qs[x]) * a[x];
        }
        float sc = fl(fl(dot, c) + fl(rel, c), c);
        if (!reference::attention_visible(p, {}, tk, i, j)) sc = fl(sc + lowest, c);
        s[j] = sc;
      }
      float mx = -std::numeric_limits<float>::infinity();
      for (float x : s) mx = std::max(mx, x);
      float sum = 0;
      std::vector<float> e(static_cast<std::size_t>(tk));
      for (std::int64_t j = 0; j < tk; ++j) sum += (e[j] = std::exp(s[j] - mx));
      float* prow = &probs[(static_cast<std::size_t>(h) * tq + i) * tk];
      for (std::int64_t j = 0; j < tk; ++j) prow[j] = fl(e[j] / sum, c);
      for (int cc = 0; cc < dv; ++cc) {
        float xy = 0, xz = 0;
        for (std::int64_t j = 0; j < tk; ++j) {
          xy += prow[j] * v[(j * Hkv + kh) * dv + cc];
          xz += prow[j] * rv[static_cast<std::size_t>(idx[i * tk + j]) * dv + cc];
        }
        out[(i * H + h) * dv + cc] = fl(fl(xy, c) + fl(xz, c), c);
      }
    }
  }
  TensorMap res;
  res.emplace("out", engine_tensor("out", t, {tq, H, dv}, out));
  res.emplace("probs", engine_tensor("probs", t, {H, tq, tk}, probs));
  res.emplace("relative_index", tensor_from_i32("relative_index", {tq, tk}, idx));
  return res;
}

TensorMap shaw_run_engine(const CaseSpec& spec, const TensorMap& golden, const EngineOptions& o) {
  const auto& mk = shaw_mistakes();
  if (!o.mistake.empty() && std::find(mk.begin(), mk.end(), o.mistake) == mk.end()) {
    throw_invalid("shaw_run_engine",
                  "unknown mistake (known: sign-flipped, clip-off-by-one, values-missing, "
                  "no-offset)",
                  o.mistake);
  }
  if (pipelines::of(o.pipeline) != Pipeline::kExact && !o.mistake.empty()) {
    throw_invalid("shaw_run_engine", "mistakes run on the exact pipeline only", o.mistake);
  }
  const AttentionParams p = attention_params_from_manifest(spec.manifest);
  ShawParams sp;
  sp.max_relative_position = spec.manifest.at("params").at("max_relative_position").get<int>();
  if (pipelines::of(o.pipeline) != Pipeline::kExact) return shaw_run_pipeline(spec, golden, o.pipeline, sp, p);
  const Json& pj = spec.manifest.at("params");
  const std::int64_t tq = pj.at("tq").get<std::int64_t>(), tk = pj.at("tk").get<std::int64_t>();
  const auto q = tensor_to_f32(golden.at("q")), k = tensor_to_f32(golden.at("k")),
             v = tensor_to_f32(golden.at("v"));
  const auto rk = tensor_to_f32(golden.at("relations_keys")),
             rv = tensor_to_f32(golden.at("relations_values"));
  AttentionParams rel_p = p;  // the positions the relative terms see
  if (kMistakes.is(o.mistake, MistakeId::kNoOffset) && !POSENC_MUTANT("engine_shaw_no_offset_noop")) {
    rel_p.query_offset = 0;
  }
  const optimized::ShawRelative rel(sp, rel_p, tq, tk, q, rk, rv,
                                    mistaken_index(sp, tq, tk, rel_p.query_offset, o.mistake));
  const optimized::AttentionValueHook* values = kMistakes.is(o.mistake, MistakeId::kValuesMissing) ? nullptr : &rel;
  std::vector<float> out(static_cast<std::size_t>(tq * p.n_heads * p.value_dim));
  std::vector<float> probs(static_cast<std::size_t>(p.n_heads * tq * tk));
  optimized::attention_forward(p, {}, tq, tk, q, k, v, out, &rel, values);
  optimized::attention_probs(p, {}, tq, tk, q, k, probs, &rel);
  std::vector<std::int32_t> idx(static_cast<std::size_t>(tq * tk));
  for (std::int64_t i = 0; i < tq; ++i) {
    for (std::int64_t j = 0; j < tk; ++j) {
      idx[i * tk + j] = rel.index().at(j - (rel_p.query_offset + i));
    }
  }
  const DType t = golden.at("q").dtype;
  TensorMap res;
  res.emplace("out", engine_tensor("out", t, {tq, p.n_heads, p.value_dim}, out));
  res.emplace("probs", engine_tensor("probs", t, {p.n_heads, tq, tk}, probs));
  res.emplace("relative_index", tensor_from_i32("relative_index", {tq, tk}, idx));
  return res;
}

}  // namespace

SchemeEntry shaw_scheme() {
  SchemeEntry e{"shaw",
                "Shaw et al. relative keys and values, clipped at +-K, tables shared by heads",
                &shaw_cases,
                &shaw_generate,
                &shaw_run_engine,
                &shaw_mistakes};
  e.order = 100;  // its place in `posenc list` and the catalog
  return e;
}

}  // namespace posenc::golden
