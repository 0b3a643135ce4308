// Golden cases for learned absolute position embeddings. Formula: see reference/learned.hpp.
//
// Level 1 (committed): BERT-base (512 rows) and GPT-2 (1024 rows) presets
// (docs/schemes/learned.md) x target dtypes {f32, bf16}, plus a GPT-2 decode continuation (a cache
// of 1000 tokens: position_offset 1000, positions 0 .. 23, ending on the last row). The table keeps
// the preset's max_positions but d_model is reduced from 768 to 64 to keep the committed files
// small; the row index, the only thing the scheme computes, does not depend on the width.
// Inputs (seeded, exact in the target dtype): positions [T] (i64), table [max_positions, d],
// e [T, d]. Stages:
//   position_ids [T]       index, i64, exact       position_offset + positions[t]
//   rows [T, d]            table, target, exact    P[position_ids[t]] (a copy, bit for bit)
//   h [T, d]               embedded, target, conditioned, c = |e| + |P[row]|
// Expected values: mp50 oracle (the sum is exact there), rounded once to the target dtype;
// mp100 must round the same.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "golden/cases/mistakes.hpp"
#include "golden/cases/budgets.hpp"
#include "golden/cases/oracle_tensors.hpp"
#include "golden/cases/pipelines.hpp"
#include "golden/format/prng.hpp"
#include "golden/cases/registry.hpp"
#include "optimized/learned.hpp"
#include "reference/common/errors.hpp"
#include "reference/common/rounding.hpp"
#include "reference/common/scalar.hpp"
#include "reference/learned.hpp"
#include "reference/common/mutant.hpp"

namespace posenc::golden {

namespace {

/// The mistakes this file branches on (golden/cases/mistakes.hpp).
enum class MistakeId { kNone, kOther, kDoubleAdd, kIgnoreOffset, kOffset };
const MistakeTable<MistakeId, 3> kMistakes(
    {"learned"},
    {{
     {MistakeId::kDoubleAdd, "double-add"},
     {MistakeId::kIgnoreOffset, "ignore-offset"},
     {MistakeId::kOffset, "offset"}}});

}  // namespace

namespace {

using reference::LearnedParams;
using Json = nlohmann::json;

/// Width of the committed tables (the presets have 768).
constexpr int kGoldenDModel = 64;

struct LearnedPreset {
  std::string name;      // preset id
  std::string short_id;  // used in the case id
  std::string hf_model;
  std::string source;  // where the config values were read
  std::int64_t max_positions = 0;
  int preset_d_model = 0;
  Json config;  // the HF config keys that determine the table, verbatim
};

struct Position {
  std::int64_t m;
  std::string why;
};

struct LearnedCaseDef {
  LearnedPreset preset;
  DType dtype;
  std::int64_t position_offset = 0;
  std::vector<Position> positions;
  std::string id;
  std::string what;  // one phrase for the description and `posenc list`
  std::uint64_t seed = 0;
};

LearnedPreset bert_base() {
  return {"bert-base-uncased",
          "bert_base",
          "google-bert/bert-base-uncased",
          "bert-base-uncased config",
          512,
          768,
          Json{{"max_position_embeddings", 512},
               {"hidden_size", 768},
               {"num_attention_heads", 12},
               {"position_embedding_type", "absolute"},
               {"type_vocab_size", 2}}};
}

LearnedPreset gpt2() {
  return {"gpt2",
          "gpt2",
          "openai-community/gpt2",
          "openai-community/gpt2 config.json",
          1024,
          768,
          Json{{"n_positions", 1024},
               {"n_ctx", 1024},
               {"n_embd", 768},
               {"n_head", 12},
               {"n_layer", 12}}};
}

std::vector<Position> common_head() {
  return {{0, "first row; a 1-based or padding-origin engine reads row 1 or 2 here"},
          {1, "second row"},
          {2, "row where a fairseq-style origin (padding_idx + 1, offset 2) would start"},
          {255, "last integer exact in bf16 below 256"},
          {256, "2^8: bf16 integer spacing becomes 2"},
          {257, "not representable in bf16 (a position kept in bf16 reads row 256 or 258)"}};
}

std::vector<Position> bert_positions() {
  auto v = common_head();
  v.push_back({127, "end of BERT's 128-token pre-training phase"});
  v.push_back({128, "first row trained only in the 512-token phase"});
  v.push_back({383, "interior row"});
  v.push_back({510, "next to last row"});
  v.push_back({511, "last valid row (max_positions - 1)"});
  std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.m < b.m; });
  return v;
}

