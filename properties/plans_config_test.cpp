// Model plans read from configs (golden/cases/model_plan.hpp): every committed preset's plan
// covers the model exactly and gives each layer the type its config says, computed here
// independently from the config keys (HF's rules, written out again below); the pre-existing
// presets are uniform and reduce to the config's one RoPE; bad plan keys name file, key, value.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "golden/cases/hf_config.hpp"
#include "golden/cases/mrope_case.hpp"
#include "golden/cases/model_plan.hpp"
#include "golden/cases/rope_case.hpp"
#include "golden/format/format.hpp"
#include "golden/format/limits.hpp"
#include "reference/common/errors.hpp"

namespace posenc::properties {
namespace {

using golden::ModelPlan;
using golden::PlanLayerType;
using golden::PlanMask;
using golden::PlanRope;
using Json = nlohmann::json;

ModelPlan plan_of(const Json& config, const std::string& source = "config.json") {
  return golden::model_plan_from_config(golden::rope_config_from_json(config, source), source);
}

// ---- the oracle: each layer's kind from the config keys, as HF's config classes derive it
// --------

struct Expected {
  std::string name;  // the attention type HF gives the layer
  bool rope = true;
  PlanMask mask = PlanMask::kCausal;
};

const Json& text_of(const Json& c) {
  return c.contains("text_config") && !c.contains("num_attention_heads") ? c.at("text_config") : c;
}

std::string model_type_of(const Json& c) {
  const Json& t = text_of(c);
  if (t.contains("model_type")) return t.at("model_type").get<std::string>();
  return c.value("model_type", "");
}

/// HF: layer i of n is "full" when i + 1 is a multiple of the pattern (Gemma 3, Cohere2).
bool every_pth_is_full(int i, int pattern) { return i % pattern == pattern - 1; }

std::vector<Expected> expected_layers(const Json& c) {
  const Json& t = text_of(c);
  const std::string mt = model_type_of(c);
  if (!t.contains("num_hidden_layers")) return {};
  const int n = t.at("num_hidden_layers").get<int>();
  std::vector<Expected> v(static_cast<std::size_t>(n));
  const bool llama4 = mt == "llama4" || mt == "llama4_text";
  for (int i = 0; i < n; ++i) {
    Expected& e = v[i];
    if (llama4) {
      const bool listed = t.contains("no_rope_layers") && !t.at("no_rope_layers").empty();
      e.rope = listed ? t.at("no_rope_layers")[i].get<int>() == 1 : i % 4 != 3;
      e.name = e.rope ? "chunked_attention" : "full_attention";
    } else if (t.contains("layer_types") && !t.at("layer_types").is_null()) {
      e.name = t.at("layer_types")[i].get<std::string>();
    } else if (mt == "gemma2") {
      e.name = i % 2 == 0 ? "sliding_attention" : "full_attention";
    } else if (mt == "gemma3" || mt == "gemma3_text" || mt == "cohere2") {
      const int p = t.value("sliding_window_pattern", mt == "cohere2" ? 4 : 6);
      e.name = every_pth_is_full(i, p) ? "full_attention" : "sliding_attention";
    } else if ((mt == "mistral" || mt == "mixtral" || mt == "ministral3") &&
               t.contains("sliding_window") && !t.at("sliding_window").is_null()) {
      e.name = "sliding_attention";  // HF's Mistral attention windows every layer
    } else {
      e.name = "full_attention";
    }
    if (llama4 && t.contains("layer_types")) e.name = t.at("layer_types")[i].get<std::string>();
    if (mt == "cohere2") e.rope = e.name == "sliding_attention";
    e.mask = e.name == "sliding_attention"   ? PlanMask::kSliding
             : e.name == "chunked_attention" ? PlanMask::kChunked
                                             : PlanMask::kCausal;
  }
  return v;
}

/// The plan gives every layer the expected kind; returns the number of distinct kinds.
std::size_t expect_layers_match(const ModelPlan& p, const Json& config, const std::string& what) {
  const std::vector<Expected> e = expected_layers(config);
  EXPECT_EQ(p.layer_type.size(), e.size()) << what << ": one entry per num_hidden_layers";
  std::set<std::pair<std::string, bool>> kinds;
  for (std::size_t i = 0; i < std::min(e.size(), p.layer_type.size()); ++i) {
    const PlanLayerType& t = p.types.at(p.layer_type[i]);
    const bool named = t.name == e[i].name || t.name == e[i].name + (e[i].rope ? "_rope" : "_nope");
    EXPECT_TRUE(named) << what << " layer " << i << ": type " << t.name << ", config says "
                       << e[i].name;
    EXPECT_EQ(t.rope != PlanRope::kNone, e[i].rope) << what << " layer " << i;
    EXPECT_EQ(t.mask, e[i].mask) << what << " layer " << i;
    kinds.insert({e[i].name, e[i].rope});
  }
  if (!e.empty()) {
    EXPECT_EQ(p.types.size(), kinds.size()) << what << ": one type per distinct kind";
  }
  return kinds.size();
}

// ---- synthetic configs of each family: the rules and the per-type values ------------------------

Json gemma2_config() {
  return Json::parse(R"({"model_type": "gemma2", "num_hidden_layers": 42, "num_attention_heads": 16,
    "num_key_value_heads": 8, "head_dim": 256, "hidden_size": 3584, "max_position_embeddings": 8192,
    "rope_theta": 10000.0, "sliding_window": 4096, "query_pre_attn_scalar": 256,
    "attn_logit_softcapping": 50.0})");
}

Json gemma3_v4_config() {  // the multimodal form: the text model nested in text_config
  return Json::parse(R"({"model_type": "gemma3", "text_config": {"model_type": "gemma3_text",
    "num_hidden_layers": 34, "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256,
    "hidden_size": 2560, "max_position_embeddings": 131072, "rope_theta": 1000000.0,
    "rope_local_base_freq": 10000.0, "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
    "sliding_window": 1024, "sliding_window_pattern": 6, "query_pre_attn_scalar": 256},
    "vision_config": {"model_type": "siglip_vision_model"}})");
}

