// Writing the plan manifest (plan.json): golden/cases/plan_manifest.hpp.
#include "golden/cases/plan_manifest.hpp"

#include <algorithm>

#include "golden/format/limits.hpp"
#include "golden/format/manifest.hpp"
#include "reference/common/errors.hpp"

namespace posenc::golden {

namespace fs = std::filesystem;
using Json = nlohmann::json;

Json plan_layer_json(const PlanLayerType& t) {
  return plan_layer_form(plan_type_to_json(t), "plan_layer_json");
}

Json plan_manifest_json(const ModelPlan& plan, const std::string& model_name,
                        const std::vector<std::string>& case_ids) {
  if (case_ids.size() != plan.types.size()) {
    throw_invalid("plan_manifest_json", "one case id per layer type is needed", case_ids.size());
  }
  Json m;
  m["schema"] = kPlanSchemaName;
  m["version"] = kPlanSchemaVersion;
  m["generator"] = {{"name", kGeneratorName}, {"version", kGeneratorVersion}};
  m["model"] = model_name;
  m["model_id"] = plan.model.id;
  m["n_layers"] = plan.layer_type.size();
  m["notes"] = plan.notes;
  Json types = Json::array();
  for (std::size_t t = 0; t < plan.types.size(); ++t) {
    std::vector<int> layers;
    for (std::size_t l = 0; l < plan.layer_type.size(); ++l) {
      if (plan.layer_type[l] == static_cast<int>(t)) layers.push_back(static_cast<int>(l));
    }
    types.push_back({{"name", plan.types[t].name},
                     {"case", case_ids[t]},
                     {"manifest", "plan/" + case_ids[t] + ".json"},
                     {"manifest_sha256", ""},
                     {"tensors", "plan/" + case_ids[t] + ".safetensors"},
                     {"tensors_sha256", ""},
                     {"layers", layers},
                     {"type", plan_type_to_json(plan.types[t])}});
  }
  m["types"] = types;
  Json layers = Json::array();
  for (std::size_t l = 0; l < plan.layer_type.size(); ++l) {
    const std::size_t t = static_cast<std::size_t>(plan.layer_type[l]);
    Json j = {{"index", l}, {"type", plan.types.at(t).name}};
    j.update(plan_layer_json(plan.types.at(t)));
    j["case"] = case_ids.at(t);
    layers.push_back(j);
  }
  m["layers"] = layers;
  return m;
}

void plan_manifest_add_hashes(Json& plan, const fs::path& dir) {
  for (Json& t : plan.at("types")) {
    for (const char* f : {"manifest", "tensors"}) {
      const fs::path p = dir / t.at(f).get<std::string>();
      if (!fs::is_regular_file(p))
        throw GoldenFileError(p.string() + ": missing (plan.json lists it)");
      t[std::string(f) + "_sha256"] = sha256_file(p);
    }
  }
}

std::string catalog_text_with_plans(const std::string& catalog, const fs::path& dir) {
  Json plans = Json::array();
  std::error_code ec;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.path().extension() == ".json" && e.path().filename() != "catalog.json" &&
        is_plan_manifest(e.path()))
      files.push_back(e.path());
  }
  if (files.empty()) return catalog;
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    const Json j = Json::parse(read_json_text(f));
    plans.push_back({{"file", f.filename().string()},
                     {"model", j.value("model", std::string())},
                     {"sha256", sha256_file(f)}});
  }
  Json c = Json::parse(catalog);
  c["plans"] = plans;
  return c.dump(1) + "\n";
}

}  // namespace posenc::golden
