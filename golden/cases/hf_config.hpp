// The HF config reader: a model's config.json (verbatim) -> RoPE parameters and scaling rule.
//
// Keys read (docs/own-model.md): model_type; hidden_size | n_embd; num_attention_heads |
// n_head; num_key_value_heads; head_dim (null falls back to hidden / heads); qk_rope_head_dim
// (DeepSeek MLA: the rotated sub-head); rotary_dim (GPT-J), rotary_pct (GPT-NeoX),
// partial_rotary_factor (rotary = int(head_dim * factor)); rope_theta | rotary_emb_base (GPT-J:
// 10000, hard-coded in HF); max_position_embeddings | n_positions; original_max_position_embeddings
// (top level, Phi-3); rope_scaling or the newer rope_parameters, with rope_type or the legacy
// type: default, linear, dynamic, ntk, yarn, llama3, longrope (su). Every key of the scaling block
// must be known for its type; a missing required key, an unknown type or key, or inconsistent
// values (odd or oversized rotary dim, factor lists of the wrong length, factor <= 0) is a
// GoldenFileError naming the file and the key.
//
// Every number is checked against its documented range (the table in docs/own-model.md) on the value as the JSON holds it (signed, unsigned or float), before any
// conversion or arithmetic, so a message shows the value as written in the file:
//   "config.json: rope_scaling.attention_factor = -1: must be a number in (0, 100]".
// A given value is never replaced by a default; null means "absent" (HF's config classes and
// its rope code read these keys with .get() / `is None`, so null and absent are the same there).
//
// Layout: model types gptj and deepseek_v2 / deepseek_v3 rotate interleaved pairs (DeepSeek's HF
// code stores them de-interleaved; the golden tensors keep the input's channel order), every
// other model HF's rotate_half. A top-level "_posenc" object (posenc's own preset files) may set
// "layout" (Meta's checkpoint view) and carries id, hf_model, source and note.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "reference/rope_scaling.hpp"

namespace posenc::golden {

struct RopeModelConfig {
  std::string id;        // _posenc.id, else _name_or_path, else the file stem
  std::string hf_model;  // _posenc.hf_model, else _name_or_path
  std::string source;    // where the values come from
  std::string note;
  std::string model_type;
  reference::RopeParams params;     // head_dim, rotary_dim, base, layout (attention factor 1)
  int n_heads = 0, n_kv_heads = 0;
  int softmax_head_dim = 0;          // the q head the attention scales by: qk_nope + qk_rope
                                     // (DeepSeek MLA), else head_dim
  std::int64_t max_position = 0;    // L (0 when the config has none)
  reference::RopeScaling scaling;   // type kNone for plain RoPE
  std::string layout_reason;        // why this pairing layout
  std::string name_or_path;         // _name_or_path ("" when absent)
  nlohmann::json config;            // the config as read, without "_posenc"
  std::vector<std::string> notes;   // defaults filled in, with the reason
};

/// Parses a config; `source` names the file in errors.
RopeModelConfig rope_config_from_json(const nlohmann::json& config, const std::string& source);
/// Parses a config's text (JSON nesting within POSENC_MAX_JSON_DEPTH); messages quote every
/// number as the text writes it (`1e20`, not the parser's `1e+20`). `source` names the file.
RopeModelConfig rope_config_parse(std::string_view text, const std::string& source);
/// Reads and parses a config file (GoldenFileError naming the path on any problem).
RopeModelConfig rope_config_read(const std::filesystem::path& path);

/// Longest model part of a config case name (config_case_name).
inline constexpr std::size_t kConfigNameMax = 40;

/// `text` lower-cased, every character outside [a-z0-9] and every run of them one '_', no '_'
/// at either end, at most kConfigNameMax characters: safe as a file name on any system.
std::string config_name_sanitize(std::string_view text);

/// The short id of the golden cases written from a config (`posenc generate --config`):
///  - a committed preset (a `_posenc.id` whose golden/presets/<id>.json has exactly these
///    bytes): the sanitised id, so the files equal the catalog's;
///  - any other config: the model (the basename of `_name_or_path`, else `model_type`, else
///    "model"; sanitised) + "_" + the first 8 hex digits of the SHA-256 of the config's bytes,
///    so two configs (two models, or one model edited) never share a case name.
std::string config_case_name(const RopeModelConfig& m, std::string_view config_bytes);

/// The canonical config of a parsed model, in HF's v5 form (`rope_parameters` holding
/// rope_theta and every key of the rule; `rotary_dim` when partial; `_posenc` with the ids and
/// the layout): reading it back gives the same parameters, rule, heads and lengths.
nlohmann::json rope_config_to_json(const RopeModelConfig& m);

/// <source tree>/golden/presets (the committed model configs).
std::filesystem::path default_presets_dir();

}  // namespace posenc::golden
