// The plan manifest (golden/cases/plan_manifest.hpp) and what diagnose fits on a plan case
// (golden/cases/plan_fit.hpp): plan.json written as `generate --config` writes it, refused when a
// layer or a type disagrees with its case, when a case file or the plan itself was changed after
// the hashes were taken; an engine's layer table compared key by key; each fitted parameter of a
// plan type named with its value; q/k norms read from the configs; plan cases' embedded configs
// and correctly rounded scale.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "golden/cases/catalog.hpp"
#include "golden/cases/diagnose.hpp"
#include "golden/cases/hf_config.hpp"
#include "golden/cases/model_plan.hpp"
#include "golden/cases/plan_case.hpp"
#include "golden/cases/plan_fit.hpp"
#include "golden/cases/plan_manifest.hpp"
#include "golden/format/limits.hpp"
#include "golden/verify/catalog.hpp"
#include "properties/golden_checks.hpp"
#include "reference/common/errors.hpp"
#include "reference/common/scalar.hpp"

namespace posenc::properties {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

const char* kPl = "plan_gemma_3_4b_it";

void write_text(const fs::path& p, const std::string& s) {
  std::ofstream(p, std::ios::binary) << s;
}

/// The Gemma 3 preset's plan folder as `generate --config` writes it (cases, plan.json with the
/// case hashes, catalog.json listing both), once per process; each test copies it.
const fs::path& gemma3_folder() {
  static const fs::path dir = [] {
    const fs::path d =
        fs::temp_directory_path() / ("posenc_plans_manifest." + std::to_string(::getpid()));
    fs::remove_all(d);
    const auto cc = golden::cases_for_config(golden::default_presets_dir() / "gemma-3-4b-it.json",
                                             {}, DType::kF32);
    std::vector<golden::CatalogEntry> entries;
    for (const auto& c : cc.cases) {
      golden::GoldenCase g = c.generate();
      entries.push_back(golden::write_case(d, c.scheme, c.id, golden::case_files(g)));
    }
    Json plan = cc.plan;
    golden::plan_manifest_add_hashes(plan, d);
    write_text(d / "plan.json", plan.dump(1) + "\n");
    write_text(d / "catalog.json",
               golden::catalog_text_with_plans(golden::catalog_text(entries), d));
    return d;
  }();
  return dir;
}

/// A copy of the folder whose plan.json is `edit`ed (the catalog's hash left as it was).
fs::path edited(const std::string& name, const std::function<void(Json&)>& edit,
                bool recatalog = false) {
  const fs::path d = gemma3_folder().string() + "_" + name;
  fs::remove_all(d);
  fs::copy(gemma3_folder(), d, fs::copy_options::recursive);
  Json j = Json::parse(golden::read_json_text(d / "plan.json"));
  edit(j);
  write_text(d / "plan.json", j.dump(1) + "\n");
  if (recatalog) {
    Json c = Json::parse(golden::read_json_text(d / "catalog.json"));
    c["plans"][0]["sha256"] = golden::sha256_file(d / "plan.json");
    write_text(d / "catalog.json", c.dump(1) + "\n");
  }
  return d / "plan.json";
}

std::string refusal(const fs::path& plan) {
  try {
    golden::plan_manifest_read(plan);
  } catch (const GoldenFileError& e) {
    return e.what();
  }
  return "";
}

void expect_refused(const fs::path& plan, const std::string& needle) {
  const std::string what = refusal(plan);
  EXPECT_NE(what.find(needle), std::string::npos) << "wanted: " << needle << "\ngot: " << what;
}

TEST(PlanManifest, ReadsWhatGenerateWrites) {
  const auto p = golden::plan_manifest_read(gemma3_folder() / "plan.json");
  EXPECT_EQ(p.model, "gemma_3_4b_it");
  ASSERT_EQ(p.n_layers, 34);
  ASSERT_EQ(p.types.size(), 2u);
  EXPECT_EQ(p.types[1].layers, (std::vector<int>{5, 11, 17, 23, 29}));
  EXPECT_EQ(p.layers[5].at("base"), Json(1000000.0));
  EXPECT_EQ(p.layers[4].at("window"), Json(1024));
  EXPECT_EQ(p.layers[4].at("qk_norm").at("kind"), Json("rms"));
  EXPECT_EQ(golden::plan_layer_dir_name(5, 34), "05");
  EXPECT_EQ(golden::plan_layer_dir_name(7, 120), "007");
}

// issue 32's "plan.json is trusted blindly": each edit is refused naming the layer and the key.
TEST(PlanManifest, LayerThatDisagreesWithItsCaseIsRefusedNamingLayerAndKey) {
  auto point = [](Json& j) {  // full_attention pointed at the sliding case
    for (const char* k : {"case", "manifest", "manifest_sha256", "tensors", "tensors_sha256"})
      j["types"][1][k] = j["types"][0][k];
    for (auto& l : j["layers"]) {
      if (l["type"] == "full_attention") l["case"] = j["types"][0]["case"];
    }
  };
  expect_refused(edited("point", point),
                 "layers[5].base: 1000000.0 (type full_attention) but its "
                 "case plan_gemma_3_4b_it_sliding_attention_f32 says 10000.0");
  auto swap = [](Json& j) {  // the two types' cases swapped
    for (const char* k : {"case", "manifest", "manifest_sha256", "tensors", "tensors_sha256"})
      std::swap(j["types"][0][k], j["types"][1][k]);
    for (auto& l : j["layers"])
      l["case"] =
          l["type"] == j["types"][0]["name"] ? j["types"][0]["case"] : j["types"][1]["case"];
  };
  expect_refused(edited("swap", swap), "layers[0].base: 10000.0 (type sliding_attention)");
  auto window = [](Json& j) {
    for (auto& l : j["layers"]) {
      if (!l["window"].is_null()) l["window"] = 2048;
    }
  };
  expect_refused(edited("window", window),
                 "layers[0].window: 2048 (type sliding_attention) but its "
                 "case plan_gemma_3_4b_it_sliding_attention_f32 says 1024");
  auto block = [](Json& j) { j["types"][0]["type"]["window"] = 2048; };
  expect_refused(edited("block", block), "types[0].type.window (layers 0-4, 6-10");
  auto layers = [](Json& j) {  // a layer moved from one type to the other, consistently
    j["types"][0]["layers"].push_back(5);
    Json& f = j["types"][1]["layers"];
    f.erase(f.begin());
    j["layers"][5] = j["layers"][4];
    j["layers"][5]["index"] = 5;
  };
  expect_refused(
      edited("layers", layers),
      "types[0].layers: layers 0-4, 6-10, 12-16, 18-22, 24-28, 30-33, 5 of gemma_3_4b_it but case");
}

TEST(PlanManifest, ChangedFilesAreRefused) {
  // a case tensor file changed after the plan was written
  const fs::path d = edited(
                         "tensor", [](Json&) {}, true)
                         .parent_path();
  const fs::path t = d / "plan" / (std::string(kPl) + "_full_attention_f32.safetensors");
  std::fstream f(t, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(-1, std::ios::end);
  f.put('\x7f');
  f.close();
  expect_refused(d / "plan.json", "types[1].tensors_sha256");
  // plan.json edited without breaking a rule: the catalog's hash of it
  expect_refused(edited("notes", [](Json& j) { j["notes"].push_back("x"); }),
                 "plan.json: SHA-256 differs from");
  // a plan in a catalog folder the catalog does not list
  const fs::path u = edited("unlisted", [](Json&) {});
  Json c = Json::parse(golden::read_json_text(u.parent_path() / "catalog.json"));
  c.erase("plans");
  write_text(u.parent_path() / "catalog.json", c.dump(1));
  expect_refused(u, "does not list it (\"plans\")");
  // structure
  expect_refused(edited("v1", [](Json& j) { j["version"] = 1; }), "version: expected 2");
  expect_refused(edited("hole", [](Json& j) { j["types"][1]["layers"].erase(0); }),
                 "types: layer 5 has no type");
  expect_refused(edited("twice", [](Json& j) { j["types"][1]["layers"].push_back(0); }),
                 "types[1].layers: layer 0 is out of range or listed twice");
  expect_refused(edited("escape", [](Json& j) { j["types"][0]["manifest"] = "plan/../x.json"; }),
                 "types[0].manifest: expected plan/<case id>.json");
  expect_refused(edited("huge", [](Json& j) { j["n_layers"] = 1e300; }),
                 "n_layers: expected an integer in [1, 65536]");
}

Json table_of(const golden::PlanManifest& p, const std::function<int(int)>& type_of) {
  Json rows = Json::array();
  for (int l = 0; l < p.n_layers; ++l) {
    Json r = {{"index", l}};
    // the layer entry of the first layer of that type
    for (int m = 0; m < p.n_layers; ++m) {
      if (p.layer_type[m] == type_of(l)) {
        for (const auto& k : golden::plan_layer_keys()) r[k] = p.layers[m].at(k);
        break;
      }
    }
    rows.push_back(r);
  }
  return {{"schema", "posenc-layer-table"}, {"layers", rows}};
}

// The engine's layer table against the plan: the Gemma 3 layer pattern off by one names the 11
// layers and, on each, the keys that differ; the right table none; a base written 1e6 is 1000000.
TEST(PlanLayerTable, NamesEachLayerAndKeyThatDiffer) {
  const auto p = golden::plan_manifest_read(gemma3_folder() / "plan.json");
  const fs::path t = gemma3_folder() / "table.json";
  write_text(t, table_of(p, [](int l) { return (l + 1) % 6 == 0 ? 1 : 0; }).dump());
  EXPECT_TRUE(golden::plan_layer_table_check(p, t).empty());
  Json good = table_of(p, [](int l) { return (l + 1) % 6 == 0 ? 1 : 0; });
  good["layers"][5]["base"] = 1e6;
  good["layers"][5]["type"] = "global";  // the engine's own name: not compared
  write_text(t, good.dump());
  EXPECT_TRUE(golden::plan_layer_table_check(p, t).empty());
  write_text(t, table_of(p, [](int l) { return l % 6 == 0 ? 1 : 0; }).dump());
  const auto d = golden::plan_layer_table_check(p, t);
  std::set<int> layers;
  std::set<std::string> keys;
  for (const auto& x : d) {
    layers.insert(x.layer);
    keys.insert(x.key);
  }
  EXPECT_EQ(layers, (std::set<int>{0, 5, 6, 11, 12, 17, 18, 23, 24, 29, 30}));
  EXPECT_EQ(keys, (std::set<std::string>{"base", "scaling", "mask", "window"}));
  ASSERT_FALSE(d.empty());
  EXPECT_EQ(d.front().layer, 0);
  EXPECT_EQ(d.front().key, "base");
  EXPECT_EQ(d.front().engine_value, "1000000.0");
  EXPECT_EQ(d.front().plan_value, "10000.0");
}

TEST(PlanLayerTable, MalformedTableIsRefusedNamingTheKey) {
  const auto p = golden::plan_manifest_read(gemma3_folder() / "plan.json");
  const fs::path t = gemma3_folder() / "bad_table.json";
  auto refused = [&](const Json& j, const std::string& needle) {
    write_text(t, j.dump());
    try {
      golden::plan_layer_table_check(p, t);
      ADD_FAILURE() << "accepted; expected " << needle;
    } catch (const GoldenFileError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  Json good = table_of(p, [](int l) { return (l + 1) % 6 == 0 ? 1 : 0; });
  Json j = good;
  j["layers"][3].erase("qk_norm");
  refused(j, "bad_table.json: layers[3].qk_norm: missing");
  j = good;
  j["layers"][3]["rotary"] = true;
  refused(j, "layers[3].rotary: unknown key");
  j = good;
  j["layers"].erase(33);
  refused(j, "layers: has 33 entries: the plan of gemma_3_4b_it has 34 layers");
  j = good;
  j["layers"][2]["index"] = 7;
  refused(j, "layers[2].index: expected 2");
  refused(Json::array(), "schema: expected \"posenc-layer-table\"");
}

const golden::LoadedCase& catalog_case(const std::string& id) {
  static std::map<std::string, golden::LoadedCase> cache;
  auto it = cache.find(id);
  if (it == cache.end())
    it = cache.emplace(id, golden::load_case(golden::default_data_dir() / "plan" / (id + ".json")))
             .first;
  return it->second;
}

/// diagnose's top answer for the fp32 engine with the case's type changed by `edit` (and tau).
golden::Hypothesis top_of(const std::string& id,
                          const std::function<void(golden::PlanLayerType&)>& edit,
                          const std::function<double(std::int64_t)>& tau = {},
                          const std::vector<std::string>& keep = {}) {
  const auto& lc = catalog_case(id);
  golden::PlanLayerType t =
      golden::plan_type_from_json(lc.spec.manifest.at("params").at("type"), id);
  edit(t);
  golden::TensorMap out = golden::plan_case_run_type(lc.spec, lc.golden, t, "fp32", tau);
  if (!keep.empty()) {
    for (auto it = out.begin(); it != out.end();) {
      it = std::find(keep.begin(), keep.end(), it->first) == keep.end() ? out.erase(it) : ++it;
    }
  }
  const auto d = golden::diagnose_case(lc, out, "fp32");
  EXPECT_EQ(d.verdict, "explained") << golden::diagnosis_text(d, true);
  return d.ranked.empty() ? golden::Hypothesis{} : d.ranked.front();
}

// Issue 33's newcomer bugs on Gemma 3 and the temperature variants of Llama 4, each named by its
// fitted parameter and value (the independent numpy engine's are
// python/tests/test_plan_diagnose.py).
TEST(PlanFit, EachFittedParameterIsNamedWithItsValue) {
  const std::string g3 = std::string(kPl) + "_full_attention_f32";
  auto h = top_of(g3, [](auto& t) { t.params.base = 10000; });
  EXPECT_EQ(h.mistake, "base");
  ASSERT_TRUE(h.fit);
  EXPECT_EQ(h.fit->value, "10000");
  h = top_of(g3, [](auto& t) { t.params.base = 10000; }, {}, {"out"});  // a scan without q_rot
  EXPECT_EQ(h.mistake, "base");
  h = top_of(std::string(kPl) + "_sliding_attention_f32", [](auto& t) { t.window = 1025; });
  EXPECT_EQ(h.mistake, "window");
  ASSERT_TRUE(h.fit);
  EXPECT_EQ(h.fit->value, "W + 1 = 1025");
  h = top_of(std::string(kPl) + "_sliding_attention_f32", [](auto& t) { t.window = 1023; }, {},
             {"probs"});
  EXPECT_EQ(h.mistake, "window");
  const std::string l4 = "plan_llama_4_scout_17b_16e_instruct_full_attention_f32";
  h = top_of(
      l4, [](auto&) {},
      [](std::int64_t m) { return 1 + 0.1 * std::log1p(static_cast<double>((m + 3) / 8192)); });
  EXPECT_EQ(h.mistake, "temperature-offset");
  h = top_of(l4, [](auto& t) { t.temperature.coefficient = 0.2; });
  EXPECT_EQ(h.mistake, "temperature-scale");
  ASSERT_TRUE(h.fit);
  EXPECT_EQ(h.fit->value, "0.2");
  h = top_of(
      l4, [](auto&) {},
      [](std::int64_t m) { return 1 + 0.1 * std::log1p(static_cast<double>(m + 1) / 8192); });
  EXPECT_EQ(h.mistake, "temperature-floor");
  // the other layer type's output: Gemma 3's full layer computed as a sliding one
  const auto& lc = catalog_case(g3);
  std::vector<golden::PlanLayerType> types;
  for (const auto& t : lc.spec.manifest.at("params").at("plan").at("types"))
    types.push_back(golden::plan_type_from_json(t, g3));
  h = top_of(g3, [&](auto& t) { t = types[0]; });
  EXPECT_EQ(h.mistake, "other-layer-type");
}

golden::ModelPlan plan_of(const Json& cfg) {
  return golden::model_plan_from_config(golden::rope_config_from_json(cfg, "c.json"), "c.json");
}

// q/k norms from the configs: Llama 4's L2 norm after RoPE on its RoPE layers only (use_qk_norm,
// default on; rms_norm_eps, default 1e-5), Gemma 3's (1 + w) and Qwen3's w before RoPE.
TEST(PlansConfig, QkNormsAreReadFromTheConfig) {
  Json l4 = {{"model_type", "llama4_text"}, {"num_attention_heads", 8},     {"head_dim", 64},
             {"num_hidden_layers", 8},      {"attention_chunk_size", 8192}, {"rope_theta", 5e5}};
  auto p = plan_of(l4);
  ASSERT_EQ(p.types.size(), 2u);
  EXPECT_EQ(p.types[0].qk_norm.kind, reference::QkNormKind::kL2);
  EXPECT_EQ(p.types[0].qk_norm.position, reference::QkNormPosition::kAfterRope);
  EXPECT_EQ(p.types[0].qk_norm.eps, 1e-5);
  EXPECT_EQ(p.types[1].qk_norm.kind, reference::QkNormKind::kNone);  // the NoPE layers
  EXPECT_NE(std::find(p.notes.begin(), p.notes.end(),
                      "use_qk_norm absent: true (HF's Llama4TextConfig default)"),
            p.notes.end());
  l4["use_qk_norm"] = false;
  EXPECT_EQ(plan_of(l4).types[0].qk_norm.kind, reference::QkNormKind::kNone);
  l4["use_qk_norm"] = 1;
  try {
    plan_of(l4);
    ADD_FAILURE() << "use_qk_norm = 1 accepted";
  } catch (const GoldenFileError& e) {
    EXPECT_NE(std::string(e.what()).find("c.json: use_qk_norm = 1: must be true or false"),
              std::string::npos)
        << e.what();
  }
  l4["use_qk_norm"] = true;
  l4["rms_norm_eps"] = 2.0;
  EXPECT_THROW(plan_of(l4), GoldenFileError);
  const Json q3 = {{"model_type", "qwen3"},
                   {"num_attention_heads", 8},
                   {"head_dim", 128},
                   {"num_hidden_layers", 4},
                   {"rms_norm_eps", 1e-6}};
  p = plan_of(q3);
  ASSERT_EQ(p.types.size(), 1u);
  EXPECT_EQ(p.types[0].qk_norm.kind, reference::QkNormKind::kRms);
  EXPECT_EQ(p.types[0].qk_norm.weight_offset, 0.0);
  EXPECT_EQ(p.types[0].qk_norm.position, reference::QkNormPosition::kBeforeRope);
  const auto g3 = golden::model_plan_from_config(
      golden::rope_config_parse(
          golden::read_json_text(golden::default_presets_dir() / "gemma-3-4b-it.json"), "g.json"),
      "g.json");
  for (const auto& t : g3.types) {
    EXPECT_EQ(t.qk_norm.kind, reference::QkNormKind::kRms) << t.name;
    EXPECT_EQ(t.qk_norm.weight_offset, 1.0) << t.name;
    EXPECT_EQ(t.qk_norm.eps, 1e-6) << t.name;
  }
  // the committed Scout preset now carries its published use_qk_norm and rms_norm_eps
  const auto scout = golden::model_plan_from_config(
      golden::rope_config_parse(golden::read_json_text(golden::default_presets_dir() /
                                                       "llama-4-scout-17b-16e-instruct.json"),
                                "s.json"),
      "s.json");
  EXPECT_EQ(scout.types[0].qk_norm.kind, reference::QkNormKind::kL2);
  EXPECT_EQ(std::count(scout.types[0].config_keys.begin(), scout.types[0].config_keys.end(),
                       "use_qk_norm"),
            1);
}

// Every plan case embeds the config its plan was read from (a preset's, or the stand-in of a
// model without one), and that config, read again, gives the case's type and layers.
TEST(PlanCase, EmbeddedConfigGivesTheCasesType) {
  int n = 0;
  for_each_golden_case("plan", [&](const golden::LoadedCase& lc, const golden::SchemeEntry&) {
    const Json& p = lc.spec.manifest.at("params");
    ASSERT_TRUE(lc.spec.manifest.contains("preset")) << lc.spec.id;
    const auto m = golden::rope_config_from_json(lc.spec.manifest.at("preset").at("config"), "x");
    const auto plan = golden::model_plan_from_config(m, "x");
    const std::string name = p.at("type").at("name").get<std::string>();
    bool found = false;
    for (std::size_t t = 0; t < plan.types.size(); ++t) {
      if (plan.types[t].name != name) continue;
      found = true;
      Json want = golden::plan_type_to_json(plan.types[t]);
      Json got = p.at("type");
      if (want.contains("scaling")) {  // a reader fills in L where the hand plan leaves it 0
        want["scaling"].erase("max_position_embeddings");
        got["scaling"].erase("max_position_embeddings");
      }
      EXPECT_EQ(got, want) << lc.spec.id;
      std::vector<int> layers;
      for (std::size_t l = 0; l < plan.layer_type.size(); ++l)
        if (plan.layer_type[l] == static_cast<int>(t)) layers.push_back(static_cast<int>(l));
      EXPECT_EQ(p.at("plan").at("layers").get<std::vector<int>>(), layers) << lc.spec.id;
    }
    EXPECT_TRUE(found) << lc.spec.id;
    ++n;
  });
  EXPECT_EQ(n, 21);
}

// params.scale is 1/sqrt(radicand) correctly rounded (1/sqrt(128): 0x1.6a09e667f3bcdp-4, where
// two double roundings give ...bcc).
TEST(PlanGolden, ScaleIsCorrectlyRounded) {
  int n128 = 0;
  for_each_golden_case("plan", [&](const golden::LoadedCase& lc, const golden::SchemeEntry&) {
    const double s = lc.spec.manifest.at("params").at("scale").get<double>();
    const double r =
        lc.spec.manifest.at("params").at("type").at("query_pre_attn_scalar") > 0
            ? lc.spec.manifest.at("params").at("type").at("query_pre_attn_scalar").get<double>()
            : lc.spec.manifest.at("params").at("head_dim").get<double>();
    const mp50 exact = mp50(1) / sqrt(mp50(r));
    EXPECT_EQ(s, static_cast<double>(exact)) << lc.spec.id;
    if (r == 128) {
      ++n128;
      EXPECT_EQ(s, 0x1.6a09e667f3bcdp-4) << lc.spec.id;
    }
  });
  EXPECT_GE(n128, 8);
}

}  // namespace
}  // namespace posenc::properties