TEST(PlansConfig, Gemma2AlternatesFromLayerZero) {
  const Json c = gemma2_config();
  const ModelPlan p = plan_of(c);
  EXPECT_EQ(expect_layers_match(p, c, "gemma2"), 2u);
  ASSERT_EQ(p.types.size(), 2u);
  EXPECT_EQ(p.types[0].name, "sliding_attention");  // layer 0 is sliding
  for (const PlanLayerType& t : p.types) {
    EXPECT_EQ(t.rope, PlanRope::kRope);
    EXPECT_EQ(t.params.base, c.at("rope_theta").get<double>()) << t.name;
    EXPECT_EQ(t.scaling.type, reference::RopeScalingType::kNone) << t.name;
    EXPECT_EQ(t.query_pre_attn_scalar, c.at("query_pre_attn_scalar").get<double>()) << t.name;
    EXPECT_EQ(t.logit_softcap, c.at("attn_logit_softcapping").get<double>()) << t.name;
  }
  EXPECT_EQ(p.types[0].window, c.at("sliding_window").get<std::int64_t>());
  EXPECT_EQ(p.types[1].window, 0);
}

TEST(PlansConfig, Gemma3SlidingLayersUnscaledLocalBase) {
  const Json c = gemma3_v4_config();
  const Json& t = c.at("text_config");
  const ModelPlan p = plan_of(c);
  EXPECT_EQ(expect_layers_match(p, c, "gemma3"), 2u);
  ASSERT_EQ(p.types.size(), 2u);
  const PlanLayerType& local = p.types[0];
  const PlanLayerType& global = p.types[1];
  EXPECT_EQ(local.name, "sliding_attention");
  EXPECT_EQ(global.name, "full_attention");
  EXPECT_EQ(local.params.base, t.at("rope_local_base_freq").get<double>());
  EXPECT_EQ(local.scaling.type, reference::RopeScalingType::kNone);
  EXPECT_EQ(global.params.base, t.at("rope_theta").get<double>());
  EXPECT_EQ(global.scaling.type, reference::RopeScalingType::kLinear);
  EXPECT_EQ(global.scaling.factor, t.at("rope_scaling").at("factor").get<double>());
  EXPECT_EQ(local.window, t.at("sliding_window").get<std::int64_t>());
  EXPECT_EQ(global.mask, PlanMask::kCausal);
  // The config's one RoPE (what a uniform reader would use) is the global one.
  EXPECT_EQ(p.model.params.base, global.params.base);
  EXPECT_EQ(p.model.text_key, "text_config");
}

