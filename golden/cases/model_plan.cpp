#include "golden/cases/model_plan.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>
#include <utility>

#include "golden/cases/config_read.hpp"
#include "golden/cases/rope_case.hpp"
#include "reference/common/mutant.hpp"
#include "reference/common/errors.hpp"

namespace posenc::golden {

using namespace config_read;  // NOLINT: the checked reads shared with hf_config.cpp

namespace {

constexpr IntRange kLayers{1, 65536, "an integer in [1, 65536]"};
constexpr IntRange kPattern{1, 65536, "an integer in [1, 65536]"};
constexpr IntRange kWindow{1, optimized::kRopeMaxPosition, "an integer in [1, 268435456]"};
constexpr Range kScalar{0.0, 1e6, true, "a number in (0, 1e6]"};
constexpr Range kSoftcap{0.0, 1e6, true, "a number in (0, 1e6]"};
constexpr Range kAttnScale{0.0, 100.0, false, "a number in [0, 100]"};
constexpr Range kNormEps{0.0, 1.0, false, "a number in [0, 1]"};

/// The model families whose per-layer rule posenc knows (docs/own-model.md, "Model plans").
enum class Family { kGeneric, kGemma2, kGemma3, kGemma4, kCohere2, kLlama4, kGptOss, kDeepSeek };

Family family_of(const std::string& t) {
  if (t == "gemma2") return Family::kGemma2;
  if (t == "gemma3" || t == "gemma3_text") return Family::kGemma3;
  if (t == "gemma4" || t == "gemma4_text") return Family::kGemma4;
  if (t == "cohere2") return Family::kCohere2;
  if (t == "llama4" || t == "llama4_text") return Family::kLlama4;
  if (t == "gpt_oss") return Family::kGptOss;
  if (t == "deepseek_v2" || t == "deepseek_v3") return Family::kDeepSeek;
  return Family::kGeneric;
}

bool is_gemma(Family f) {
  return f == Family::kGemma2 || f == Family::kGemma3 || f == Family::kGemma4;
}

const std::set<std::string> kKnownLayerTypes = {"full_attention", "sliding_attention",
                                                "chunked_attention"};

/// One layer as the config describes it: its attention type and whether it rotates.
struct LayerKind {
  std::string name;
  bool rope = true;
  bool operator<(const LayerKind& o) const {
    return std::tie(name, rope) < std::tie(o.name, o.rope);
  }
};

/// Reads a plan from one config (see the header for the contract).
class PlanReader {
 public:
  PlanReader(const RopeModelConfig& m, const std::string& source)
      : m_(m),
        t_(m.text_with_defaults()),
        x_{source, m.raw_numbers, m.text_key.empty() ? std::string() : m.text_key + "."},
        source_(source) {
    std::string mt = x_.text(t_, "model_type", "model_type");
    if (mt.empty()) mt = m.model_type;
    text_type_ = mt;
    family_ = family_of(mt);
    if (family_ == Family::kGeneric) family_ = family_of(m.model_type);
  }

  ModelPlan read() {
    plan_.model = m_;
    layers_ = read_layer_count();
    const std::vector<LayerKind> kinds = read_kinds();
    name_types(kinds);
    return std::move(plan_);
  }

 private:
  bool has(const char* key) const { return t_.contains(key) && !t_.at(key).is_null(); }
  void note(std::string s) { plan_.notes.push_back(std::move(s)); }

  /// num_hidden_layers (0 when absent: allowed for a uniform plan only).
  int read_layer_count() {
    if (!has("num_hidden_layers")) return 0;
    return static_cast<int>(x_.integer(t_.at("num_hidden_layers"), "num_hidden_layers", kLayers));
  }
  int need_layers(const std::string& why) const {
    if (layers_ == 0) x_.fail("missing \"num_hidden_layers\": " + why + " needs the layer count");
    return layers_;
  }

  /// The layer types of `layer_types` (v5, any model).
  std::vector<std::string> from_layer_types() {
    const Json& v = t_.at("layer_types");
    if (!v.is_array()) x_.range(v, "layer_types", "a list of layer type names");
    const int n = need_layers("layer_types");
    if (v.size() != static_cast<std::size_t>(n)) {
      x_.fail(x_.full("layer_types") + " has " + std::to_string(v.size()) +
              " entries: must have num_hidden_layers = " + std::to_string(n));
    }
    std::vector<std::string> names;
    for (std::size_t i = 0; i < v.size(); ++i) {
      const std::string key = "layer_types[" + std::to_string(i) + "]";
      if (!v[i].is_string() || !kKnownLayerTypes.count(v[i].get<std::string>())) {
        x_.range(v[i], key, "\"full_attention\", \"sliding_attention\" or \"chunked_attention\"");
      }
      names.push_back(v[i].get<std::string>());
    }
    keys_.push_back("layer_types");
    return names;
  }