std::vector<Position> gpt2_positions() {
  auto v = common_head();
  v.push_back({511, "last row of GPT's 512-token context"});
  v.push_back({512, "first row beyond GPT's context (GPT-2 doubled it)"});
  v.push_back({513, "interior row"});
  v.push_back({1000, "interior row"});
  v.push_back({1022, "next to last row"});
  v.push_back({1023, "last valid row (max_positions - 1)"});
  std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.m < b.m; });
  return v;
}

/// A 24-token decode window after a 1000-token cache: local positions 0 .. 23, rows 1000 ..
/// 1023. An engine that ignores the cache offset reads rows 0 .. 23 (mlx-lm #93, GPT-2;
/// transformers #15751, XGLM / M2M100).
constexpr std::int64_t kDecodeOffset = 1000;
std::vector<Position> decode_positions() {
  std::vector<Position> v;
  for (std::int64_t m = 0; m < 24; ++m) {
    std::string why = "decode token " + std::to_string(m) + " after a 1000-token cache";
    if (m == 0) why += "; a cache-unaware engine reads row 0";
    if (m == 23) why += "; row 1023 is the last valid row";
    v.push_back({m, why});
  }
  return v;
}

const std::vector<DType>& learned_dtypes() {
  static const std::vector<DType> d = {DType::kF32, DType::kBF16};
  return d;
}

std::vector<LearnedCaseDef> learned_case_table() {
  std::vector<LearnedCaseDef> v;
  std::uint64_t seed = 0x1ea2ed00;
  auto add = [&](const LearnedPreset& p, std::int64_t offset, std::vector<Position> pos,
                 const std::string& tag, const std::string& what) {
    for (DType t : learned_dtypes()) {
      LearnedCaseDef c;
      c.preset = p;
      c.dtype = t;
      c.position_offset = offset;
      c.positions = pos;
      c.id = "learned_p" + std::to_string(p.max_positions) + "_d" + std::to_string(kGoldenDModel) +
             (offset != 0 ? "_o" + std::to_string(offset) : std::string()) + "_" + p.short_id +
             tag + "_" + std::string(dtype_short(t));
      c.what = what;
      c.seed = seed++;
      v.push_back(std::move(c));
    }
  };
  add(bert_base(), 0, bert_positions(), "", "one token per hard position");
  add(gpt2(), 0, gpt2_positions(), "", "one token per hard position");
  add(gpt2(), kDecodeOffset, decode_positions(), "_decode",
      "decode window: 24 tokens after a 1000-token cache");
  return v;
}

/// Seeded inputs, exact in the target dtype. P sits on a finer grid than e, so most sums need
/// more bits than the dtype has and the add must round (ties included): f32 e = i * 2^-24,
/// P = i * 2^-30 with |i| < 2^24; bf16 e = i * 2^-8, P = i * 2^-12 with |i| <= 255.
double table_value(DType t, std::uint64_t seed, std::uint64_t i) {
  if (t == DType::kBF16) return std::ldexp(static_cast<double>(prng_int(seed, 1, i, 255)), -12);
  return std::ldexp(static_cast<double>(prng_int(seed, 1, i, (1 << 24) - 1)), -30);
}
double embedding_value(DType t, std::uint64_t seed, std::uint64_t i) {
  if (t == DType::kBF16) return std::ldexp(static_cast<double>(prng_int(seed, 2, i, 255)), -8);
  return std::ldexp(static_cast<double>(prng_int(seed, 2, i, (1 << 24) - 1)), -24);
}

template <class Real>
struct LearnedOracle {
  std::vector<Real> rows, h;
};

template <class Real>
LearnedOracle<Real> learned_oracle(const LearnedParams& p, const std::vector<double>& table,
                                   const std::vector<std::int64_t>& pos,
                                   const std::vector<double>& e) {
  const std::vector<Real> rt(table.begin(), table.end());
  const std::vector<Real> re(e.begin(), e.end());
  return {reference::learned_lookup<Real>(p, rt, pos),
          reference::learned_apply<Real>(p, rt, pos, re)};
}

