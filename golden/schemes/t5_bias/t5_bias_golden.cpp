// Golden cases for the T5 relative position bias. Formula: see reference/t5_bias.hpp.
//
//   bucket tables (level 3, small): r = key - query in [-4096, 4096] for the T5 defaults
//     (32 buckets, max_distance 128), bidirectional and causal. Input relative_position [8193]
//     (i64); expected buckets [8193] (i32, exact). The manifest lists each bucket's range of r
//     inline (the published bucket boundaries must come out) and the hard positions with why.
//   attention (level 1): T5-small (8 heads, d_kv 64) and FLAN-T5-base (12 heads, d_kv 64)
//     shaped self-attention with the bias: an encoder query block (bidirectional, no mask,
//     queries 10..13 over 28 keys: r in [-13, 17]), a decoder prefill (causal, 8 tokens) and
//     decoder decode steps (causal, queries 24..27 over a 28-key cache: r in [-27, 3]); f32 and
//     bf16 targets. Inputs: q, k, v and relative_attention_bias [num_buckets, n_heads], seeded
//     and exact in the target dtype. Expected stages: buckets [Tq, Tk] (i32, exact), bias
//     [H, Tq, Tk] (target dtype, exact: a gather of input values), probs and out
//     (golden/cases/attention_case.hpp: conditioned, mp50 with an mp100 cross-check).
//   negative control (result "invalid"): the T5-small encoder block with the expected values of
//     the bidirectional flag flipped; verify passes an engine only if it does NOT reproduce it.
// Engine mistakes: direction-flipped (bidirectional flag inverted: transformers #8518),
// sign-flipped (r = query - key), no-offset (the bias ignores the cache offset: candle #899).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "golden/cases/mistakes.hpp"
#include "golden/cases/oracle_tensors.hpp"
#include "golden/cases/attention_case.hpp"
#include "golden/cases/pipelines.hpp"
#include "golden/format/prng.hpp"
#include "golden/cases/registry.hpp"
#include "optimized/t5_bias.hpp"
#include "reference/common/errors.hpp"
#include "reference/common/rounding.hpp"
#include "reference/common/scalar.hpp"
#include "reference/t5_bias.hpp"
#include "reference/common/mutant.hpp"

