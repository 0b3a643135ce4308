// Reading and verifying a plan manifest and an engine's layer table:
// golden/verify/plan_verify.hpp.
#include "golden/verify/plan_verify.hpp"

#include <algorithm>
#include <cstdint>
#include <set>
#include <tuple>

#include "golden/format/limits.hpp"
#include "golden/format/manifest.hpp"
#include "golden/verify/catalog.hpp"
#include "reference/common/mutant.hpp"
#include "reference/common/errors.hpp"

namespace posenc::golden {

namespace fs = std::filesystem;
using Json = nlohmann::json;

const std::vector<std::string>& plan_layer_keys() {
  static const std::vector<std::string> keys = {
      "rope", "base", "scaling", "mask", "window", "chunk", "temperature", "sinks", "qk_norm"};
  return keys;
}


namespace {

[[noreturn]] void bad_type(const std::string& source, const std::string& key,
                           const std::string& what) {
  throw GoldenFileError(source + ": type." + key + ": " + what);
}

/// j[key] (j an object) of the JSON kind `is` accepts, else GoldenFileError naming the key.
const Json& typed(const Json& j, const std::string& path, const char* key,
                  bool (Json::*is)() const noexcept, const char* expected,
                  const std::string& source) {
  if (!j.is_object()) bad_type(source, path, "expected an object");
  const std::string at = path.empty() ? std::string(key) : path + "." + key;
  if (!j.contains(key)) bad_type(source, at, "missing");
  const Json& v = j.at(key);
  if (!(v.*is)()) bad_type(source, at, std::string("expected ") + expected + " (got " + v.dump() + ")");
  return v;
}
const Json& num(const Json& j, const std::string& path, const char* key, const std::string& src) {
  return typed(j, path, key, &Json::is_number, "a number", src);
}
const Json& integer(const Json& j, const std::string& path, const char* key,
                    const std::string& src) {
  return typed(j, path, key, &Json::is_number_integer, "an integer", src);
}
const Json& text(const Json& j, const std::string& path, const char* key, const std::string& src) {
  return typed(j, path, key, &Json::is_string, "a string", src);
}
const Json& flag(const Json& j, const std::string& path, const char* key, const std::string& src) {
  return typed(j, path, key, &Json::is_boolean, "a boolean", src);
}

/// The scaling block of a "rope" type: the rule's name, its factor and the HF keys that decide
/// a layer's frequencies (what an engine's loader must have read).
Json scaling_form(const Json& s, const std::string& source) {
  const std::string type = text(s, "scaling", "type", source).get<std::string>();
  Json sc = {{"type", type}};
  if (type == "default") return sc;  // unscaled: no factor
  sc["factor"] = num(s, "scaling", "factor", source);
  if (type == "yarn") {
    sc["original_max_position_embeddings"] =
        num(s, "scaling", "original_max_position_embeddings", source);
    sc["beta_fast"] = num(s, "scaling", "beta_fast", source);
    sc["beta_slow"] = num(s, "scaling", "beta_slow", source);
    sc["truncate"] = flag(s, "scaling", "truncate", source);
  } else if (type == "llama3") {
    sc["original_max_position_embeddings"] =
        num(s, "scaling", "original_max_position_embeddings", source);
    sc["low_freq_factor"] = num(s, "scaling", "low_freq_factor", source);
    sc["high_freq_factor"] = num(s, "scaling", "high_freq_factor", source);
  } else if (type == "longrope") {
    sc["original_max_position_embeddings"] =
        num(s, "scaling", "original_max_position_embeddings", source);
  } else if (type != "linear" && type != "ntk" && type != "dynamic") {
    bad_type(source, "scaling.type", "unknown type \"" + type + "\"");
  }
  return sc;
}

}  // namespace

Json plan_layer_form(const Json& t, const std::string& source) {
  if (!t.is_object()) bad_type(source, "", "expected an object");
  const std::string rope = text(t, "", "rope", source).get<std::string>();
  if (rope != "rope" && rope != "proportional" && rope != "none")
    bad_type(source, "rope", "expected rope, proportional or none (got " + rope + ")");
  Json j;
  j["rope"] = rope;
  j["base"] = rope == "none" ? Json(nullptr) : num(t, "", "base", source);
  if (rope == "none") {
    j["scaling"] = nullptr;
  } else if (rope == "proportional") {
    const Json& p = typed(t, "", "proportional", &Json::is_object, "an object", source);
    j["scaling"] = {{"type", "proportional"},
                    {"partial_rotary_factor", num(p, "proportional", "partial_rotary_factor", source)},
                    {"factor", num(p, "proportional", "factor", source)}};
  } else {
    j["scaling"] = scaling_form(typed(t, "", "scaling", &Json::is_object, "an object", source),
                                source);
  }
  const std::string mask = text(t, "", "mask", source).get<std::string>();
  if (mask != "sliding" && mask != "chunked" && mask != "causal")
    bad_type(source, "mask", "expected causal, sliding or chunked (got " + mask + ")");
  j["mask"] = mask;
  j["window"] = mask == "sliding" ? integer(t, "", "window", source) : Json(nullptr);
  j["chunk"] = mask == "chunked" ? integer(t, "", "chunk", source) : Json(nullptr);
  if (!t.contains("temperature")) bad_type(source, "temperature", "missing");
  const Json& temp = t.at("temperature");
  j["temperature"] = nullptr;
  if (!temp.is_null()) {
    const std::string rule = text(temp, "temperature", "rule", source).get<std::string>();
    if (rule != "llama4" && rule != "mistral")
      bad_type(source, "temperature.rule", "expected llama4 or mistral (got " + rule + ")");
    j["temperature"] = {{"rule", rule},
                        {"length", integer(temp, "temperature", "length", source)},
                        {"coefficient", num(temp, "temperature", "coefficient", source)}};
  }
  j["sinks"] = flag(t, "", "sinks", source);
  if (!t.contains("qk_norm")) bad_type(source, "qk_norm", "missing");
  const Json& qn = t.at("qk_norm");
  j["qk_norm"] = nullptr;
  if (!qn.is_null()) {
    const std::string kind = text(qn, "qk_norm", "kind", source).get<std::string>();
    if (kind != "rms" && kind != "rms_unit" && kind != "l2")
      bad_type(source, "qk_norm.kind", "expected rms, rms_unit or l2 (got " + kind + ")");
    const std::string where = text(qn, "qk_norm", "position", source).get<std::string>();
    if (where != "before_rope" && where != "after_rope")
      bad_type(source, "qk_norm.position", "expected before_rope or after_rope (got " + where + ")");
    Json n = {{"kind", kind}, {"position", where}, {"eps", num(qn, "qk_norm", "eps", source)}};
    if (kind == "rms") n["weight_offset"] = num(qn, "qk_norm", "weight_offset", source);
    j["qk_norm"] = n;
  }
  return j;
}

bool is_plan_manifest(const fs::path& path) {
  try {
    if (!fs::is_regular_file(path) || path.extension() != ".json") return false;
    const Json j = Json::parse(read_json_text(path));
    return j.is_object() && j.value("schema", std::string()) == kPlanSchemaName;
  } catch (const std::exception&) {
    return false;
  }
}

namespace {

std::string shown(const Json& v) {
  std::string d = v.dump(-1, ' ', false, Json::error_handler_t::replace);
  return d.size() > 96 ? d.substr(0, 93) + "..." : d;
}

/// Reads the plan's structure: every type's files, layers covering 0 .. n_layers - 1 exactly
/// once, every layer's type and case (GoldenFileError naming the key).
class PlanReader {
 public:
  explicit PlanReader(const fs::path& path) : path_(path), src_(path.string()) {}