AxisSpec axis(const std::string& name, const std::string& positions) {
  AxisSpec a;
  a.name = name;
  a.positions = positions;
  return a;
}

// ---- budgets (docs/profiles.md) ---------------------------------------------------------
// A gather is exact in every pipeline (position_ids, rows: exact checks under every profile).
// h = e + P: one add of two values of the target dtype t, correctly rounded when done in t
// (bf16, f16 eager: ulps 0.5), and in float32 then cast (strict, fp32, fp32-recurrence: the
// float32 sum is exact unless the exponents differ by more than 24 - p_t bits, then rounded
// once more; ulps 0.5 + 0.5 r for a 16-bit target, 0.5 for f32). No profile adds more: the
// learned table has no angle, so every pipeline must land within a rounding of the exact sum.
ProfileBudget sum_budget(const std::string& profile, DType t) {
  if (POSENC_MUTANT("gold_learned_budgets_inflated")) return bound_of(0.0, 4.0);
  if (profile == "bf16" || profile == "f16") {
    const std::string na = activation_na(profile, t);
    return na.empty() ? bound_of(0.0, 0.5) : not_applicable(na);
  }
  return bound_of(0.0, t == DType::kF32 ? 0.5 : 0.5 + 0.5 * budgets::f32_in(t));
}