TEST(PlansConfig, V5LayerTypesAndPerTypeRopeParameters) {
  Json c = gemma3_v4_config().at("text_config");
  c.erase("rope_theta");
  c.erase("rope_local_base_freq");
  c.erase("rope_scaling");
  c.erase("sliding_window_pattern");
  c["rope_parameters"] = {
      {"full_attention", {{"rope_type", "linear"}, {"factor", 8.0}, {"rope_theta", 1e6}}},
      {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 1e4}}}};
  Json types = Json::array();
  for (int i = 0; i < 34; ++i) types.push_back(i % 3 == 1 ? "full_attention" : "sliding_attention");
  c["layer_types"] = types;  // not Gemma 3's pattern: the list wins
  const ModelPlan p = plan_of(c);
  expect_layers_match(p, c, "v5");
  ASSERT_EQ(p.types.size(), 2u);
  for (const PlanLayerType& t : p.types) {
    const Json& block = c.at("rope_parameters").at(t.name);
    EXPECT_EQ(t.params.base, block.at("rope_theta").get<double>()) << t.name;
    EXPECT_EQ(reference::rope_scaling_type_name(t.scaling.type),
              block.at("rope_type").get<std::string>())
        << t.name;
  }
  // A flat v5 block's rope_theta is the global base; Gemma 3's class default does not override it.
  Json flat = gemma3_v4_config().at("text_config");
  flat.erase("rope_theta");
  flat.erase("rope_scaling");
  flat["rope_parameters"] = {{"rope_type", "linear"}, {"factor", 8.0}, {"rope_theta", 2e6}};
  const ModelPlan pf = plan_of(flat);
  EXPECT_EQ(pf.types.at(pf.layer_type[5]).params.base,
            flat["rope_parameters"]["rope_theta"].get<double>());
  // Any model: a Qwen2-style config with a layer_types list.
  Json q = Json::parse(R"({"model_type": "qwen2", "num_hidden_layers": 4, "num_attention_heads": 4,
    "hidden_size": 256, "rope_theta": 1000000.0, "sliding_window": 32768,
    "layer_types": ["full_attention", "full_attention", "sliding_attention", "sliding_attention"]})");
  const ModelPlan pq = plan_of(q);
  EXPECT_EQ(expect_layers_match(pq, q, "qwen2"), 2u);
  EXPECT_EQ(pq.types.at(pq.layer_type[3]).window, 32768);
}

TEST(PlansConfig, TypeModelsCarryEachTypesRope) {
  const Json c = gemma3_v4_config();
  const ModelPlan p = plan_of(c);
  for (std::size_t k = 0; k < p.types.size(); ++k) {
    const auto m = golden::plan_type_model(p, k);
    EXPECT_EQ(m.params.base, p.types[k].params.base) << p.types[k].name;
    EXPECT_EQ(golden::rope_scaling_to_json(m.scaling),
              golden::rope_scaling_to_json(p.types[k].scaling));
  }
  EXPECT_THROW(golden::plan_type_model(p, p.types.size()), InvalidArgument);
  Json co =
      Json::parse(R"({"model_type": "cohere2", "num_hidden_layers": 4, "num_attention_heads": 4,
    "hidden_size": 256, "sliding_window": 16})");
  const ModelPlan pc = plan_of(co);
  ASSERT_EQ(pc.types.size(), 2u);
  EXPECT_THROW(golden::plan_type_model(pc, 1), InvalidArgument);  // the NoPE global layers
}

TEST(PlansConfig, PlanJsonListsEveryLayer) {
  const Json c = gemma3_v4_config();
  const ModelPlan p = plan_of(c);
  const Json j = golden::model_plan_to_json(p);
  const std::vector<Expected> e = expected_layers(c);
  ASSERT_EQ(j.at("layers").size(), e.size());
  for (std::size_t i = 0; i < e.size(); ++i) {
    EXPECT_EQ(j.at("layers")[i].at("index"), i);
    EXPECT_EQ(j.at("layers")[i].at("type"), e[i].name);
  }
  std::size_t listed = 0;
  for (const auto& [name, t] : j.at("types").items()) listed += t.at("layers").size();
  EXPECT_EQ(listed, e.size());
  EXPECT_FALSE(j.at("uniform").get<bool>());
}