  /// HF's v4 rule: layer i is full attention when (i + 1) % pattern == 0, else sliding.
  std::vector<std::string> from_pattern(std::int64_t fallback, const char* why, bool keyed = true) {
    std::int64_t pattern = fallback;
    if (!keyed) {
      if (has("sliding_window_pattern"))
        note(std::string("sliding_window_pattern ignored: ") + why);
    } else if (has("sliding_window_pattern")) {
      pattern = x_.integer(t_.at("sliding_window_pattern"), "sliding_window_pattern", kPattern);
      keys_.push_back("sliding_window_pattern");
    } else {
      note(std::string("sliding_window_pattern absent: ") + std::to_string(fallback) + " (" + why +
           ")");
    }
    const int n = need_layers(keyed ? "sliding_window_pattern" : why);
    std::vector<std::string> names;
    for (int i = 0; i < n; ++i) {
      const bool full = (i + 1) % pattern == 0;
      names.push_back(full ? "full_attention" : "sliding_attention");
    }
    return names;
  }

  /// Llama 4: no_rope_layers[i] = 1 rotates layer i (the name is HF's, the meaning inverted), else
  /// every no_rope_layer_interval-th layer is NoPE. Returns the rotation flags.
  std::vector<bool> llama4_rope_flags() {
    const int n = need_layers("Llama 4's no_rope_layers");
    std::vector<bool> rope(static_cast<std::size_t>(n), true);
    if (has("no_rope_layers") &&
        !(t_.at("no_rope_layers").is_array() && t_.at("no_rope_layers").empty())) {
      const Json& v = t_.at("no_rope_layers");
      if (!v.is_array() || v.size() < static_cast<std::size_t>(n)) {
        x_.range(v, "no_rope_layers",
                 "a list of at least num_hidden_layers = " + std::to_string(n) + " 0/1 flags");
      }
      for (int i = 0; i < n; ++i) {
        const std::string key = "no_rope_layers[" + std::to_string(i) + "]";
        rope[i] = x_.integer(v[i], key, IntRange{0, 1, "0 (NoPE) or 1 (RoPE)"}) == 1;
      }
      keys_.push_back("no_rope_layers");
      return rope;
    }
    std::int64_t interval = 4;
    if (has("no_rope_layer_interval")) {
      interval = x_.integer(t_.at("no_rope_layer_interval"), "no_rope_layer_interval", kPattern);
      keys_.push_back("no_rope_layer_interval");
    } else {
      note(
          "no_rope_layers absent: every 4th layer is NoPE (HF's Llama4TextConfig "
          "no_rope_layer_interval = 4)");
    }
    for (int i = 0; i < n; ++i) rope[i] = (i + 1) % interval != 0;
    return rope;
  }

  /// Every layer's kind, by family (docs/own-model.md).
  std::vector<LayerKind> read_kinds() {
    std::vector<std::string> names;
    std::vector<bool> rope;
    if (family_ == Family::kLlama4) {
      rope = llama4_rope_flags();
      if (has("layer_types")) {
        names = from_layer_types();
      } else {  // HF's Llama4TextConfig: chunked attention on the RoPE layers
        for (const bool r : rope) names.push_back(r ? "chunked_attention" : "full_attention");
      }
    } else if (has("layer_types")) {
      names = from_layer_types();
    } else if (family_ == Family::kGemma2) {
      names = from_pattern(2, "HF's Gemma 2 alternates sliding and full layers", false);
    } else if (family_ == Family::kGemma3 || family_ == Family::kGemma4) {
      names = from_pattern(6, "HF's Gemma3TextConfig default: 5 sliding : 1 full");
    } else if (family_ == Family::kCohere2) {
      names = from_pattern(4, "HF's Cohere2Config default: 3 sliding : 1 full");
    } else {
      // HF's Mistral, Mixtral and Ministral 3 attention passes sliding_window to every layer.
      const bool slides =
          (text_type_ == "mistral" || text_type_ == "mixtral" || text_type_ == "ministral3") &&
          has("sliding_window");
      if (slides) {
        uniform_name_ = "sliding_attention";
        note("model_type " + text_type_ +
             ": every layer slides (HF passes sliding_window to each attention)");
      }
      names.assign(static_cast<std::size_t>(layers_), uniform_name_);
      if (layers_ == 0) note("num_hidden_layers absent: a uniform plan without a layer list");
    }
    if (rope.empty()) {
      rope.assign(names.size(), true);
      // Cohere2 rotates its sliding layers only (HF Cohere2Attention: RoPE iff sliding_window).
      if (family_ == Family::kCohere2) {
        for (std::size_t i = 0; i < names.size(); ++i) rope[i] = names[i] == "sliding_attention";
      }
    }
    std::vector<LayerKind> kinds;
    for (std::size_t i = 0; i < names.size(); ++i)
      kinds.push_back({names[i], static_cast<bool>(rope[i])});
    if (kinds.empty()) kinds.push_back({uniform_name_, true});  // no layer count: one type
    return kinds;
  }