GoldenCase learned_generate_def(const LearnedCaseDef& def) {
  const DType t = def.dtype;
  LearnedParams p{def.preset.max_positions, kGoldenDModel, def.position_offset};
  reference::learned_check(p, "learned_generate");
  const int d = p.d_model;
  const std::int64_t m_rows = p.max_positions;
  std::vector<std::int64_t> pos;
  for (const auto& hp : def.positions) pos.push_back(hp.m);
  const std::int64_t tn = static_cast<std::int64_t>(pos.size());

  std::vector<double> table(static_cast<std::size_t>(m_rows * d));
  std::vector<double> e(static_cast<std::size_t>(tn * d));
  for (std::size_t i = 0; i < table.size(); ++i) table[i] = table_value(t, def.seed, i);
  for (std::size_t i = 0; i < e.size(); ++i) e[i] = embedding_value(t, def.seed, i);

  const auto o50 = learned_oracle<mp50>(p, table, pos, e);
  const auto o100 = learned_oracle<mp100>(p, table, pos, e);
  cross_check(def.id, "rows", t, o50.rows, o100.rows);
  cross_check(def.id, "h", t, o50.h, o100.h);

  std::vector<std::int64_t> ids(pos.size());
  for (std::size_t i = 0; i < pos.size(); ++i) {
    ids[i] = reference::learned_row(p, pos[i], i, "learned_generate");
  }
  const auto rows64 = to_f64(o50.rows);
  std::vector<double> h_cond(e.size());
  for (std::size_t j = 0; j < e.size(); ++j) h_cond[j] = std::fabs(e[j]) + std::fabs(rows64[j]);

  const std::vector<AxisSpec> row_axes = {axis("token", "position_ids"), axis("channel", "")};
  std::vector<Tensor> tensors;
  tensors.push_back(tensor_from_i64("positions", {tn}, pos));
  tensors.push_back(input_tensor("table", t, {m_rows, d}, table));
  tensors.push_back(input_tensor("e", t, {tn, d}, e));
  std::vector<TensorSpec> inputs;
  for (const auto& x : tensors) inputs.push_back(input_spec(x));

  const Tensor ids_tensor = tensor_from_i64("position_ids", {tn}, ids);
  const Tensor rows_tensor = target_tensor("rows", t, {tn, d}, o50.rows);
  ExpectedTensor e_ids, e_rows, e_h;
  e_ids.spec = {"position_ids", "index", DType::kI64, {tn}, "", {CheckKind::kExact, exact_budgets(t)},
                {axis("token", "position_ids")}};
  e_ids.exact_tensor = &ids_tensor;
  e_rows.spec = {"rows", "table", t, {tn, d}, "", {CheckKind::kExact, exact_budgets(t)}, row_axes};
  e_rows.exact_tensor = &rows_tensor;
  e_h.spec = {"h", "embedded", t, {tn, d}, "", {CheckKind::kConditioned, {}}, row_axes};
  for (const auto& prof : profiles()) e_h.spec.check.profiles[prof.name] = sum_budget(prof.name, t);
  e_h.values = o50.h;
  e_h.cond = h_cond;
  const std::vector<TensorSpec> expected = {add_expected(&tensors, std::move(e_ids)),
                                            add_expected(&tensors, std::move(e_rows)),
                                            add_expected(&tensors, std::move(e_h))};

  Json m = manifest_header(def.id, "learned", "absolute", "valid", 1);
  m["description"] = "Learned absolute positions, " + def.preset.name + " (max_positions " +
                     std::to_string(m_rows) + "; d_model reduced from " +
                     std::to_string(def.preset.preset_d_model) + " to " + std::to_string(d) +
                     " to keep the file small), position_offset " +
                     std::to_string(def.position_offset) + ", target " +
                     std::string(dtype_short(t)) + ", " + def.what;
  m["citation"] =
      "A. Radford et al., Improving Language Understanding by Generative Pre-Training (2018), "
      "Sec. 3.1; A. Radford et al., Language Models are Unsupervised Multitask Learners (2019), "
      "Sec. 2.3; J. Devlin et al., BERT, arXiv:1810.04805v2, Sec. 3 and Fig. 2";
  m["preset"] = {{"name", def.preset.name},
                 {"hf_model", def.preset.hf_model},
                 {"source", def.preset.source},
                 {"config", def.preset.config}};
  m["conventions"] = {
      {"lookup",
       "position_ids[t] = position_offset + positions[t]; rows[t] = "
       "table[position_ids[t]]; h[t] = e[t] + rows[t]"},
      {"position_origin",
       "0-based: positions[t] = 0 reads table row position_offset; "
       "a fairseq / RoBERTa / OPT / BART origin is position_offset = 2"},
      {"position_offset", def.position_offset == 0
                              ? "0: a full forward from the first token"
                              : "the KV-cache length: the tokens continue a decode after " +
                                    std::to_string(def.position_offset) + " cached tokens"},
      {"bounds", "0 <= position_ids[t] < max_positions; outside is an error, never a clamp"},
      {"add", "one add in the target dtype, correctly rounded from the exact sum"},
      {"width", "d_model " + std::to_string(d) + " instead of the preset's " +
                    std::to_string(def.preset.preset_d_model) +
                    ": the row index does not depend on it"},
      {"layout",
       "table is [max_positions, d_model]; e, rows, h are [tokens, d_model]; "
       "position_ids is [tokens]"}};
  m["params"] = {{"max_positions", m_rows},
                 {"d_model", d},
                 {"preset_d_model", def.preset.preset_d_model},
                 {"position_offset", def.position_offset},
                 {"n_tokens", tn},
                 {"dtype", std::string(dtype_short(t))}};
  m["oracle"] = mp_oracle_json();
  m["seed"] = def.seed;
  m["prng"] =
      "splitmix64 counter: value(seed, stream, i); stream 1 = table, 2 = e; f32: table = "
      "integer * 2^-30, e = integer * 2^-24, |integer| < 2^24; bf16: table = integer * "
      "2^-12, e = integer * 2^-8, |integer| <= 255";
  Json why = Json::array();
  for (std::size_t i = 0; i < def.positions.size(); ++i) {
    why.push_back(
        {{"position", def.positions[i].m}, {"row", ids[i]}, {"why", def.positions[i].why}});
  }
  m["positions"] = why;
  Json flags = {"PositionOffset", "LearnedAbsoluteOrigin", "TableBounds"};
  if (def.position_offset != 0) flags.push_back("KvCacheOffset");
  m["flags"] = flags;
  m["detection"] = Json::array(
      {{{"flag", "PositionOffset"}, {"stages", {"position_ids", "rows", "h"}}, {"blind", ""}}});
  manifest_add_tensors(m, def.id, inputs, expected);
  return GoldenCase{m, std::move(tensors)};
}

std::vector<CaseRow> learned_cases() {
  std::vector<CaseRow> rows;
  for (const auto& c : learned_case_table()) {
    rows.push_back({c.id, c.preset.name + ", offset " + std::to_string(c.position_offset) + ", " +
                              std::string(dtype_short(c.dtype))});
  }
  return rows;
}

GoldenCase learned_generate(const std::string& id) {
  for (const auto& c : learned_case_table()) {
    if (c.id == id) return learned_generate_def(c);
  }
  throw_invalid("learned_generate", "no learned case has this id", id);
}

