// M-RoPE golden cases from a vision-language model's HF config (golden/schemes/mrope/mrope_golden.cpp): the
// config reader for Qwen2-VL, Qwen2.5-VL and Qwen3-VL and the prompt layout file that
// `posenc generate --config config.json [--layout layout.json]` reads.
//
// Config keys read (docs/verifying-vl.md): model_type (qwen2_vl, qwen2_5_vl, qwen3_vl,
// qwen3_vl_moe); the text block (text_config when present, else the top level): hidden_size,
// num_attention_heads, num_key_value_heads, head_dim, rope_theta, max_position_embeddings, and
// rope_scaling or rope_parameters with type | rope_type (mrope or default), mrope_section,
// mrope_interleaved, rope_theta; vision_config.spatial_merge_size and (qwen2_5_vl)
// vision_config.tokens_per_second; image_token_id, video_token_id, vision_start_token_id,
// vision_end_token_id (top level or text block). Any other key of the rope block, a missing
// required key or a value outside its range is a GoldenFileError naming the file, the key and
// the value as written.
//
// Layout file: {"spans": [{"type": "text", "tokens": n} | {"type": "image", "grid_thw": [t, h, w]}
// | {"type": "video", "grid_thw": [t, h, w], "second_per_grid": s}, ...], "decode": n}: the
// prompt's spans in order (grids in patches before merging, as HF's image_grid_thw) and the
// number of text tokens decoded after it (0..64). Every visual span follows a text span (its
// last token is vision_start_token_id, as HF's get_rope_index requires).
#pragma once
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "golden/cases/registry.hpp"

namespace posenc::golden {

/// True when the parsed config is a vision-language model that rotates with M-RoPE (its
/// model_type, or an mrope_section in its rope block): `generate --config` reads it with the
/// M-RoPE reader instead of the RoPE one.
bool mrope_config_is_vl(const nlohmann::json& config);

/// Golden cases for a VL config: the standard layouts (text-image-text, two images,
/// text-video-text, decode after an image), or the one layout of `layout_file` when given.
/// GoldenFileError naming the file and key for a bad config or layout.
ConfigCases mrope_cases_for_config(std::string_view text, const std::string& source,
                                   const std::filesystem::path& layout_file, DType dtype);

/// Most tokens of one case (prompt + decode): scores hold tokens^2 values per head, computed in
/// mp50 and mp100; a case of 512 tokens takes about 22 s of one core (1024 took about 85 s).
inline constexpr std::int64_t kMropeCaseMaxTokens = 512;
/// Most decode tokens after the prompt.
inline constexpr std::int64_t kMropeCaseMaxDecode = 64;

}  // namespace posenc::golden