  [[noreturn]] void bad(const std::string& key, const std::string& what) const {
    throw GoldenFileError(src_ + ": " + key + ": " + what);
  }

  /// The structure, then check_cases.
  PlanManifest run() {
    read();
    check_cases();
    return std::move(p_);
  }

 private:
  void read() {
    try {
      j_ = Json::parse(read_json_text(path_));
    } catch (const nlohmann::json::exception& e) {
      throw GoldenFileError(src_ + ": not valid JSON (" + std::string(e.what()) + ")");
    }
    if (!j_.is_object() || j_.value("schema", std::string()) != kPlanSchemaName)
      bad("schema", "expected \"posenc-plan\"");
    if (j_.value("version", Json()) != Json(kPlanSchemaVersion)) {
      bad("version", "expected " + std::to_string(kPlanSchemaVersion) + " (got " +
                         shown(j_.value("version", Json())) +
                         "); regenerate the plan with `posenc generate --config`");
    }
    try {
      p_.path = path_;
      p_.model = j_.at("model").get<std::string>();
      p_.n_layers = int_in(j_.at("n_layers"), "n_layers", 1, 65536);
      read_types();
      read_layers();
      for (std::size_t t = 0; t < p_.types.size(); ++t) check_case(t);
    } catch (const nlohmann::json::exception& e) {
      throw GoldenFileError(src_ + ": malformed plan manifest (" + std::string(e.what()) + ")");
    }
  }

