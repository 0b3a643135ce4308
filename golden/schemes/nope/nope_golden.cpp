// Golden cases for NoPE layers: causal attention outputs with no positional term.
// Formula: see reference/nope.hpp.
#include <algorithm>
#include <string>
#include <vector>

#include "golden/cases/mistakes.hpp"
#include "golden/cases/attention_case.hpp"
#include "golden/cases/pipelines.hpp"
#include "golden/cases/oracle_tensors.hpp"
#include "golden/cases/registry.hpp"
#include "optimized/nope.hpp"
#include "reference/common/errors.hpp"
#include "reference/nope.hpp"
#include "reference/common/mutant.hpp"

namespace posenc::golden {

namespace {

/// The mistakes this file branches on (golden/cases/mistakes.hpp).
enum class MistakeId { kNone, kOther, kCausalOffByOne, kNoMask, kNoScale };
const MistakeTable<MistakeId, 3> kMistakes(
    {"nope"},
    {{
     {MistakeId::kCausalOffByOne, "causal-off-by-one"},
     {MistakeId::kNoMask, "no-mask"},
     {MistakeId::kNoScale, "no-scale"}}});

}  // namespace

namespace {

using reference::AttentionParams;
using reference::AttentionScale;

std::vector<AttentionCaseDef> nope_case_table() {
  struct Shape {
    std::string name, description;
    AttentionParams p;
    std::int64_t tq, tk;
  };
  const std::vector<Shape> shapes = {
      {"causal_h4_kv2_d64_t48", "prefill of 48 tokens, 4 query heads over 2 kv heads",
       {4, 2, 64, 64, AttentionScale::kInvSqrtHeadDim, 1.0, true, 0, 0}, 48, 48},
      {"decode_h4_kv2_d64_q4_k64", "4 decode queries at positions 60..63 over a 64-token cache",
       {4, 2, 64, 64, AttentionScale::kInvSqrtHeadDim, 1.0, true, 0, 60}, 4, 64},
  };
  std::vector<AttentionCaseDef> v;
  std::uint64_t seed = POSENC_MUTANT("data_nope_seed_changed") ? 0x90be0001 : 0x90be0000;
  for (const auto& s : shapes) {
    for (DType t : {DType::kF32, DType::kBF16}) {
      AttentionCaseDef c;
      c.id = "nope_" + s.name + "_" + std::string(dtype_short(t));
      c.scheme = "nope";
      c.variant = "causal";
      c.description = "NoPE layer: " + s.description + ", target " + std::string(dtype_short(t));
      c.params = reference::nope_params(s.p);
      c.tq = s.tq;
      c.tk = s.tk;
      c.dtype = t;
      c.seed = seed++;
      c.value_range = 2.0;
      c.extra = {{"citation", "A. Kazemnejad et al., arXiv:2305.19466v2, Sec. 2"},
                 {"flags", {"NopeLayer", "MaskSemantics", "KvCacheOffset"}}};
      v.push_back(std::move(c));
    }
  }
  return v;
}

std::vector<CaseRow> nope_cases() {
  std::vector<CaseRow> rows;
  for (const auto& c : nope_case_table()) rows.push_back({c.id, c.description});
  return rows;
}

GoldenCase nope_generate(const std::string& id) {
  for (const auto& c : nope_case_table()) {
    if (c.id == id) return attention_case_generate(c);
  }
  throw_invalid("nope_generate", "no nope case has this id", id);
}

std::vector<std::string> nope_mistakes() { return {"no-mask", "causal-off-by-one", "no-scale"}; }

TensorMap nope_run_engine(const CaseSpec& spec, const TensorMap& golden, const EngineOptions& o) {
  AttentionParams p = attention_params_from_manifest(spec.manifest);
  const auto mk = nope_mistakes();
  if (!o.mistake.empty() && std::find(mk.begin(), mk.end(), o.mistake) == mk.end()) {
    throw_invalid("nope_run_engine", "unknown mistake (known: no-mask, causal-off-by-one, no-scale)", o.mistake);
  }
  if (pipelines::of(o.pipeline) != Pipeline::kExact) {
    if (!o.mistake.empty()) throw_invalid("nope_run_engine", "mistakes run on the exact pipeline only", o.mistake);
    if (POSENC_MUTANT("engine_nope_pipeline_mask_dropped")) p.causal = false;
    return attention_case_run_pipeline(spec, golden, o.pipeline, nullptr, p);
  }
  if (o.mistake.empty() || POSENC_MUTANT("engine_nope_mistake_ignored")) {
    // posenc's NoPE kernel for the output (the probabilities: the attention kernel's, causal)
    TensorMap res = attention_case_run_engine(spec, golden, nullptr, p);
    const nlohmann::json& pj = spec.manifest.at("params");
    const std::int64_t tq = pj.at("tq").get<std::int64_t>(), tk = pj.at("tk").get<std::int64_t>();
    std::vector<float> out(static_cast<std::size_t>(tq * p.n_heads * p.value_dim));
    optimized::nope_forward(p, tq, tk, tensor_to_f32(golden.at("q")), tensor_to_f32(golden.at("k")),
                            tensor_to_f32(golden.at("v")), out);
    res.insert_or_assign("out", engine_tensor("out", golden.at("q").dtype, {tq, p.n_heads, p.value_dim}, out));
    return res;
  }
  if (kMistakes.is(o.mistake, MistakeId::kNoMask)) p.causal = false;
  if (kMistakes.is(o.mistake, MistakeId::kCausalOffByOne)) p.query_offset += 1;
  if (kMistakes.is(o.mistake, MistakeId::kNoScale)) p.scale_kind = AttentionScale::kNone;  // scores not divided by sqrt(d)
  return attention_case_run_engine(spec, golden, nullptr, p);
}

}  // namespace

SchemeEntry nope_scheme() {
  SchemeEntry e{"nope", "no positional encoding: causal attention only", &nope_cases,
                &nope_generate, &nope_run_engine, &nope_mistakes};
  e.order = 40;  // its place in `posenc list` and the catalog
  return e;
}

}  // namespace posenc::golden