// ---- the built-in engine: posenc's optimized kernel, fed and read through files ----------

std::vector<std::string> learned_mistakes() { return {"offset", "ignore-offset", "double-add"}; }

/// Mistakes: "offset" reads one row too far (an off-by-one origin; clamped at the table end,
/// where a real engine would fault); "ignore-offset" drops the cache offset (mlx-lm #93): a
/// no-op when the offset is 0, which is why the decode cases exist; "double-add" adds the
/// position row twice (the lookup is right, the sum is not: only h fails, by a finite amount).
TensorMap learned_run_engine(const CaseSpec& spec, const TensorMap& golden,
                             const EngineOptions& o) {
  const Json& pj = spec.manifest.at("params");
  LearnedParams p;
  p.max_positions = pj.at("max_positions").get<std::int64_t>();
  p.d_model = pj.at("d_model").get<int>();
  p.position_offset = pj.at("position_offset").get<std::int64_t>();
  const auto& mk = learned_mistakes();
  if (!o.mistake.empty() && std::find(mk.begin(), mk.end(), o.mistake) == mk.end()) {
    throw_invalid("learned_run_engine",
                  "unknown mistake (known: offset, ignore-offset, double-add)", o.mistake);
  }
  const DType t = golden.at("e").dtype;
  if (const auto why = pipelines::dtype_mismatch(o.pipeline, t); !why.empty()) {
    throw_invalid("learned_run_engine", why, o.pipeline);
  }
  if (pipelines::of(o.pipeline) != Pipeline::kExact && !o.mistake.empty()) {
    throw_invalid("learned_run_engine", "mistakes run on the exact pipeline only", o.mistake);
  }
  const Tensor& tpos = golden.at("positions");
  std::vector<std::int64_t> pos(static_cast<std::size_t>(tpos.numel()));
  for (std::size_t i = 0; i < pos.size(); ++i) pos[i] = tpos.get_i64(static_cast<std::int64_t>(i));
  if (kMistakes.is(o.mistake, MistakeId::kOffset) && !POSENC_MUTANT("engine_mistake_offset_noop")) {
    for (auto& m : pos) m = std::min(m + 1, p.max_positions - 1 - p.position_offset);
  }
  if (kMistakes.is(o.mistake, MistakeId::kIgnoreOffset)) p.position_offset = 0;
  const std::int64_t tn = static_cast<std::int64_t>(pos.size());
  const int d = p.d_model;
  const std::vector<float> table = tensor_to_f32(golden.at("table"));
  const std::vector<float> e = tensor_to_f32(golden.at("e"));
  std::vector<float> rows(e.size()), h(e.size());
  optimized::learned_lookup(p, table, pos, rows);
  if (pipelines::of(o.pipeline) == Pipeline::kExact) {
    optimized::learned_apply(p, table, pos, e, h);
  } else {  // one add in the pipeline's compute dtype (float32 for fp32 / fp32-recurrence)
    DType c = pipelines::compute_dtype(o.pipeline);
    if (POSENC_MUTANT("engine_learned_pipeline_adds_in_bf16")) c = DType::kBF16;
    for (std::size_t j = 0; j < h.size(); ++j) h[j] = pipelines::fl(e[j] + rows[j], c);
  }
  if (kMistakes.is(o.mistake, MistakeId::kDoubleAdd)) {
    for (std::size_t j = 0; j < h.size(); ++j) h[j] += rows[j];
  }
  std::vector<std::int64_t> ids(pos.size());
  for (std::size_t i = 0; i < pos.size(); ++i) ids[i] = p.position_offset + pos[i];

  TensorMap out;
  out.emplace("position_ids", tensor_from_i64("position_ids", {tn}, ids));
  out.emplace("rows", engine_tensor("rows", t, {tn, d}, rows));
  out.emplace("h", engine_tensor("h", t, {tn, d}, h));
  return out;
}

}  // namespace

SchemeEntry learned_scheme() {
  SchemeEntry e{
      "learned",           "learned absolute position embeddings (table lookup + add)",
      &learned_cases,      &learned_generate,
      &learned_run_engine, &learned_mistakes};
  e.order = 50;  // its place in `posenc list` and the catalog
  return e;
}

}  // namespace posenc::golden