TEST(PlansConfig, Llama4Cohere2MistralDeepSeek) {
  {  // Llama 4: no_rope_layers (1 = RoPE), chunked RoPE layers, temperature on the NoPE layers
    const Json c =
        Json::parse(R"({"model_type": "llama4", "text_config": {"model_type": "llama4_text",
      "num_hidden_layers": 8, "num_attention_heads": 40, "num_key_value_heads": 8, "head_dim": 128,
      "hidden_size": 5120, "rope_theta": 500000.0, "attention_chunk_size": 8192, "floor_scale": 8192,
      "attn_scale": 0.1, "attn_temperature_tuning": 4, "no_rope_layers": [1, 1, 1, 0, 1, 0, 1, 0]}})");
    const ModelPlan p = plan_of(c);
    EXPECT_EQ(expect_layers_match(p, c, "llama4"), 2u);
    for (const PlanLayerType& t : p.types) {
      EXPECT_EQ(t.params.layout, reference::RopeLayout::kInterleaved) << t.name;
      if (t.rope == PlanRope::kNone) {
        ASSERT_TRUE(t.has_temperature) << t.name;
        EXPECT_EQ(t.temperature.rule, reference::QueryTemperatureRule::kLlama4);
        EXPECT_EQ(t.temperature.length, c["text_config"]["floor_scale"].get<std::int64_t>());
        EXPECT_EQ(t.temperature.coefficient, c["text_config"]["attn_scale"].get<double>());
      } else {
        EXPECT_FALSE(t.has_temperature) << t.name;
        EXPECT_EQ(t.chunk, c["text_config"]["attention_chunk_size"].get<std::int64_t>());
      }
    }
    Json empty = c;  // no_rope_layers [] (Scout's): every 4th layer NoPE, as HF derives it
    empty["text_config"]["no_rope_layers"] = Json::array();
    expect_layers_match(plan_of(empty), empty, "llama4 []");
  }
  {  // Cohere2: RoPE on sliding layers only, global layers NoPE
    const Json c =
        Json::parse(R"({"model_type": "cohere2", "num_hidden_layers": 8, "num_attention_heads": 32,
      "num_key_value_heads": 8, "hidden_size": 4096, "rope_theta": 50000, "sliding_window": 4096,
      "sliding_window_pattern": 4})");
    const ModelPlan p = plan_of(c);
    EXPECT_EQ(expect_layers_match(p, c, "cohere2"), 2u);
    EXPECT_EQ(p.model.params.layout, reference::RopeLayout::kInterleaved);
  }
  {  // Mistral 3: llama_4_scaling_beta in the yarn block, p / L0 on every layer
    const Json c =
        Json::parse(R"({"model_type": "mistral3", "text_config": {"model_type": "ministral3",
      "num_hidden_layers": 4, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
      "hidden_size": 5120, "rope_parameters": {"beta_fast": 32.0, "beta_slow": 1.0, "factor": 48.0,
      "llama_4_scaling_beta": 0.1, "mscale": 1.0, "mscale_all_dim": 1.0,
      "original_max_position_embeddings": 8192, "rope_theta": 100000000.0, "rope_type": "yarn",
      "type": "yarn"}}})");
    const ModelPlan p = plan_of(c);
    EXPECT_EQ(expect_layers_match(p, c, "mistral3"), 1u);
    ASSERT_TRUE(p.types[0].has_temperature);
    EXPECT_EQ(p.types[0].temperature.rule, reference::QueryTemperatureRule::kMistral);
    const Json& r = c["text_config"]["rope_parameters"];
    EXPECT_EQ(p.types[0].temperature.length,
              r["original_max_position_embeddings"].get<std::int64_t>());
    EXPECT_EQ(p.types[0].temperature.coefficient, r["llama_4_scaling_beta"].get<double>());
  }
  {  // Mistral 7B v0.1 style: sliding_window on every layer, uniform
    const Json c =
        Json::parse(R"({"model_type": "mistral", "num_hidden_layers": 4, "num_attention_heads": 32,
      "num_key_value_heads": 8, "hidden_size": 4096, "rope_theta": 10000.0, "sliding_window": 4096})");
    const ModelPlan p = plan_of(c);
    EXPECT_EQ(expect_layers_match(p, c, "mistral"), 1u);
    EXPECT_EQ(p.types[0].window, c.at("sliding_window").get<std::int64_t>());
  }
  {  // DeepSeek-V3: uniform, RoPE on the qk_rope_head_dim sub-head
    const auto m = golden::rope_config_read(golden::default_presets_dir() / "deepseek-v3.json");
    const ModelPlan p = golden::model_plan_from_config(m, "deepseek-v3.json");
    ASSERT_TRUE(p.uniform());
    EXPECT_EQ(p.types[0].mla_rope_dim, m.config.at("qk_rope_head_dim").get<int>());
  }
}