  /// An integer in [lo, hi], checked on the JSON value before any conversion.
  int int_in(const Json& v, const std::string& key, int lo, int hi) const {
    if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<std::uint64_t>() > 65536) ||
        v.get<std::int64_t>() < lo || v.get<std::int64_t>() > hi) {
      bad(key, "expected an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                   "] (got " + shown(v) + ")");
    }
    return static_cast<int>(v.get<std::int64_t>());
  }

  fs::path file_of(const std::string& key, const std::string& rel, const std::string& ext) const {
    const std::string want = rel.substr(0, std::min<std::size_t>(rel.size(), 5));
    if (want != "plan/" || !is_plain_file_name(rel.substr(5)) || fs::path(rel).extension() != ext) {
      bad(key, "expected plan/<case id>" + ext + " inside the plan's folder (got " + rel + ")");
    }
    return path_.parent_path() / rel;
  }

  void read_types() {
    const Json& types = j_.at("types");
    if (!types.is_array() || types.empty() || types.size() > 1024)
      bad("types", "expected a list of 1 to 1024 layer types");
    owner_.assign(static_cast<std::size_t>(p_.n_layers), -1);
    std::set<std::string> names;
    for (std::size_t t = 0; t < types.size(); ++t) {
      const std::string key = "types[" + std::to_string(t) + "]";
      PlanManifest::Type ty;
      ty.name = types[t].at("name").get<std::string>();
      if (!names.insert(ty.name).second)
        bad(key + ".name", "type \"" + ty.name + "\" is listed twice");
      ty.case_id = types[t].at("case").get<std::string>();
      ty.manifest = file_of(key + ".manifest", types[t].at("manifest").get<std::string>(), ".json");
      ty.tensors =
          file_of(key + ".tensors", types[t].at("tensors").get<std::string>(), ".safetensors");
      if (ty.manifest.stem() != ty.case_id || ty.tensors.stem() != ty.case_id)
        bad(key, "manifest and tensors must be plan/" + ty.case_id + ".json and .safetensors");
      ty.type = types[t].at("type");
      const Json& ls = types[t].at("layers");
      if (!ls.is_array()) bad(key + ".layers", "expected a list of layer indices");
      for (const Json& l : ls) ty.layers.push_back(int_in(l, key + ".layers", 0, p_.n_layers - 1));
      for (int l : ty.layers) {
        if (l < 0 || l >= p_.n_layers || owner_[static_cast<std::size_t>(l)] >= 0) {
          bad(key + ".layers", "layer " + std::to_string(l) +
                                   " is out of range or listed twice (n_layers " +
                                   std::to_string(p_.n_layers) + ")");
        }
        owner_[static_cast<std::size_t>(l)] = static_cast<int>(t);
      }
      hashes_.push_back({types[t].at("manifest_sha256").get<std::string>(),
                         types[t].at("tensors_sha256").get<std::string>()});
      p_.types.push_back(std::move(ty));
    }
    for (int l = 0; l < p_.n_layers; ++l) {
      if (owner_[static_cast<std::size_t>(l)] < 0)
        bad("types", "layer " + std::to_string(l) + " has no type");
    }
    p_.layer_type = owner_;
  }