namespace posenc::golden {

namespace {

/// The mistakes this file branches on (golden/cases/mistakes.hpp).
enum class MistakeId { kNone, kOther, kDirectionFlipped, kNoOffset, kSignFlipped };
const MistakeTable<MistakeId, 3> kMistakes(
    {"t5_bias"},
    {{
     {MistakeId::kDirectionFlipped, "direction-flipped"},
     {MistakeId::kNoOffset, "no-offset"},
     {MistakeId::kSignFlipped, "sign-flipped"}}});

}  // namespace

namespace {

using Json = nlohmann::json;
using reference::AttentionParams;
using reference::AttentionScale;
using reference::T5BiasParams;

const char* kCitation =
    "C. Raffel et al., Exploring the Limits of Transfer Learning with a Unified Text-to-Text "
    "Transformer, arXiv:1910.10683v4, Sec. 2.1; bucket function of tensorflow/mesh "
    "transformer_layers.py _relative_position_bucket";

Json t5_conventions(const T5BiasParams& tp) {
  const int nb = reference::t5_bias_direction_buckets(tp), e = reference::t5_bias_max_exact(tp);
  return {
      {"relative_position", "r = key position - query position (memory - context)"},
      {"direction", tp.bidirectional
                        ? "bidirectional (encoder): N' = num_buckets / 2 buckets per direction; "
                          "r > 0 adds N'; n = |r|"
                        : "causal (decoder): N' = num_buckets; n = max(-r, 0), so every future "
                          "key (r > 0) is bucket 0"},
      {"bucket",
       "n < E: n; else min(E + trunc(ln(n / E) / ln(D / E) * (N' - E)), N' - 1), "
       "E = N' / 2 = " +
           std::to_string(e) + ", N' = " + std::to_string(nb) +
           ", D = max_distance; trunc toward zero, decided exactly (no float log)"},
      {"saturation",
       "every n >= max_distance is bucket N' - 1 of its direction; the last bucket "
       "starts where the formula first reaches N' - 1"}};
}

Json t5_preset_config(const T5BiasParams& tp) {
  return {{"relative_attention_num_buckets", tp.num_buckets},
          {"relative_attention_max_distance", tp.max_distance}};
}

// ---- bucket tables -----------------------------------------------------------------------------

constexpr std::int64_t kTableRange = 4096;

struct BucketCase {
  std::string id, description;
  bool bidirectional = true;
};

std::vector<BucketCase> bucket_cases() {
  return {{"t5_bias_buckets_bidir_n32_d128_r4096",
           "T5 buckets, bidirectional (encoder), 32 buckets, max_distance 128, r in [-4096, 4096] "
           "(level 3)",
           true},
          {"t5_bias_buckets_causal_n32_d128_r4096",
           "T5 buckets, causal (decoder), 32 buckets, max_distance 128, r in [-4096, 4096] "
           "(level 3)",
           false}};
}

struct HardR {
  std::int64_t r;
  std::string why;
};

std::vector<HardR> hard_positions(bool bidirectional) {
  if (bidirectional) {
    return {{-4096, "far past key: saturated, bucket 15"},
            {-128, "r = -max_distance: nothing changes here (the last bucket started at -91)"},
            {-91, "first r of the last lower bucket 15 (not -128)"},
            {-90, "last r of bucket 14"},
            {-64, "n = 64: x = 6 exactly (tie); a float log that lands below 6 gives 13"},
            {-32, "n = 32: x = 4 exactly (tie)"},
            {-16, "n = 16: x = 2 exactly (tie), bucket 10; a float log below 2 gives 9"},
            {-8, "n = E = 8: first log bucket (x = 0)"},
            {-7, "last exact bucket of the lower half"},
            {-1, "previous key: bucket 1"},
            {0, "the query's own key: bucket 0; an engine that offsets r >= 0 gives 16"},
            {1, "next key: upper half, bucket 17; an engine with r = query - key gives 1"},
            {8, "n = 8, upper half: bucket 24"},
            {16, "n = 16, upper half: tie x = 2, bucket 26"},
            {91, "first r of the last upper bucket 31"},
            {128, "r = max_distance"},
            {4096, "far future key: saturated, bucket 31"}};
  }
  return {
      {-4096, "far past key: saturated, bucket 31"},
      {-128, "r = -max_distance"},
      {-113, "first r of the last bucket 31 (not -128)"},
      {-112, "last r of bucket 30"},
      {-19, "first r of bucket 17"},
      {-16, "n = E = 16: first log bucket 16 (x = 0)"},
      {-15, "last exact bucket 15"},
      {-1, "previous key: bucket 1"},
      {0, "the query's own key: bucket 0"},
      {1, "future key: collapses to bucket 0 (n = max(-r, 0)); a bidirectional engine gives 17"},
      {4096, "far future key: bucket 0"}};
}

GoldenCase bucket_generate(const BucketCase& c) {
  const T5BiasParams tp{32, 128, c.bidirectional, 1};
  reference::t5_bias_check(tp, "t5_bias_generate");
  const std::int64_t n = 2 * kTableRange + 1;
  std::vector<std::int64_t> r(static_cast<std::size_t>(n));
  std::vector<std::int32_t> b(r.size());
  for (std::int64_t x = 0; x < n; ++x) {
    r[x] = x - kTableRange;
    b[x] = reference::t5_bias_bucket(tp, r[x]);
  }
  // Inline table: the range of r of every bucket (contiguous: buckets are monotone in |r| per
  // direction); the extreme ranges are cut at +-4096.
  std::map<int, std::pair<std::int64_t, std::int64_t>> ranges;
  for (std::size_t x = 0; x < r.size(); ++x) {
    auto [it, fresh] = ranges.try_emplace(b[x], r[x], r[x]);
    if (!fresh) it->second.second = r[x];
  }
  Json jr = Json::array();
  for (const auto& [bucket, lohi] : ranges) {
    jr.push_back({{"bucket", bucket}, {"r_first", lohi.first}, {"r_last", lohi.second}});
  }
  Json why = Json::array();
  for (const auto& h : hard_positions(c.bidirectional)) {
    why.push_back(
        {{"position", h.r}, {"bucket", reference::t5_bias_bucket(tp, h.r)}, {"why", h.why}});
  }

  std::vector<Tensor> tensors;
  tensors.push_back(tensor_from_i64("relative_position", {n}, r));
  std::vector<TensorSpec> inputs = {input_spec(tensors[0])};
  const Tensor t_buckets = tensor_from_i32("buckets", {n}, b);
  ExpectedTensor ex;
  ex.spec = {"buckets", "table", DType::kI32, {n}, "", {CheckKind::kExact, exact_budgets(std::nullopt)},
             {{"r", "", {}, {"relative_position"}}}};
  ex.exact_tensor = &t_buckets;
  std::vector<TensorSpec> expected = {add_expected(&tensors, std::move(ex))};

  Json m;
  m["schema"] = kSchemaName;
  m["version"] = kSchemaVersion;
  m["generator"] = {{"name", kGeneratorName}, {"version", kGeneratorVersion}};
  m["id"] = c.id;
  m["scheme"] = "t5_bias";
  m["variant"] = c.bidirectional ? "bidirectional" : "causal";
  m["result"] = "valid";
  m["level"] = 3;
  m["description"] = c.description;
  m["citation"] = kCitation;
  m["preset"] = {{"name", "t5-defaults"},
                 {"hf_model", "google-t5/t5-small"},
                 {"source", "HF T5Config defaults; google-t5/t5-small config.json"},
                 {"config", t5_preset_config(tp)}};
  m["conventions"] = t5_conventions(tp);
  m["params"] = {{"num_buckets", tp.num_buckets},
                 {"max_distance", tp.max_distance},
                 {"bidirectional", tp.bidirectional},
                 {"direction_buckets", reference::t5_bias_direction_buckets(tp)},
                 {"max_exact", reference::t5_bias_max_exact(tp)},
                 {"r_min", -kTableRange},
                 {"r_max", kTableRange}};
  m["oracle"] = {{"backend",
                  "exact integer arithmetic: trunc(x) decided by n^M E^k >= D^k E^M "
                  "(boost cpp_int) wherever the double estimate of x lies within "
                  "2^-20 of an integer"},
                 {"rounding", "none: integers"}};
  m["positions"] = why;
  m["tables"] = {{"bucket_ranges", jr}};
  m["flags"] = {"T5BucketDirection", "T5RelativeSign", "T5LogBucketTruncation",
                "T5BucketSaturation"};
  m["pipelines"] = {{"fp32", "HF's float32 formula (log of the float32 ratio): the same buckets "
                             "for every r of this table (a test checks it)"}};
  manifest_add_tensors(m, c.id, inputs, expected);
  return GoldenCase{m, std::move(tensors)};
}

// ---- attention ----------------------------------------------------------------------------------

struct T5Preset {
  std::string name, short_id, hf_model, source;
  int n_heads = 0, d_kv = 0;
  Json config;
};

T5Preset t5_small() {
  return {"t5-small",
          "t5_small",
          "google-t5/t5-small",
          "google-t5/t5-small config.json",
          8,
          64,
          Json{{"d_model", 512},
               {"num_heads", 8},
               {"d_kv", 64},
               {"num_layers", 6},
               {"relative_attention_num_buckets", 32}}};
}

T5Preset flan_t5_base() {
  return {"flan-t5-base",
          "flan_t5_base",
          "google/flan-t5-base",
          "flan-t5-base config.json via reeddg/T5sum",
          12,
          64,
          Json{{"d_model", 768},
               {"num_heads", 12},
               {"d_kv", 64},
               {"num_layers", 12},
               {"d_ff", 2048},
               {"relative_attention_num_buckets", 32},
               {"relative_attention_max_distance", 128}}};
}

struct T5AttentionCase {
  AttentionCaseDef def;
  T5BiasParams tp;                // what the model (and a correct engine) runs
  bool negative_control = false;  // expected values with tp.bidirectional flipped
  T5Preset preset;
};

std::vector<T5AttentionCase> attention_cases() {
  struct Shape {
    std::string tag, what;
    bool bidirectional;
    std::int64_t tq, tk, offset;
  };
  const Shape enc{"enc", "encoder query block: queries 10..13 against all 28 keys (r in [-13, 17])",
                  true,  4,
                  28,    10};
  const Shape prefill{"dec", "decoder prefill of 8 tokens (causal)", false, 8, 8, 0};
  const Shape decode{"dec",
                     "decoder decode step: 4 tokens at positions 24..27 after a 24-token "
                     "cache (r in [-27, 3], future keys masked)",
                     false,
                     4,
                     28,
                     24};
  struct Row {
    T5Preset preset;
    Shape shape;
    DType dtype;
    bool negative_control;
  };
  const std::vector<Row> rows = {
      {t5_small(), enc, DType::kF32, false},      {t5_small(), enc, DType::kBF16, false},
      {t5_small(), prefill, DType::kBF16, false}, {t5_small(), decode, DType::kF32, false},
      {flan_t5_base(), enc, DType::kF32, false},  {flan_t5_base(), decode, DType::kBF16, false},
      {t5_small(), enc, DType::kBF16, true},
  };
  std::vector<T5AttentionCase> v;
  std::uint64_t seed = 0x75b1a500;
  for (const auto& row : rows) {
    const Shape& s = row.shape;
    T5AttentionCase c;
    c.preset = row.preset;
    c.tp = T5BiasParams{32, 128, s.bidirectional, row.preset.n_heads};
    c.negative_control = row.negative_control;
    AttentionParams ap;
    ap.n_heads = ap.n_kv_heads = row.preset.n_heads;
    ap.head_dim = ap.value_dim = row.preset.d_kv;
    ap.query_offset = s.offset;
    AttentionCaseDef& d = c.def;
    const std::string shape_id = s.tq == s.tk && s.offset == 0
                                     ? "t" + std::to_string(s.tq)
                                     : "q" + std::to_string(s.tq) + "_o" +
                                           std::to_string(s.offset) + "_k" + std::to_string(s.tk);
    d.id = "t5_bias_" + s.tag + "_" + row.preset.short_id + "_h" + std::to_string(ap.n_heads) +
           "_d" + std::to_string(ap.head_dim) + "_" + shape_id +
           (row.negative_control ? "_direction_flipped_invalid" : "") + "_" +
           std::string(dtype_short(row.dtype));
    d.scheme = "t5_bias";
    d.variant = s.bidirectional ? "bidirectional" : "causal";
    d.description = std::string(row.negative_control ? "NEGATIVE CONTROL (bidirectional flag "
                                                       "flipped in the expected values): "
                                                     : "") +
                    row.preset.name + " self-attention with T5 bias, " + s.what + ", target " +
                    std::string(dtype_short(row.dtype));
    d.params = reference::t5_bias_attention_params(ap, c.tp, "t5_bias_generate");
    d.tq = s.tq;
    d.tk = s.tk;
    d.dtype = row.dtype;
    d.seed = seed++;
    d.value_range = 0.5;
    v.push_back(std::move(c));
  }
  return v;
}

/// Bias table entry i, exact in the target dtype: f32 m * 2^-20 (|m| < 2^22), bf16 m * 2^-5
/// (|m| <= 127); values in (-4, 4).
double table_value(DType t, std::uint64_t seed, std::uint64_t i) {
  if (t == DType::kBF16) return std::ldexp(static_cast<double>(prng_int(seed, 4, i, 127)), -5);
  return std::ldexp(static_cast<double>(prng_int(seed, 4, i, (1 << 22) - 1)), -20);
}

GoldenCase attention_generate(T5AttentionCase c) {
  AttentionCaseDef& d = c.def;
  const T5BiasParams& tp = c.tp;
  T5BiasParams expect_tp = tp;  // the convention the expected values follow
  const bool flip = c.negative_control && !POSENC_MUTANT("gold_t5_control_not_flipped");
  if (flip) expect_tp.bidirectional = !tp.bidirectional;
  const std::int64_t qo = d.params.query_offset, nb = tp.num_buckets, H = tp.n_heads;
  std::vector<double> table(static_cast<std::size_t>(nb * H));
  for (std::size_t i = 0; i < table.size(); ++i) table[i] = table_value(d.dtype, d.seed, i);
  const std::vector<mp50> table50(table.begin(), table.end());
  const std::vector<mp100> table100(table.begin(), table.end());
  d.bias50 = reference::t5_bias_hooks<mp50>(expect_tp, table50, qo).bias;
  d.bias100 = reference::t5_bias_hooks<mp100>(expect_tp, table100, qo).bias;
  Json flags = {"T5BucketDirection", "T5RelativeSign", "T5LogBucketTruncation", "T5NoScoreScale"};
  if (qo > 0) flags.push_back("KvCacheOffset");
  d.extra = {{"citation", kCitation},
             {"preset",
              {{"name", c.preset.name},
               {"hf_model", c.preset.hf_model},
               {"source", c.preset.source},
               {"config", c.preset.config}}},
             {"flags", flags}};
  if (c.negative_control) {
    d.extra["result"] = "invalid";
    d.extra["negative_control"] = {
        {"mistake", "direction-flipped"},
        {"expected_values_use", {{"bidirectional", expect_tp.bidirectional}}},
        {"meaning",
         "the expected tensors follow the WRONG direction flag; a correct engine "
         "differs from them (verify PASS), an engine that flips the flag "
         "reproduces them (verify FAIL: transformers #8518)"}};
  }
  GoldenCase g = attention_case_generate(d);

  // The T5 stages and the table input, added to the shared attention case.
  const auto buckets = reference::t5_bias_bucket_matrix(expect_tp, d.tq, d.tk, qo);
  const auto bias = reference::t5_bias_matrix<mp50>(expect_tp, table50, d.tq, d.tk, qo);
  Tensor t_table = target_tensor("relative_attention_bias", d.dtype, {nb, H}, table50);
  const Tensor t_buckets = tensor_from_i32("buckets", {d.tq, d.tk}, buckets);
  const Tensor t_bias = target_tensor("bias", d.dtype, {H, d.tq, d.tk}, bias);
  const TensorSpec in = input_spec(t_table);
  g.tensors.push_back(std::move(t_table));
  // Buckets are integers and the bias a gather of input values: exact in every pipeline (HF's
  // float32 bucket formula agrees with the exact one on these distances).
  ExpectedTensor eb, ev;
  eb.spec = {"buckets", "table", DType::kI32, {d.tq, d.tk}, "", {CheckKind::kExact, exact_budgets(d.dtype)},
             {{"query", "query_positions", {}, {}}, {"key", "key_positions", {}, {}}}};
  eb.exact_tensor = &t_buckets;
  ev.spec = {"bias", "bias", d.dtype, {H, d.tq, d.tk}, "", {CheckKind::kExact, exact_budgets(d.dtype)},
             {{"head", "", {}, {}}, {"query", "query_positions", {}, {}}, {"key", "key_positions", {}, {}}}};
  ev.exact_tensor = &t_bias;
  const TensorSpec sb = add_expected(&g.tensors, std::move(eb));
  const TensorSpec sv = add_expected(&g.tensors, std::move(ev));

  Json& m = g.manifest;
  m["inputs"].push_back(tensor_spec_to_json(in, false));
  Json ex = Json::array({tensor_spec_to_json(sb, true), tensor_spec_to_json(sv, true)});
  for (const auto& e : m["expected"]) ex.push_back(e);
  m["expected"] = ex;
  m["params"]["num_buckets"] = tp.num_buckets;
  m["params"]["max_distance"] = tp.max_distance;
  m["params"]["bidirectional"] = tp.bidirectional;
  m["params"]["max_exact"] = reference::t5_bias_max_exact(tp);
  const Json conventions = t5_conventions(tp);
  for (const auto& [k, val] : conventions.items()) m["conventions"][k] = val;
  m["conventions"]["bias"] =
      "bias[h, i, j] = relative_attention_bias[buckets[i, j], h], added to the raw score; "
      "T5 does not scale q . k by 1/sqrt(d_kv)";
  m["conventions"]["table_layout"] =
      "relative_attention_bias [num_buckets, n_heads] (HF "
      "nn.Embedding weight); bias [H, Tq, Tk]; buckets [Tq, Tk]";
  m["detection"] = Json::array(
      {{{"flag", "T5TableLayout"}, {"stages", {"bias", "probs", "out"}},
        {"blind", "buckets do not read relative_attention_bias"}},
       {{"flag", "T5BucketDirection"}, {"stages", {"buckets", "bias", "probs", "out"}}, {"blind", ""}}});
  m["prng"] =
      "splitmix64 counter: value(seed, stream, i); stream 1 = q, 2 = k, 3 = v, 4 = "
      "relative_attention_bias (f32: integer * 2^-20, |integer| < 2^22; bf16: integer * "
      "2^-5, |integer| <= 127)";
  return g;
}

// ---- the case table ----------------------------------------------------------------------------

std::vector<CaseRow> t5_bias_cases() {
  std::vector<CaseRow> rows;
  for (const auto& c : bucket_cases()) rows.push_back({c.id, c.description});
  for (const auto& c : attention_cases()) rows.push_back({c.def.id, c.def.description});
  return rows;
}

GoldenCase t5_bias_generate(const std::string& id) {
  for (const auto& c : bucket_cases()) {
    if (c.id == id) return bucket_generate(c);
  }
  for (const auto& c : attention_cases()) {
    if (c.def.id == id) return attention_generate(c);
  }
  throw_invalid("t5_bias_generate", "no t5_bias case has this id", id);
}

// ---- the built-in engine: posenc's optimized kernels, fed and read through files ----------------

std::vector<std::string> t5_bias_mistakes() {
  return {"direction-flipped", "sign-flipped", "no-offset"};
}

/// Mistake "sign-flipped": the bucket of query - key (r with the wrong sign).
class SignFlippedBias final : public optimized::AttentionBias {
 public:
  SignFlippedBias(const T5BiasParams& p, std::vector<float> table, std::int64_t query_offset)
      : p_(p), table_(std::move(table)), query_offset_(query_offset) {}
  std::int32_t bucket(std::int64_t i, std::int64_t j) const {
    return reference::t5_bias_bucket(p_, (query_offset_ + i) - j);
  }
  void fill(int head, std::int64_t q0, int nq, std::int64_t k0, int nk,
            float* tile) const override {
    for (int r = 0; r < nq; ++r) {
      for (int x = 0; x < nk; ++x) {
        tile[r * nk + x] =
            table_[static_cast<std::size_t>(bucket(q0 + r, k0 + x)) * p_.n_heads + head];
      }
    }
  }