// ---- every committed preset
// -------------------------------------------------------------------------

std::vector<std::filesystem::path> all_presets() {
  std::vector<std::filesystem::path> v;
  for (const auto& e : std::filesystem::directory_iterator(golden::default_presets_dir())) {
    if (e.path().extension() == ".json" &&
        !golden::mrope_config_is_vl(Json::parse(golden::read_json_text(e.path())))) {
      v.push_back(e.path());
    }
  }
  std::sort(v.begin(), v.end());
  return v;
}

/// The per-type values a preset's keys fix, checked against the config directly.
void expect_type_values(const ModelPlan& p, const Json& c, const std::string& what) {
  const Json& t = text_of(c);
  const std::string mt = model_type_of(c);
  const bool per_type =
      t.contains("rope_parameters") && t.at("rope_parameters").contains("full_attention");
  for (const PlanLayerType& type : p.types) {
    const std::string w = what + " " + type.name;
    if (type.mask == PlanMask::kSliding) {
      EXPECT_EQ(type.window, t.at("sliding_window").get<std::int64_t>()) << w;
    }
    if (per_type && type.rope != PlanRope::kNone) {
      const Json& block = t.at("rope_parameters").at(type.name);
      EXPECT_EQ(type.params.base, block.at("rope_theta").get<double>()) << w;
      EXPECT_EQ(type.rope == PlanRope::kProportional,
                block.value("rope_type", "") == "proportional")
          << w;
      if (type.rope == PlanRope::kProportional) {
        EXPECT_EQ(type.proportional.proportion, block.at("partial_rotary_factor").get<double>())
            << w;
        EXPECT_EQ(type.params.head_dim, t.value("global_head_dim", t.value("head_dim", 0))) << w;
      }
    }
    if (mt == "gemma3_text" && type.name == "sliding_attention") {
      EXPECT_EQ(type.scaling.type, reference::RopeScalingType::kNone)
          << w << ": sliding layers are unscaled";
      EXPECT_EQ(type.params.base, t.value("rope_local_base_freq", 10000.0)) << w;
    }
    if (mt == "gemma3_text" && type.name == "full_attention" && t.contains("rope_scaling")) {
      EXPECT_EQ(type.scaling.factor, t.at("rope_scaling").at("factor").get<double>()) << w;
    }
    EXPECT_EQ(type.sinks, mt == "gpt_oss") << w;
    if (mt == "llama4_text") {  // HF Llama4TextConfig defaults: tuning on, floor_scale 8192,
                                // attn_scale 0.1
      EXPECT_EQ(type.params.layout, reference::RopeLayout::kInterleaved) << w;
      EXPECT_EQ(type.has_temperature, type.rope == PlanRope::kNone) << w;
      if (type.has_temperature) {
        EXPECT_EQ(type.temperature.length, t.value("floor_scale", std::int64_t{8192})) << w;
        EXPECT_EQ(type.temperature.coefficient, t.value("attn_scale", 0.1)) << w;
      } else {
        EXPECT_EQ(type.chunk, t.at("attention_chunk_size").get<std::int64_t>()) << w;
      }
    }
    if (mt == "gpt_oss") {
      EXPECT_EQ(type.scaling.truncate, t.at("rope_scaling").at("truncate").get<bool>()) << w;
    }
  }
}

