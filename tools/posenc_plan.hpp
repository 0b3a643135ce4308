// `posenc verify` and `posenc diagnose` on a plan manifest (plan.json): the CLI's side of
// golden/cases/plan_manifest.hpp. Per layer type (ACT/<case id>.safetensors, one output per
// type), per layer (ACT/layers/NN/, every layer's own output on its type's case inputs), and an
// engine's layer table (--layer-table FILE). docs/verifying-plans.md has the walk-through.
#pragma once
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "golden/verify/plan_verify.hpp"
#include "golden/verify/verify.hpp"

namespace posenc::tools {

using golden::ActualReader;

/// After the per-type cases are verified (text format): one line per layer type with its verdict
/// and layers, then the model's. A type without output fails its layers. Returns the number of
/// layers that do not pass. With `json`, also {"model", "n_layers", "verdict" ("PASS" or
/// "FAIL"), "layers_failing": [...], "types": [{"name", "case", "verdict", "layers"}]}.
int print_plan_summary(const golden::PlanManifest& plan,
                       const std::vector<golden::CaseReport>& reports,
                       nlohmann::json* json = nullptr);

/// --layer-table FILE: the engine's table against the plan, every difference printed (text) or
/// put in *json. Returns the number of layers that differ.
int plan_layer_table_report(const golden::PlanManifest& plan, const std::filesystem::path& table,
                            const std::string& format, nlohmann::json* json);

using golden::PlanLayerResult;

/// Prints per-layer results (text: a line per layer and the summary naming the failing layers;
/// json into *json). Returns the number of layers that do not pass.
int print_plan_layers(const golden::PlanManifest& plan, const std::vector<PlanLayerResult>& r,
                      const std::string& format, bool verbose, nlohmann::json* json);

/// `posenc diagnose PLAN --actual ACT` with ACT/layers/: which type each failing layer computes
/// (posenc's diagnosis of its output against its type's case; "the other layer type's output"
/// named per layer), then the engine's layer assignment fitted as a layer pattern (period and
/// offset) against the plan's. Text, or json into *json. Returns the number of layers that are
/// not correct.
int plan_diagnose_layers(const golden::PlanManifest& plan, const std::filesystem::path& actual,
                         const std::string& profile, const std::string& format,
                         const ActualReader& read, nlohmann::json* json);

}  // namespace posenc::tools