  void read_layers() {
    const Json& layers = j_.at("layers");
    if (!layers.is_array() || static_cast<int>(layers.size()) != p_.n_layers)
      bad("layers", "expected n_layers = " + std::to_string(p_.n_layers) + " entries");
    for (int l = 0; l < p_.n_layers; ++l) {
      const Json& e = layers[static_cast<std::size_t>(l)];
      const PlanManifest::Type& ty = p_.types[static_cast<std::size_t>(owner_[l])];
      if (!e.is_object() || e.value("index", Json()) != Json(l) ||
          e.value("type", Json()) != Json(ty.name) || e.value("case", Json()) != Json(ty.case_id)) {
        bad("layers[" + std::to_string(l) + "]", "expected index " + std::to_string(l) + ", type " +
                                                     ty.name + " and case " + ty.case_id +
                                                     " (the type that lists it)");
      }
      p_.layers.push_back(e);
    }
  }

  /// Each layer's entry against its type's case (read by check_case: the manifest's id,
  /// scheme, params.type and params.plan); then the case files' and the plan's hashes.
  void check_cases() {
    for (int l = 0; l < p_.n_layers; ++l) check_layer(l);
    for (std::size_t t = 0; t < p_.types.size(); ++t) check_type_block(t);
    for (std::size_t t = 0; t < p_.types.size(); ++t) {
      const auto& ty = p_.types[t];
      const std::string key = "types[" + std::to_string(t) + "]";
      for (const auto& [file, sha, what] : {std::tuple{ty.manifest, hashes_[t].first, "manifest"},
                                            std::tuple{ty.tensors, hashes_[t].second, "tensors"}}) {
        if (sha256_file(file) != sha && !POSENC_MUTANT("plan_case_hash_unchecked")) {
          bad(key + "." + what + "_sha256",
              file.string() +
                  " has another SHA-256 than the plan records (a modified case, or a "
                  "plan pointing at another case's files); regenerate with `posenc generate "
                  "--config`");
        }
      }
    }
    check_catalog();
  }

  void check_case(std::size_t t) {
    PlanManifest::Type& ty = p_.types[t];
    const std::string key = "types[" + std::to_string(t) + "]";
    Json m;
    try {
      m = Json::parse(read_json_text(ty.manifest));
    } catch (const nlohmann::json::exception& e) {
      throw GoldenFileError(ty.manifest.string() + ": not valid JSON (" + e.what() + ")");
    }
    const std::string case_src = ty.manifest.string();
    if (m.value("id", Json()) != Json(ty.case_id) || m.value("scheme", Json()) != Json("plan"))
      bad(key + ".case", "the case file " + case_src + " is not the plan case " + ty.case_id);
    const Json& params = m.at("params");
    const Json& pt = params.at("type");
    case_types_.push_back(pt);
    case_plans_.push_back(params.at("plan"));
    case_layers_.push_back(plan_layer_form(pt, case_src + " params"));
  }

