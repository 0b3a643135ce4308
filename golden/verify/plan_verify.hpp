// Reading and verifying a plan manifest (plan.json) and an engine's layer table: the verifier's
// side of a model's per-layer plan, in posenc::verify (no MPFR, no generators). The writer is
// golden/cases/plan_manifest.hpp.
//
// `posenc generate --config` on a config whose plan has more than one layer type writes one case
// per type (DIR/plan/<case id>.json + .safetensors) and DIR/plan.json ("schema": "posenc-plan",
// version 2, schemas/plan.schema.json): the model, every type with its case (id, both files and
// their SHA-256) and its layers, and every layer in the machine form of plan_layer_form (rope,
// base, scaling, mask, window, chunk, temperature, sinks, qk_norm) with its type and case. The
// folder's catalog.json lists plan.json with its SHA-256 ("plans").
//
// plan_manifest_read refuses (GoldenFileError, exit 2, naming the file, the layer and the key) a
// plan whose layers are not covered exactly once, whose layer entries or type blocks disagree
// with the case they point to (the case's own params.type, params.plan), whose case files' hashes
// differ from the plan's, or which the folder's catalog.json lists with another hash or not at
// all. An engine's layer table (plan_layer_table_check: every layer in the same machine form, a
// small JSON the engine dumps) is compared with it exactly, key by key. plan_verify_layers
// verifies every layer's own output against its type's case.
#pragma once
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "golden/verify/verify.hpp"

namespace posenc::golden {

inline constexpr const char* kPlanSchemaName = "posenc-plan";
inline constexpr int kPlanSchemaVersion = 2;
inline constexpr const char* kLayerTableSchemaName = "posenc-layer-table";

/// The keys of a layer's machine form, in order: rope, base, scaling, mask, window, chunk,
/// temperature, sinks, qk_norm.
const std::vector<std::string>& plan_layer_keys();

/// What a layer of a type computes on positions, from the type's JSON (a plan case's
/// params.type, plan_type_to_json's form): {"rope": "rope"|"proportional"|"none", "base":
/// number|null, "scaling": null (NoPE) or {"type", "factor", and the rule's HF keys}, "window":
/// int|null, "chunk": int|null, "temperature": null or {"rule", "length", "coefficient"},
/// "sinks": bool, "qk_norm": null or {"kind", "position", "eps"[, "weight_offset"]}}. The one
/// codec of this form: the writer's plan_layer_json is this of plan_type_to_json.
/// GoldenFileError naming `source` and the key for a type that is not that form.
nlohmann::json plan_layer_form(const nlohmann::json& type, const std::string& source);

/// What verify reads from a plan manifest, every check above passed.
struct PlanManifest {
  std::filesystem::path path;
  std::string model;
  int n_layers = 0;
  struct Type {
    std::string name, case_id;
    std::filesystem::path manifest, tensors;  // resolved against plan.json's folder
    std::vector<int> layers;
    nlohmann::json type;  // params.type of the case
  };
  std::vector<Type> types;
  std::vector<int> layer_type;         // [n_layers]: index into types
  std::vector<nlohmann::json> layers;  // [n_layers]: plan_layer_form of each layer's type
};
/// True when the file is a JSON object whose "schema" is kPlanSchemaName (never throws).
bool is_plan_manifest(const std::filesystem::path& path);
/// Reads and checks a plan manifest (see the top of this file).
PlanManifest plan_manifest_read(const std::filesystem::path& path);

/// Layers as ranges: {0,1,2,3,4,6} -> "0-4, 6".
std::string plan_layer_ranges(const std::vector<int>& layers);
/// The folder of layer l's outputs under ACT/layers/: the index zero-padded to two digits (three
/// from 100 layers on, ...): "05", "33".
std::string plan_layer_dir_name(int layer, int n_layers);

/// One way an engine's layer table differs from the plan.
struct LayerTableDiff {
  int layer = 0;
  std::string type, key, plan_value, engine_value;
};
/// An engine's layer table {"schema": "posenc-layer-table", "layers": [{"index": i, <every key
/// of plan_layer_keys()>, optional "type": the engine's own name}, ...]} compared with the plan
/// exactly: every difference, layer by layer and key by key. GoldenFileError naming the file and
/// the key for a table that is not that form (not JSON, a layer missing or repeated, a missing or
/// unknown key).
std::vector<LayerTableDiff> plan_layer_table_check(const PlanManifest& plan,
                                                   const std::filesystem::path& table);

/// An engine's output for one case found in a folder (the CLI reads ACT/<case id>.safetensors or
/// .npy files), nullopt if none.
using ActualReader = std::function<std::optional<TensorMap>(const std::filesystem::path& dir,
                                                            const std::string& case_id)>;

/// One layer's verdict: its own output (ACT/layers/NN) against its type's case.
struct PlanLayerResult {
  int layer = 0;
  std::string type, case_id;
  CaseReport report;
};

/// Every layer of the plan verified on its own output under actual/layers/NN (no folder, or a
/// folder `read` finds nothing in: NO OUTPUT, a failure of that layer).
std::vector<PlanLayerResult> plan_verify_layers(const PlanManifest& plan,
                                                const std::filesystem::path& actual,
                                                const VerifyOptions& opt,
                                                const ActualReader& read);

}  // namespace posenc::golden
