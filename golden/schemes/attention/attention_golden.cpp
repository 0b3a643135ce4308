// Golden cases for the shared attention core. Formula: see reference/attention.hpp.
// A few shapes: full, causal decode (Tq != Tk, query offset), sliding window with key padding,
// unscaled (T5 convention) with grouped-query heads; targets f32 and bf16.
#include <algorithm>
#include <string>
#include <vector>

#include "golden/cases/mistakes.hpp"
#include "golden/cases/attention_case.hpp"
#include "golden/cases/pipelines.hpp"
#include "golden/cases/registry.hpp"
#include "reference/common/errors.hpp"
#include "reference/common/mutant.hpp"

namespace posenc::golden {

namespace {

/// The mistakes this file branches on (golden/cases/mistakes.hpp).
enum class MistakeId { kNone, kOther, kCausalOffByOne, kNoMask, kNoScale };
const MistakeTable<MistakeId, 3> kMistakes(
    {"attention"},
    {{
     {MistakeId::kCausalOffByOne, "causal-off-by-one"},
     {MistakeId::kNoMask, "no-mask"},
     {MistakeId::kNoScale, "no-scale"}}});

}  // namespace

namespace {

using reference::AttentionParams;
using reference::AttentionScale;

std::vector<AttentionCaseDef> attention_case_table() {
  struct Shape {
    std::string name, description;
    AttentionParams p;
    std::int64_t tq, tk;
    std::vector<std::uint8_t> key_padding;
  };
  std::vector<std::uint8_t> pad(70, 0);
  for (int j : {0, 1, 2, 33, 69}) pad[j] = 1;  // left padding, one hole, the last key
  const std::vector<Shape> shapes = {
      {"full_h4_d64_t40", "no mask, 1/sqrt(d), 40 x 40",
       {4, 4, 64, 64, AttentionScale::kInvSqrtHeadDim, 1.0, false, 0, 0}, 40, 40, {}},
      {"causal_decode_h4_kv2_d64_q5_k70", "causal, 5 queries at positions 65..69 over 70 keys",
       {4, 2, 64, 64, AttentionScale::kInvSqrtHeadDim, 1.0, true, 0, 65}, 5, 70, {}},
      {"window16_pad_h2_d32_t70", "causal, sliding window 16, key padding",
       {2, 2, 32, 32, AttentionScale::kInvSqrtHeadDim, 1.0, true, 16, 0}, 70, 70, pad},
      {"noscale_h4_kv1_d64_dv32_q24_k48", "no score scaling (T5), grouped-query 4:1, dv 32",
       {4, 1, 64, 32, AttentionScale::kNone, 1.0, false, 0, 0}, 24, 48, {}},
  };
  std::vector<AttentionCaseDef> v;
  std::uint64_t seed = 0xa77e0000;
  for (const auto& s : shapes) {
    for (DType t : {DType::kF32, DType::kBF16}) {
      AttentionCaseDef c;
      c.id = "attention_" + s.name + "_" + std::string(dtype_short(t));
      c.scheme = "attention";
      c.variant = s.name.substr(0, s.name.find('_'));
      c.description = "attention core: " + s.description + ", target " + std::string(dtype_short(t));
      c.params = s.p;
      c.tq = s.tq;
      c.tk = s.tk;
      c.key_padding = s.key_padding;
      c.dtype = t;
      c.seed = seed++;
      c.value_range = s.p.scale_kind == AttentionScale::kNone ? 0.25 : 2.0;
      c.extra = {{"citation", "A. Vaswani et al., arXiv:1706.03762v7, Sec. 3.2.1"},
                 {"flags", {"MaskSemantics", "SoftmaxStability", "KvCacheOffset"}}};
      v.push_back(std::move(c));
    }
  }
  return v;
}

std::vector<CaseRow> attention_cases() {
  std::vector<CaseRow> rows;
  for (const auto& c : attention_case_table()) rows.push_back({c.id, c.description});
  return rows;
}

GoldenCase attention_generate(const std::string& id) {
  for (const auto& c : attention_case_table()) {
    if (c.id == id) return attention_case_generate(c);
  }
  throw_invalid("attention_generate", "no attention case has this id", id);
}

std::vector<std::string> attention_mistakes() { return {"no-scale", "causal-off-by-one", "no-mask"}; }

TensorMap attention_run_engine(const CaseSpec& spec, const TensorMap& golden, const EngineOptions& o) {
  AttentionParams p = attention_params_from_manifest(spec.manifest);
  const auto mk = attention_mistakes();
  if (!o.mistake.empty() && std::find(mk.begin(), mk.end(), o.mistake) == mk.end()) {
    throw_invalid("attention_run_engine", "unknown mistake (known: no-scale, causal-off-by-one, no-mask)",
                  o.mistake);
  }
  if (pipelines::of(o.pipeline) != Pipeline::kExact) {
    if (!o.mistake.empty()) throw_invalid("attention_run_engine", "mistakes run on the exact pipeline only", o.mistake);
    return attention_case_run_pipeline(spec, golden, o.pipeline, nullptr, p);
  }
  if (POSENC_MUTANT("engine_attention_mistake_ignored")) return attention_case_run_engine(spec, golden, nullptr, p);
  if (kMistakes.is(o.mistake, MistakeId::kNoScale)) {
    p.scale_kind = p.scale_kind == AttentionScale::kNone ? AttentionScale::kInvSqrtHeadDim
                                                         : AttentionScale::kNone;
  }
  if (kMistakes.is(o.mistake, MistakeId::kCausalOffByOne)) {  // the query sees its successor: offset one too far
    p.query_offset += 1;
    if (!p.causal) p.causal = true;
  }
  TensorMap golden_used = golden;
  if (kMistakes.is(o.mistake, MistakeId::kNoMask)) {
    p.causal = !p.causal;
    p.window = 0;
    golden_used.erase("key_padding");
  }
  return attention_case_run_engine(spec, golden_used, nullptr, p);
}

}  // namespace

SchemeEntry attention_scheme() {
  SchemeEntry e{"attention", "scaled dot-product attention core (masks, scale, bias hook)",
                &attention_cases, &attention_generate, &attention_run_engine,
                &attention_mistakes};
  e.order = 30;  // its place in `posenc list` and the catalog
  return e;
}

}  // namespace posenc::golden