  /// The distinct kinds in order of first appearance, each one PlanLayerType; a name that
  /// comes both with and without RoPE gets "_rope" / "_nope".
  void name_types(const std::vector<LayerKind>& kinds) {
    std::map<std::string, std::set<bool>> ropes;
    for (const LayerKind& k : kinds) ropes[k.name].insert(k.rope);
    // A per-type rope_parameters block names a layer type the model has: a block for a type no
    // layer has is a typo or a config of another model, never silently ignored.
    if (const Json* rp = has("rope_parameters") ? &t_.at("rope_parameters") : nullptr;
        rp && rp->is_object() && !rp->contains("rope_type") && !rp->contains("type") && layers_ > 0) {
      for (const auto& [name, block] : rp->items()) {
        if (!ropes.count(name)) {
          std::string known;
          for (const auto& [n, r] : ropes) known += (known.empty() ? "" : ", ") + n;
          x_.fail("\"rope_parameters\" has a block for layer type \"" + name +
                  "\", which no layer of this model has (its layer types: " + known + ")");
        }
      }
    }
    std::map<LayerKind, int> index;
    for (const LayerKind& k : kinds) {
      if (!index.count(k)) {
        index[k] = static_cast<int>(plan_.types.size());
        std::string name = k.name;
        if (ropes[k.name].size() > 1) name += k.rope ? "_rope" : "_nope";
        plan_.types.push_back(make_type(k, name));
      }
      if (layers_ > 0) plan_.layer_type.push_back(index[k]);
    }
  }

  /// The RoPE of a rotating layer type: its per-type block (v5), Gemma 3's local base (v4), or
  /// the config's one RoPE.
  void read_rope(const LayerKind& k, PlanLayerType& pt) {
    int head_dim = m_.params.head_dim;
    if (family_ == Family::kGemma4 && k.name == "full_attention" && has("global_head_dim")) {
      head_dim = static_cast<int>(x_.integer(t_.at("global_head_dim"), "global_head_dim",
                                             IntRange{1, 16384, "an integer in [1, 16384]"}));
      pt.config_keys.push_back("global_head_dim");
    }
    const Json* rp = has("rope_parameters") ? &t_.at("rope_parameters") : nullptr;
    const bool per_type = rp && rp->is_object() && !rp->contains("rope_type") &&
                          !rp->contains("type") && !rp->empty();
    if (per_type) {
      if (!rp->contains(k.name) || rp->at(k.name).is_null()) {
        x_.fail("\"rope_parameters\" has no block for layer type \"" + k.name + "\"");
      }
      const std::string key = "rope_parameters." + k.name;
      RopeBlock b = rope_block_read(m_, rp->at(k.name), key, head_dim, source_);
      pt.params = b.params;
      pt.scaling = b.scaling;
      if (b.proportional) {
        pt.rope = PlanRope::kProportional;
        pt.proportional = b.proportion;
      }
      read_mistral_temperature(b.llama_4_scaling_beta, pt);
      pt.config_keys.push_back(key);
      for (auto& n : b.notes) note(k.name + ": " + n);
      return;
    }
    pt.params = m_.params;
    pt.scaling = m_.scaling;
    if (!m_.rope_key.empty()) pt.config_keys.push_back(m_.rope_key);
    if (family_ == Family::kGemma3 && k.name == "sliding_attention") {
      // HF Gemma 3: the sliding layers rotate with rope_local_base_freq, never scaled.
      pt.scaling = reference::RopeScaling{};
      pt.scaling.max_position = m_.max_position;
      if (has("rope_local_base_freq")) {
        pt.params.base = x_.number(t_.at("rope_local_base_freq"), "rope_local_base_freq", kBase);
        pt.config_keys.push_back("rope_local_base_freq");
      } else {
        pt.params.base = 10000.0;
        note(
            "sliding_attention: rope_local_base_freq absent: 10000 (HF's Gemma3TextConfig "
            "default)");
      }
      pt.config_keys.erase(std::remove(pt.config_keys.begin(), pt.config_keys.end(), m_.rope_key),
                           pt.config_keys.end());
    }
    read_mistral_temperature(m_.llama_4_scaling_beta, pt);
  }