  /// A type's block (types[t].type) is its case's params.type, name included, and its layers
  /// the case's params.plan.
  void check_type_block(std::size_t t) {
    const PlanManifest::Type& ty = p_.types[t];
    const Json& pt = case_types_[t];
    const Json& pp = case_plans_[t];
    const std::string key = "types[" + std::to_string(t) + "]";
    if (pp.value("model", Json()) != Json(p_.model) ||
        pp.value("n_layers", Json()) != Json(p_.n_layers) ||
        pp.value("layers", Json()) != Json(ty.layers)) {
      bad(key + ".layers", "layers " + plan_layer_ranges(ty.layers) + " of " + p_.model +
                               " but case " + ty.case_id + " is for layers " +
                               shown(pp.value("layers", Json())) + " of " +
                               shown(pp.value("model", Json())));
    }
    if (pt == ty.type && pt.value("name", Json()) == Json(ty.name)) return;
    const std::string layers = " (layers " + plan_layer_ranges(ty.layers) + ")";
    for (const auto& [k, v] : pt.items()) {
      if (!ty.type.contains(k) || ty.type.at(k) != v) {
        bad(key + ".type." + k + layers, shown(ty.type.value(k, Json())) + " but case " +
                                             ty.case_id + " has " + shown(v) + " (params.type." +
                                             k + ")");
      }
    }
    bad(key + ".type" + layers, "differs from case " + ty.case_id + "'s params.type (type " +
                                    ty.name + " against " + shown(pt.value("name", Json())) + ")");
  }

  void check_layer(int l) {
    const Json& e = p_.layers[static_cast<std::size_t>(l)];
    const std::size_t t = static_cast<std::size_t>(owner_[l]);
    const Json& want = case_layers_[t];
    for (const std::string& k : plan_layer_keys()) {
      if (POSENC_MUTANT("plan_layers_unchecked")) break;
      if (!e.contains(k) || e.at(k) != want.at(k)) {
        bad("layers[" + std::to_string(l) + "]." + k,
            shown(e.value(k, Json())) + " (type " + p_.types[t].name + ") but its case " +
                p_.types[t].case_id + " says " + shown(want.at(k)));
      }
    }
  }

  void check_catalog() {
    const fs::path cat = path_.parent_path() / "catalog.json";
    std::error_code ec;
    if (!fs::exists(cat, ec)) return;
    const Json c = Json::parse(read_json_text(cat));
    const std::string name = path_.filename().string();
    for (const Json& e : c.value("plans", Json::array())) {
      if (e.value("file", std::string()) != name) continue;
      if (e.value("sha256", std::string()) != sha256_file(path_) &&
          !POSENC_MUTANT("plan_hash_unchecked")) {
        throw GoldenFileError(src_ + ": SHA-256 differs from " + cat.string() +
                              " (a modified plan; regenerate with `posenc generate --config`)");
      }
      return;
    }
    if (POSENC_MUTANT("plan_hash_unchecked")) return;
    throw GoldenFileError(src_ + ": lies in the catalog folder " + path_.parent_path().string() +
                          " but " + cat.string() +
                          " does not list it (\"plans\"); refused (rebuild with `posenc catalog "
                          "--data " +
                          path_.parent_path().string() + "`)");
  }

  fs::path path_;
  std::string src_;
  Json j_;
  PlanManifest p_;
  std::vector<int> owner_;
  std::vector<std::pair<std::string, std::string>> hashes_;
  std::vector<Json> case_layers_, case_types_, case_plans_;
};

}  // namespace

PlanManifest plan_manifest_read(const fs::path& path) { return PlanReader(path).run(); }

std::string plan_layer_ranges(const std::vector<int>& layers) {
  std::string out;
  for (std::size_t i = 0; i < layers.size();) {
    std::size_t j = i;
    while (j + 1 < layers.size() && layers[j + 1] == layers[j] + 1) ++j;
    if (!out.empty()) out += ", ";
    out += std::to_string(layers[i]);
    if (j > i) out += "-" + std::to_string(layers[j]);
    i = j + 1;
  }
  return out;
}