 private:
  T5BiasParams p_;
  std::vector<float> table_;
  std::int64_t query_offset_;
};

T5BiasParams t5_params_from_manifest(const Json& m, int n_heads) {
  const Json& pj = m.at("params");
  T5BiasParams tp;
  tp.num_buckets = pj.at("num_buckets").get<int>();
  tp.max_distance = pj.at("max_distance").get<std::int64_t>();
  tp.bidirectional = pj.at("bidirectional").get<bool>();
  tp.n_heads = n_heads;
  return tp;
}

TensorMap t5_bias_run_engine(const CaseSpec& spec, const TensorMap& golden,
                             const EngineOptions& o) {
  const auto& mk = t5_bias_mistakes();
  if (!o.mistake.empty() && std::find(mk.begin(), mk.end(), o.mistake) == mk.end()) {
    throw_invalid("t5_bias_run_engine",
                  "unknown mistake (known: direction-flipped, sign-flipped, no-offset)", o.mistake);
  }
  if (pipelines::of(o.pipeline) != Pipeline::kExact && !o.mistake.empty()) {
    throw_invalid("t5_bias_run_engine", "mistakes run on the exact pipeline only", o.mistake);
  }
  const bool flip_direction =
      kMistakes.is(o.mistake, MistakeId::kDirectionFlipped) && !POSENC_MUTANT("engine_t5_direction_mistake_noop");
  const bool flip_sign = kMistakes.is(o.mistake, MistakeId::kSignFlipped);
  TensorMap res;
  if (golden.count("relative_position")) {  // a bucket table case
    T5BiasParams tp = t5_params_from_manifest(spec.manifest, 1);
    if (flip_direction) tp.bidirectional = !tp.bidirectional;
    const Tensor& tr = golden.at("relative_position");
    std::vector<std::int64_t> r(static_cast<std::size_t>(tr.numel()));
    for (std::size_t x = 0; x < r.size(); ++x) r[x] = tr.get_i64(static_cast<std::int64_t>(x));
    std::vector<std::int32_t> b(r.size());
    if (pipelines::of(o.pipeline) != Pipeline::kExact) {  // HF's float32 formula
      for (std::size_t x = 0; x < r.size(); ++x) {
        b[x] = pipelines::hf_t5_bucket_f32(r[x], tp.bidirectional, tp.num_buckets, tp.max_distance);
      }
    } else if (!r.empty()) {
      for (auto& x : r) x = flip_sign ? -x : x;
      const auto [lo, hi] = std::minmax_element(r.begin(), r.end());
      const auto table = optimized::t5_bias_bucket_range(tp, *lo, *hi);
      for (std::size_t x = 0; x < r.size(); ++x) b[x] = table.at(r[x]);
    }
    res.emplace("buckets", tensor_from_i32("buckets", {tr.numel()}, b));
    return res;
  }
  const AttentionParams p = attention_params_from_manifest(spec.manifest);
  T5BiasParams tp = t5_params_from_manifest(spec.manifest, p.n_heads);
  if (flip_direction) tp.bidirectional = !tp.bidirectional;
  const Json& pj = spec.manifest.at("params");
  const std::int64_t tq = pj.at("tq").get<std::int64_t>(), tk = pj.at("tk").get<std::int64_t>();
  const std::int64_t bias_offset = kMistakes.is(o.mistake, MistakeId::kNoOffset) ? 0 : p.query_offset;
  const std::vector<float> table = tensor_to_f32(golden.at("relative_attention_bias"));
  const DType t = golden.at("q").dtype;
  if (pipelines::of(o.pipeline) != Pipeline::kExact) {
    // HF: buckets by the float32 formula, bias = relative_attention_bias[bucket, h] (already in
    // the model dtype), added to the unscaled scores.
    std::vector<std::int32_t> buckets(static_cast<std::size_t>(tq * tk));
    for (std::int64_t i = 0; i < tq; ++i) {
      for (std::int64_t j = 0; j < tk; ++j) {
        const std::int64_t r = j - (p.query_offset + i);
        buckets[i * tk + j] = pipelines::hf_t5_bucket_f32(
            POSENC_MUTANT("engine_t5_pipeline_sign_flipped") ? -r : r, tp.bidirectional,
            tp.num_buckets, tp.max_distance);
      }
    }
    const int nh = p.n_heads;
    const PipelineBias bias = [&buckets, &table, tk, nh](int h, std::int64_t i, std::int64_t j) {
      return table[static_cast<std::size_t>(buckets[i * tk + j]) * nh + h];
    };
    res = attention_case_run_pipeline(spec, golden, o.pipeline, bias, p);
    std::vector<float> bias_values(static_cast<std::size_t>(nh * tq * tk));
    for (int h = 0; h < nh; ++h) {
      for (std::int64_t i = 0; i < tq; ++i) {
        for (std::int64_t j = 0; j < tk; ++j) bias_values[(h * tq + i) * tk + j] = bias(h, i, j);
      }
    }
    res.emplace("buckets", tensor_from_i32("buckets", {tq, tk}, buckets));
    res.emplace("bias", engine_tensor("bias", t, {nh, tq, tk}, bias_values));
    return res;
  }
  const optimized::T5Bias t5(tp, table, tq, tk, bias_offset);
  const SignFlippedBias flipped(tp, table, bias_offset);
  const optimized::AttentionBias* bias =
      flip_sign ? static_cast<const optimized::AttentionBias*>(&flipped) : &t5;
  res = attention_case_run_engine(spec, golden, bias, p);
  std::vector<std::int32_t> buckets(static_cast<std::size_t>(tq * tk));
  std::vector<float> bias_values(static_cast<std::size_t>(p.n_heads * tq * tk));
  for (std::int64_t i = 0; i < tq; ++i) {
    for (std::int64_t j = 0; j < tk; ++j) {
      buckets[i * tk + j] =
          flip_sign ? flipped.bucket(i, j) : t5.buckets().at(j - (bias_offset + i));
    }
  }
  for (int h = 0; h < p.n_heads && tk > 0; ++h) {
    for (std::int64_t i = 0; i < tq; ++i)
      bias->fill(h, i, 1, 0, static_cast<int>(tk), &bias_values[(h * tq + i) * tk]);
  }
  res.emplace("buckets", tensor_from_i32("buckets", {tq, tk}, buckets));
  res.emplace("bias", engine_tensor("bias", t, {p.n_heads, tq, tk}, bias_values));
  return res;
}

}  // namespace

SchemeEntry t5_bias_scheme() {
  SchemeEntry e{
      "t5_bias",           "T5 relative position bias: log buckets, per-head scalar table",
      &t5_bias_cases,      &t5_bias_generate,
      &t5_bias_run_engine, &t5_bias_mistakes};
  e.order = 80;  // its place in `posenc list` and the catalog
  return e;
}

}  // namespace posenc::golden
