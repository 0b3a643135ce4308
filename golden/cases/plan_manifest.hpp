// Writing the plan manifest (plan.json): a model's layers, each layer type's golden case. The
// form, its reader and what verify checks of a plan before an engine's outputs are judged are in
// golden/verify/plan_verify.hpp (posenc::verify); this is the generator's side.
#pragma once
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "golden/cases/model_plan.hpp"
#include "golden/verify/plan_verify.hpp"

namespace posenc::golden {

/// What a layer of type t computes on positions, as plan.json's layers and an engine's layer
/// table write it: plan_layer_form of plan_type_to_json(t) (golden/verify/plan_verify.hpp).
nlohmann::json plan_layer_json(const PlanLayerType& t);
/// The plan manifest of `plan`, whose type t is checked by case_ids[t] (plan/<id>.json next to
/// plan.json); the case files' hashes are added by plan_manifest_add_hashes once they exist.
nlohmann::json plan_manifest_json(const ModelPlan& plan, const std::string& model_name,
                                  const std::vector<std::string>& case_ids);
/// Fills types[].manifest_sha256 and tensors_sha256 from the files under `dir` (plan.json's
/// folder); GoldenFileError naming a file that is missing.
void plan_manifest_add_hashes(nlohmann::json& plan, const std::filesystem::path& dir);

/// `catalog` (catalog.json's text) with "plans": [{"file", "model", "sha256"}] for every plan
/// manifest directly in `dir` (plan.json), so the catalog's integrity covers it.
std::string catalog_text_with_plans(const std::string& catalog, const std::filesystem::path& dir);

}  // namespace posenc::golden