std::string plan_layer_dir_name(int layer, int n_layers) {
  std::size_t width = std::max<std::size_t>(2, std::to_string(std::max(n_layers - 1, 0)).size());
  std::string s = std::to_string(layer);
  return std::string(s.size() < width ? width - s.size() : 0, '0') + s;
}

std::vector<LayerTableDiff> plan_layer_table_check(const PlanManifest& plan,
                                                   const fs::path& table) {
  const std::string src = table.string();
  auto bad = [&](const std::string& key, const std::string& what) {
    throw GoldenFileError(src + ": " + key + ": " + what);
  };
  Json j;
  try {
    j = Json::parse(read_json_text(table));
  } catch (const nlohmann::json::exception& e) {
    throw GoldenFileError(src + ": not valid JSON (" + std::string(e.what()) + ")");
  }
  if (!j.is_object() || j.value("schema", Json()) != Json(kLayerTableSchemaName))
    bad("schema", "expected \"" + std::string(kLayerTableSchemaName) + "\"");
  if (!j.contains("layers") || !j.at("layers").is_array())
    bad("layers", "expected a list with one entry per layer");
  const Json& layers = j.at("layers");
  if (static_cast<int>(layers.size()) != plan.n_layers) {
    bad("layers", "has " + std::to_string(layers.size()) + " entries: the plan of " + plan.model +
                      " has " + std::to_string(plan.n_layers) + " layers");
  }
  std::set<std::string> known(plan_layer_keys().begin(), plan_layer_keys().end());
  known.insert({"index", "type"});
  std::vector<LayerTableDiff> diffs;
  for (int l = 0; l < plan.n_layers; ++l) {
    const Json& e = layers[static_cast<std::size_t>(l)];
    const std::string key = "layers[" + std::to_string(l) + "]";
    if (!e.is_object()) bad(key, "expected an object");
    if (e.value("index", Json()) != Json(l))
      bad(key + ".index", "expected " + std::to_string(l) + " (layers in order, from 0)");
    for (const auto& [k, v] : e.items()) {
      if (!known.count(k)) bad(key + "." + k, "unknown key (known: index, type and the plan's)");
    }
    const Json& want = plan.layers[static_cast<std::size_t>(l)];
    const std::string type = plan.types[static_cast<std::size_t>(plan.layer_type[l])].name;
    for (const std::string& k : plan_layer_keys()) {
      if (!e.contains(k)) bad(key + "." + k, "missing (null where the layer has none)");
      if (POSENC_MUTANT("plan_layer_table_blind")) continue;
      // Numbers compare by value (1e6 and 1000000 are one base).
      if (e.at(k) != want.at(k)) diffs.push_back({l, type, k, shown(want.at(k)), shown(e.at(k))});
    }
  }
  return diffs;
}


std::vector<PlanLayerResult> plan_verify_layers(const PlanManifest& plan, const fs::path& actual,
                                                const VerifyOptions& opt,
                                                const ActualReader& read) {
  std::vector<LoadedCase> cases;
  for (const auto& t : plan.types) cases.push_back(load_case(t.manifest));
  std::vector<PlanLayerResult> out;
  for (int l = 0; l < plan.n_layers; ++l) {
    const std::size_t ti = static_cast<std::size_t>(plan.layer_type[static_cast<std::size_t>(l)]);
    const LoadedCase& lc = cases[ti];
    PlanLayerResult r;
    r.layer = l;
    r.type = plan.types[ti].name;
    r.case_id = plan.types[ti].case_id;
    const fs::path dir = actual / "layers" / plan_layer_dir_name(l, plan.n_layers);
    std::optional<TensorMap> act;
    if (fs::is_directory(dir)) act = read(dir, lc.spec.id);
    if (!act) {
      r.report.id = lc.spec.id;
      r.report.scheme = "plan";
      r.report.status = Verdict::kNoOutput;
      r.report.message = "no output in " + dir.string();
    } else {
      r.report = verify_case(lc.spec, lc.golden, *act, opt);
    }
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace posenc::golden
