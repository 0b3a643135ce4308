// Golden cases for RoPE. Formula: see reference/rope.hpp; the case itself (stages, budgets,
// engine): golden/cases/rope_case.hpp.
//
// Level 1 (committed): real-model presets (golden/presets/<name>.json, read by the HF config
// reader) x target dtypes {f32, bf16, f16}, one token per hard position
// (golden/cases/hard_positions.hpp), stages:
//   inv_freq [d/2]            table, f32, ulp check
//   cos, sin [T, d/2]         table, target dtype, conditioned (c = a), attention factor folded in
//   q_rot [T, Hq, h], k_rot [T, Hk, h]   rotated, conditioned (c = a (|x_a| + |x_b|); tail c = 0:
//                             tail channels must be bit-identical copies)
//   scores [Hq, T, T]         unscaled q_rot . k_rot, kv head = q head / (Hq / Hk), conditioned
// plus one dense case per preset family (f32, every position 0..511 and the hard positions
// above, one q head, no k, no scores) that locates a pipeline's first failing position.
// Every case also records, per profile and hard position, the smallest position offset, base
// error and inv_freq error that its budgets still detect ("resolution").
#include <cmath>
#include <string>
#include <vector>

#include "golden/cases/hard_positions.hpp"
#include "golden/cases/hf_config.hpp"
#include "golden/cases/registry.hpp"
#include "golden/cases/rope_case.hpp"
#include "reference/common/errors.hpp"
#include "reference/rope.hpp"

namespace posenc::golden {
namespace {

using reference::RopeLayout;

struct LegacyPreset {
  const char* file;      // golden/presets/<file>.json
  const char* short_id;  // used in the case id
  bool dense;            // this preset stands for its family in a dense-positions case
};

// The order fixes the seeds: later additions get later seeds, so earlier cases keep their inputs.
constexpr LegacyPreset kPresets[] = {
    {"llama-2-7b", "llama2_7b", true},
    {"llama-2-7b-meta", "llama2_7b_meta", false},  // the same angles as llama-2-7b
    {"llama-3-8b", "llama3_8b", true},
    {"gpt-j-6b", "gptj_6b", true},
    {"gpt-neox-20b", "neox_20b", true},
    {"qwen2-7b", "qwen2_7b", true},
    {"codellama-7b-hf", "codellama_7b", false},  // the same angles as qwen2-7b
};

std::string case_id(const RopeModelConfig& m, const char* short_id, DType t, bool dense) {
  const auto& p = m.params;
  std::string id = "rope_";
  id += p.layout == RopeLayout::kInterleaved ? "inter" : "half";
  id += "_d" + std::to_string(p.head_dim);
  if (p.rotary_dim != p.head_dim) id += "_r" + std::to_string(p.rotary_dim);
  id += "_b" + rope_base_tag(p.base) + "_" + short_id;
  if (dense) id += "_dense" + std::to_string(kRopeDenseLast + 1);
  return id + "_" + std::string(dtype_short(t));
}

/// Positions 0..kRopeDenseLast followed by the hard positions above it.
std::vector<HardPosition> dense_positions() {
  std::vector<HardPosition> v;
  for (std::int64_t m = 0; m <= kRopeDenseLast; ++m) {
    v.push_back({m, m < 2 ? hard_positions()[m].why : "dense low positions: every position 0..511"});
  }
  for (const auto& hp : hard_positions()) {
    if (hp.m > kRopeDenseLast) v.push_back(hp);
  }
  return v;
}

const std::vector<RopeCaseDef>& rope_case_table() {
  static const std::vector<RopeCaseDef> table = [] {
    std::vector<RopeModelConfig> models;
    for (const auto& lp : kPresets) {
      models.push_back(rope_config_read(default_presets_dir() / (std::string(lp.file) + ".json")));
    }
    std::vector<RopeCaseDef> v;
    std::uint64_t seed = 0x9e3779b9;
    auto add = [&](std::size_t i, DType t, bool dense) {
      RopeCaseDef d = rope_case_for(models[i], kPresets[i].short_id, t,
                                    dense ? dense_positions() : hard_positions(), "");
      d.id = case_id(models[i], kPresets[i].short_id, t, dense);
      d.seed = seed++;
      d.dense = dense;
      if (dense) {
        d.n_q_heads = 1;
        d.n_kv_heads = 0;  // q only: k would rotate the same angles again
      }
      v.push_back(d);
    };
    for (std::size_t i = 0; i < models.size(); ++i) {
      for (DType t : {DType::kF32, DType::kBF16}) add(i, t, false);
    }
    for (std::size_t i = 0; i < models.size(); ++i) add(i, DType::kF16, false);
    for (std::size_t i = 0; i < models.size(); ++i) {
      if (kPresets[i].dense) add(i, DType::kF32, true);
    }
    return v;
  }();
  return table;
}

std::vector<CaseRow> rope_cases() {
  std::vector<CaseRow> rows;
  for (const auto& c : rope_case_table()) {
    rows.push_back({c.id, c.model.id + ", " + reference::rope_layout_name(c.model.params.layout) +
                              ", " + std::string(dtype_short(c.dtype)) +
                              (c.dense ? ", dense positions 0..511" : "")});
  }
  return rows;
}

GoldenCase rope_generate(const std::string& id) {
  for (const auto& c : rope_case_table()) {
    if (c.id == id) return rope_case_generate(c);
  }
  throw_invalid("rope_generate", "no RoPE case has this id", id);
}

std::vector<std::string> rope_mistakes() {
  return {"pairing", "offset", "double-rotation", "sin-sign"};
}

}  // namespace

SchemeEntry rope_scheme() {
  SchemeEntry e{"rope", "rotary position embedding (interleaved, half-split, partial)",
                &rope_cases, &rope_generate, &rope_case_run_engine, &rope_mistakes};
  e.order = 10;  // its place in `posenc list` and the catalog
  return e;
}

}  // namespace posenc::golden
