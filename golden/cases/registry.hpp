// The table of schemes: the only way tools reach scheme-specific code.
// Each scheme's home golden/schemes/<slug>/ defines one `SchemeEntry <slug>_scheme()`; CMake
// finds the homes when it configures and lists them for schemes() (the generated
// posenc_scheme_list.inc), so adding a scheme edits no table (docs/adding-a-scheme.md).
#pragma once
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "golden/format/format.hpp"
#include "golden/format/manifest.hpp"
#include "golden/verify/verify.hpp"

namespace posenc::golden {

/// One row of a scheme's case table, as `posenc list` shows it.
struct CaseRow {
  std::string id;
  std::string description;
};

/// A generated case: the manifest (tensor SHA-256 filled in) and every tensor of its file, in
/// memory or, when too large to hold (a long call's rope scores), spilled to a file of its own.
struct GoldenCase {
  nlohmann::json manifest;
  std::vector<Tensor> tensors;
  std::vector<SpilledTensor> spilled;
};

/// Reads the spilled tensors of a case into `tensors` (for code that needs every tensor in
/// memory).
inline void load_spilled(GoldenCase& g) {
  for (const auto& s : g.spilled) g.tensors.push_back(spilled_tensor_read(s));
  g.spilled.clear();
}

/// Options of the built-in engine (posenc's own optimized kernels run as an external engine
/// would). `mistake` names a deliberate bug, for demonstrating and testing verify; `pipeline`
/// the engine pipeline to emulate (golden/cases/pipelines.hpp): exact (posenc's optimized
/// kernels), fp32, fp32-recurrence, bf16 or f16.
struct EngineOptions {
  std::string mistake;
  std::string pipeline = "exact";
};

struct SchemeEntry {
  std::string slug;
  std::string summary;
  std::vector<CaseRow> (*cases)();
  GoldenCase (*generate)(const std::string& id);
  TensorMap (*run_engine)(const CaseSpec& spec, const TensorMap& golden, const EngineOptions& o);
  std::vector<std::string> (*mistakes)();  // names accepted by EngineOptions::mistake
  /// The bug a mistake plants, in engine terms ("cache restarted at slot 0"); "" or no function:
  /// the name alone (diagnose's words).
  std::string (*mistake_words)(const std::string& mistake) = nullptr;
  /// Its place in schemes(), `posenc list` and the catalog (ascending; ties by slug). A new
  /// scheme that sets none comes after the committed ones.
  int order = 1000;
};

const std::vector<SchemeEntry>& schemes();
/// InvalidArgument naming the known slugs when `slug` is unknown.
const SchemeEntry& scheme_by_slug(std::string_view slug);

/// Golden cases for a user's model, from its HF config.json (today: RoPE, plain or scaled; the
/// config reader is golden/cases/hf_config.hpp). `positions` empty: the standard calls of the
/// model's rule (hard positions and the rule's boundaries); else one call at exactly those.
struct ConfigCase {
  std::string scheme, id, description;
  std::function<GoldenCase()> generate;
  // Estimated before generating (cases_for_config): the largest tensor of its file, the whole
  // file, and the seconds on one core (the mp50 + mp100 scores dominate: T^2 per q head).
  std::uint64_t largest_tensor_bytes = 0, file_bytes = 0;
  double seconds = 0;
};
struct ConfigCases {
  std::string model;               // what was read, one line
  std::vector<std::string> notes;  // defaults filled in and conventions chosen, with the reason
  std::vector<ConfigCase> cases;
  /// A model whose plan (golden/cases/model_plan.hpp) has more than one layer type: the plan
  /// manifest `generate --config` writes as DIR/plan.json (plan_manifest_json), the cases one
  /// per type; null for a uniform plan (today's cases, unchanged).
  nlohmann::json plan;
};
/// GoldenFileError naming the file and key for a bad config; InvalidArgument for bad positions.
/// A vision-language config (Qwen2-VL, Qwen2.5-VL, Qwen3-VL) gives M-RoPE cases
/// (golden/cases/mrope_case.hpp): `layout` (a layout file) replaces the standard layouts;
/// positions must then be empty. `layout` with a text-only config is an InvalidArgument.
/// level 2: rope_level2_cases (dense sweeps, windows, sampled rotations; positions unused).
/// A config whose plan has several layer types gives, at level 1 without `positions`, one plan
/// case per type (plan_case.hpp) and ConfigCases::plan; with `positions` or at level 2 the RoPE
/// cases of its top-level rule, as for any config.
ConfigCases cases_for_config(const std::filesystem::path& config, const std::vector<std::int64_t>& positions,
                             DType dtype, int level = 1, const std::filesystem::path& layout = {});

// Each home defines `SchemeEntry <slug>_scheme()`; registry.cpp declares and lists them.

}  // namespace posenc::golden