  /// Mistral's llama_4_scaling_beta: 1 + beta ln(1 + floor(p / L0)) on every layer.
  void read_mistral_temperature(double beta, PlanLayerType& pt) {
    if (beta < 0) return;
    if (pt.scaling.original_max_position <= 0) {
      x_.fail("llama_4_scaling_beta needs original_max_position_embeddings in its rope block");
    }
    pt.has_temperature = true;
    pt.temperature = {reference::QueryTemperatureRule::kMistral, pt.scaling.original_max_position,
                      beta};
  }

  /// Llama 4's temperature on NoPE layers: attn_temperature_tuning, floor_scale, attn_scale.
  void read_llama4_temperature(PlanLayerType& pt) {
    bool on = true;
    if (has("attn_temperature_tuning")) {
      const Json& v = t_.at("attn_temperature_tuning");
      if (v.is_boolean()) {
        on = v.get<bool>();
      } else if (v.is_number_integer() || v.is_number_unsigned()) {  // Python truthiness of an int
        on = x_.integer(v, "attn_temperature_tuning",
                        IntRange{0, 1 << 30, "true, false or an integer >= 0"}) != 0;
      } else {
        x_.range(v, "attn_temperature_tuning", "true, false or an integer >= 0");
      }
      pt.config_keys.push_back("attn_temperature_tuning");
    } else {
      note("attn_temperature_tuning absent: on (HF's Llama4TextConfig default)");
    }
    if (!on) return;
    pt.has_temperature = true;
    pt.temperature.rule = reference::QueryTemperatureRule::kLlama4;
    pt.temperature.length = 8192;
    pt.temperature.coefficient = 0.1;
    if (has("floor_scale")) {
      pt.temperature.length = x_.integer(t_.at("floor_scale"), "floor_scale", kWindow);
      pt.config_keys.push_back("floor_scale");
    } else {
      note("floor_scale absent: 8192 (HF's Llama4TextConfig default)");
    }
    if (has("attn_scale")) {
      pt.temperature.coefficient = x_.number(t_.at("attn_scale"), "attn_scale", kAttnScale);
      pt.config_keys.push_back("attn_scale");
    } else {
      note("attn_scale absent: 0.1 (HF's Llama4TextConfig default)");
    }
  }

  /// rms_norm_eps, else the family's class default (noted once).
  double read_norm_eps(double fallback, const char* cls) {
    if (has("rms_norm_eps")) {
      return x_.number(t_.at("rms_norm_eps"), "rms_norm_eps", kNormEps);
    }
    if (!eps_noted_) {
      eps_noted_ = true;
      note("rms_norm_eps absent: " + Json(fallback).dump() + " (HF's " + cls + " default)");
    }
    return fallback;
  }

