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
// Nesting: a multimodal config (Gemma 3 4B/27B, Llama 4, Mistral 3) keeps the text model's keys
// in "text_config"; when the top level has no num_attention_heads, every key above is read
// from there (messages name "text_config.<key>"), identity keys (_posenc, _name_or_path,
// model_type) from the top.
//
// Per-layer-type RoPE (transformers v5, Gemma 3/4 style): a `rope_parameters` whose values are
// blocks keyed by layer type ({"full_attention": {...}, "sliding_attention": {...}}). Every
// block is read and checked as above; the config's one RoPE (params, scaling) is the
// full_attention block's, else the sliding_attention block's, else the first one's, skipping
// proportional blocks (Gemma 4; rope_proportional.hpp), which the plan reader (model_plan.hpp)
// reads with rope_block_read. A block's rope_theta wins over a top-level one.
// `llama_4_scaling_beta` in a block (Mistral 3) is Mistral's query temperature coefficient
// (query_temperature.hpp), kept in llama_4_scaling_beta.
//
// Defaults: the published Gemma 3 configs leave keys to HF's Gemma3TextConfig (the 4B text_config
// has no heads, rope_theta or max_position_embeddings); for model_type gemma3_text the reader fills
// in that class's defaults (num_attention_heads 8, num_key_value_heads 4, head_dim 256,
// max_position_embeddings 131072, rope_theta 1e6, rope_local_base_freq 1e4,
// query_pre_attn_scalar 256, sliding_window 4096, sliding_window_pattern 6), each with a note,
// and keeps them in `defaults` (config stays as read).
//
// Layout: model types gptj, deepseek_v2 / deepseek_v3, cohere / cohere2 and llama4 rotate interleaved pairs (DeepSeek's HF
// code stores them de-interleaved; the golden tensors keep the input's channel order), every
// other model HF's rotate_half. A top-level "_posenc" object (posenc's own preset files) may set
// "layout" (Meta's checkpoint view) and carries id, hf_model, source and note.
#pragma once
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "reference/rope_proportional.hpp"
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
  std::string text_key;             // "text_config" when the text model's keys are nested, else ""
  std::string rope_key;             // the key path of the RoPE block read ("" when none)
  double llama_4_scaling_beta = -1; // the block's llama_4_scaling_beta; < 0 when absent
  std::map<std::string, std::string> raw_numbers;  // each float's text by key path (messages)

  nlohmann::json defaults = nlohmann::json::object();  // class defaults filled in for absent keys
                                                      // (Gemma 3's, noted), by key

  /// The text model's keys: `config`, or its text_config.
  const nlohmann::json& text() const { return text_key.empty() ? config : config.at(text_key); }
  /// text() with `defaults` filled in: what HF's config class holds.
  nlohmann::json text_with_defaults() const {
    nlohmann::json t = text();
    for (const auto& [k, v] : defaults.items()) t[k] = v;
    return t;
  }
};

/// One RoPE block read on its own (a v5 per-layer-type entry, or one the plan reader builds
/// from v4 keys): the same keys, ranges and strictness as a config's own block.
struct RopeBlock {
  reference::RopeParams params;       // head_dim as asked, rotary_dim, base, the model's layout
  reference::RopeScaling scaling;     // kNone when the block is default or proportional
  bool proportional = false;          // rope_type "proportional" (Gemma 4's full attention)
  reference::RopeProportional proportion;  // p = partial_rotary_factor, s = factor
  double llama_4_scaling_beta = -1;   // < 0 when absent
  std::vector<std::string> notes;
};

/// `block` read as model `m`'s RoPE block `key` (the full key path for messages, e.g.
/// "rope_parameters.sliding_attention") for heads of `head_dim`; rotary_dim comes from the
/// text model's rotary_dim / partial_rotary_factor, else the block's partial_rotary_factor (not
/// for proportional blocks, where it is p); the base from the block's rope_theta, else
/// `fallback_theta` when > 0 (the plan reader's v4 keys), else the top level's, else 10000.
/// GoldenFileError naming `source` and the key.
RopeBlock rope_block_read(const RopeModelConfig& m, const nlohmann::json& block, const std::string& key,
                          int head_dim, const std::string& source, double fallback_theta = 0);

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