TEST(PlansConfig, EveryPresetPlanCoversTheModel) {
  int uniform = 0, planned = 0;
  for (const auto& f : all_presets()) {
    const Json c = Json::parse(golden::read_json_text(f));
    const auto m = golden::rope_config_read(f);
    const ModelPlan p = golden::model_plan_from_config(m, f.string());
    const std::string what = f.filename().string();
    const std::size_t kinds = expect_layers_match(p, c, what);
    expect_type_values(p, c, what);
    if (!text_of(c).contains("num_hidden_layers")) {
      // The pre-existing presets (RoPE keys only): one type, today's single RoPE.
      ++uniform;
      ASSERT_TRUE(p.uniform()) << what;
      EXPECT_TRUE(p.layer_type.empty()) << what;
      EXPECT_EQ(p.types[0].params.base, m.params.base) << what;
      EXPECT_EQ(p.types[0].params.rotary_dim, m.params.rotary_dim) << what;
      EXPECT_EQ(golden::rope_scaling_to_json(p.types[0].scaling),
                golden::rope_scaling_to_json(m.scaling))
          << what;
    } else {
      ++planned;
      EXPECT_GE(kinds, 2u) << what << ": a plan preset has per-layer types";
      EXPECT_EQ(p.layer_type.size(), text_of(c).at("num_hidden_layers").get<std::size_t>()) << what;
    }
  }
  EXPECT_GE(uniform, 19);
  // A uniform plan's type model is the config's model: today's single case.
  const auto l31 = golden::rope_config_read(golden::default_presets_dir() / "llama-3.1-8b.json");
  const auto same =
      golden::plan_type_model(golden::model_plan_from_config(l31, "llama-3.1-8b.json"), 0);
  EXPECT_EQ(golden::rope_config_to_json(same), golden::rope_config_to_json(l31));
  EXPECT_GE(planned, 6);
}

// ---- bad plan keys: GoldenFileError naming the file, the key and the value
// -------------------------

void expect_bad(const Json& c, const std::string& key, const std::string& value) {
  try {
    plan_of(c, "bad_config.json");
    ADD_FAILURE() << "accepted: " << c.dump();
  } catch (const GoldenFileError& e) {
    const std::string w = e.what();
    EXPECT_NE(w.find("bad_config.json"), std::string::npos) << w;
    EXPECT_NE(w.find(key), std::string::npos) << w;
    EXPECT_NE(w.find(value), std::string::npos) << w;
  }
}

TEST(PlansConfig, BadPlanKeysNameFileKeyAndValue) {
  Json c = gemma3_v4_config();
  Json& t = c.at("text_config");
  {
    Json b = c;
    b["text_config"]["sliding_window_pattern"] = 0;
    expect_bad(b, "text_config.sliding_window_pattern", "= 0");
  }
  {
    Json b = c;
    b["text_config"]["sliding_window"] = -1;
    expect_bad(b, "text_config.sliding_window", "= -1");
  }
  {
    Json b = c;
    b["text_config"]["rope_local_base_freq"] = 0.5;
    expect_bad(b, "text_config.rope_local_base_freq", "0.5");
  }
  {
    Json b = c;
    b["text_config"].erase("num_hidden_layers");
    expect_bad(b, "num_hidden_layers", "missing");
  }
  {
    Json b = c;
    b["text_config"]["layer_types"] = Json::array({"full_attention", "sliding_attention"});
    expect_bad(b, "text_config.layer_types", "2 entries");
  }
  {
    Json b = c;
    Json types = Json::array();
    for (int i = 0; i < t.at("num_hidden_layers").get<int>(); ++i)
      types.push_back("full_attention");
    types[5] = "linear_attention";
    b["text_config"]["layer_types"] = types;
    expect_bad(b, "text_config.layer_types[5]", "\"linear_attention\"");
  }
  {
    Json b = gemma2_config();
    b["query_pre_attn_scalar"] = -256;
    expect_bad(b, "query_pre_attn_scalar", "-256");
  }
  {
    Json b = gemma2_config();
    b.erase("sliding_window");
    expect_bad(b, "sliding_window", "sliding_attention");
  }
  {  // a per-type block keeps the reader's strict keys
    Json b = t;
    b.erase("rope_scaling");
    b["rope_parameters"] = {
        {"full_attention", {{"rope_type", "default"}, {"rope_theta", 1e6}}},
        {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 1e4}, {"fator", 8}}}};
    expect_bad(b, "rope_parameters.sliding_attention", "\"fator\"");
  }
}

}  // namespace
}  // namespace posenc::properties