  /// q/k normalization (reference/qk_norm.hpp), by family: Llama 4's L2 norm after RoPE on its
  /// RoPE layers when use_qk_norm (HF Llama4TextAttention: qk_norm iff use_qk_norm and
  /// use_rope), Gemma 3's q_norm / k_norm (1 + w) before RoPE, Gemma 4's and Qwen3's (w) before
  /// RoPE; every other family has none.
  void read_qk_norm(const LayerKind& k, PlanLayerType& pt) {
    using reference::QkNormKind;
    using reference::QkNormPosition;
    reference::QkNorm& n = pt.qk_norm;
    if (POSENC_MUTANT("plan_config_qk_norm_ignored")) return;
    if (family_ == Family::kLlama4) {
      bool on = true;
      if (has("use_qk_norm")) {
        const Json& v = t_.at("use_qk_norm");
        if (!v.is_boolean()) x_.range(v, "use_qk_norm", "true or false");
        on = v.get<bool>();
        pt.config_keys.push_back("use_qk_norm");
      } else if (!qk_noted_) {
        qk_noted_ = true;
        note("use_qk_norm absent: true (HF's Llama4TextConfig default)");
      }
      if (!on || !k.rope) return;  // HF: no qk_norm on NoPE layers
      n.kind = QkNormKind::kL2;
      n.position = QkNormPosition::kAfterRope;
      n.eps = read_norm_eps(1e-5, "Llama4TextConfig");
    } else if (family_ == Family::kGemma3 || family_ == Family::kGemma4) {
      n.kind = QkNormKind::kRms;
      n.position = QkNormPosition::kBeforeRope;
      n.weight_offset = family_ == Family::kGemma3 ? 1.0 : 0.0;  // Gemma3RMSNorm: (1 + w)
      pt.v_norm = family_ == Family::kGemma4;  // HF Gemma4TextAttention: v_norm without scale
      n.eps =
          read_norm_eps(1e-6, family_ == Family::kGemma3 ? "Gemma3TextConfig" : "Gemma4TextConfig");
    } else if (text_type_ == "qwen3" || text_type_ == "qwen3_moe") {
      n.kind = QkNormKind::kRms;
      n.position = QkNormPosition::kBeforeRope;
      n.eps = read_norm_eps(1e-6, "Qwen3Config");
    } else {
      return;
    }
    if (has("rms_norm_eps")) pt.config_keys.push_back("rms_norm_eps");
  }

  void read_mask(const LayerKind& k, PlanLayerType& pt) {
    if (k.name == "sliding_attention") {
      if (!has("sliding_window")) x_.fail("layer type sliding_attention needs \"sliding_window\"");
      pt.mask = PlanMask::kSliding;
      pt.window = x_.integer(t_.at("sliding_window"), "sliding_window", kWindow);
      pt.config_keys.push_back("sliding_window");
    } else if (k.name == "chunked_attention") {
      if (!has("attention_chunk_size"))
        x_.fail("layer type chunked_attention needs \"attention_chunk_size\"");
      pt.mask = PlanMask::kChunked;
      pt.chunk = x_.integer(t_.at("attention_chunk_size"), "attention_chunk_size", kWindow);
      pt.config_keys.push_back("attention_chunk_size");
    }
  }

  /// Gemma's softmax scale and logit soft-capping (every layer).
  void read_gemma_scores(PlanLayerType& pt) {
    if (family_ == Family::kGemma4) {  // HF Gemma4TextAttention: scaling = 1.0 (q and k RMS-normed)
      pt.query_pre_attn_scalar = 1.0;
      return;
    }
    if (has("query_pre_attn_scalar")) {
      pt.query_pre_attn_scalar =
          x_.number(t_.at("query_pre_attn_scalar"), "query_pre_attn_scalar", kScalar);
      pt.config_keys.push_back("query_pre_attn_scalar");
    }
    if (has("attn_logit_softcapping")) {
      pt.logit_softcap =
          x_.number(t_.at("attn_logit_softcapping"), "attn_logit_softcapping", kSoftcap);
      pt.config_keys.push_back("attn_logit_softcapping");
    }
  }

  PlanLayerType make_type(const LayerKind& k, const std::string& name) {
    PlanLayerType pt;
    pt.name = name;
    pt.config_keys = keys_;
    if (k.rope) {
      read_rope(k, pt);
    } else {
      pt.rope = PlanRope::kNone;
      pt.params = m_.params;
      pt.scaling.max_position = m_.max_position;
      pt.config_keys.push_back(family_ == Family::kLlama4 ? "no_rope_layers" : "layer_types");
    }
    read_mask(k, pt);
    read_qk_norm(k, pt);
    if (family_ == Family::kLlama4 && !k.rope) read_llama4_temperature(pt);
    if (family_ == Family::kGptOss) pt.sinks = true;  // HF GptOssAttention: a learned sink per head
    if (is_gemma(family_)) read_gemma_scores(pt);
    if (family_ == Family::kGemma4 && !gemma4_noted_) {
      gemma4_noted_ = true;
      note(
          "Gemma 4: softmax scale 1 (HF Gemma4TextAttention scaling = 1.0), written as "
          "query_pre_attn_scalar = 1; "
          "full-attention layers use global_head_dim and num_global_key_value_heads");
    }
    if (m_.softmax_head_dim != m_.params.head_dim && pt.rope == PlanRope::kRope) {
      pt.mla_rope_dim = m_.params.head_dim;  // DeepSeek MLA: the qk_rope_head_dim sub-head
    }
    std::sort(pt.config_keys.begin(), pt.config_keys.end());
    pt.config_keys.erase(std::unique(pt.config_keys.begin(), pt.config_keys.end()),
                         pt.config_keys.end());
    return pt;
  }

  const RopeModelConfig& m_;
  const Json t_;  // the text model's keys with the class defaults the reader filled in
  Ctx x_;
  std::string source_;
  Family family_ = Family::kGeneric;
  std::string text_type_;                        // the text model's model_type
  std::string uniform_name_ = "full_attention";  // the one type of a uniform plan
  int layers_ = 0;
  bool gemma4_noted_ = false;
  bool eps_noted_ = false, qk_noted_ = false;
  std::vector<std::string> keys_;  // the keys every type's layer assignment came from
  ModelPlan plan_;
};

/// model_plan_to_json's form of a type: the manifest's (plan_type_to_json) without the name (the
/// key holds it), without what does not apply, with the config keys it was read from.
Json type_json(const PlanLayerType& t) {
  Json j = plan_type_to_json(t);
  j.erase("name");
  if (t.rope == PlanRope::kNone) j.erase("head_dim");
  if (!(t.query_pre_attn_scalar > 0)) j.erase("query_pre_attn_scalar");
  if (!(t.logit_softcap > 0)) j.erase("logit_softcap");
  j["config_keys"] = t.config_keys;
  return j;
}

}  // namespace

ModelPlan model_plan_from_config(const RopeModelConfig& model, const std::string& source) {
  return PlanReader(model, source).read();
}

RopeModelConfig plan_type_model(const ModelPlan& plan, std::size_t type) {
  if (type >= plan.types.size()) {
    throw_invalid("plan_type_model", "type must be < " + std::to_string(plan.types.size()), type);
  }
  const PlanLayerType& t = plan.types[type];
  if (t.rope != PlanRope::kRope) {
    throw_invalid("plan_type_model",
                  std::string("type \"") + t.name + "\" must rotate with RoPE, it is " +
                      plan_rope_name(t.rope),
                  type);
  }
  RopeModelConfig m = plan.model;
  if (m.params.head_dim != t.params.head_dim) m.softmax_head_dim = t.params.head_dim;
  m.params = t.params;
  m.scaling = t.scaling;
  return m;
}

Json model_plan_to_json(const ModelPlan& plan) {
  Json j;
  const RopeModelConfig& m = plan.model;
  j["model"] = {
      {"id", m.id},
      {"hf_model", m.hf_model},
      {"model_type", m.model_type},
      {"num_hidden_layers", plan.layer_type.empty() ? Json() : Json(plan.layer_type.size())},
      {"source", m.source}};
  Json types = Json::object();
  std::vector<std::vector<int>> members(plan.types.size());
  for (std::size_t i = 0; i < plan.layer_type.size(); ++i)
    members[plan.layer_type[i]].push_back(static_cast<int>(i));
  for (std::size_t k = 0; k < plan.types.size(); ++k) {
    Json t = type_json(plan.types[k]);
    t["layers"] = members[k];
    types[plan.types[k].name] = std::move(t);
  }
  Json layers = Json::array();
  for (std::size_t i = 0; i < plan.layer_type.size(); ++i) {
    const PlanLayerType& t = plan.types[plan.layer_type[i]];
    Json l = {{"index", i},
              {"type", t.name},
              {"rope", plan_rope_name(t.rope)},
              {"mask", plan_mask_name(t.mask)}};
    if (t.rope != PlanRope::kNone) l["base"] = t.params.base;
    if (t.rope == PlanRope::kRope) l["scaling"] = reference::rope_scaling_type_name(t.scaling.type);
    if (t.mask == PlanMask::kSliding) l["window"] = t.window;
    if (t.mask == PlanMask::kChunked) l["chunk"] = t.chunk;
    l["temperature"] = t.has_temperature
                           ? Json(reference::query_temperature_rule_name(t.temperature.rule))
                           : Json();
    l["sinks"] = t.sinks;
    l["qk_norm"] = plan_qk_norm_json(t.qk_norm);
    layers.push_back(std::move(l));
  }
  j["layers"] = std::move(layers);
  j["types"] = std::move(types);
  j["uniform"] = plan.uniform();
  j["notes"] = plan.notes;
  return j;
}

}  // namespace posenc::golden
