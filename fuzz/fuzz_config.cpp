// libFuzzer target: the HF config reader (rope_config_parse, what `posenc generate --config`
// runs on a config.json) on arbitrary text. An accepted config must hold every documented range
// (docs/own-model.md), its canonical form must read back to the same
// model, and its case name must be a safe file name ([a-z0-9_], bounded length).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>

#include "fuzz/fuzz_common.hpp"
#include "golden/cases/hf_config.hpp"
#include "optimized/rope.hpp"

using namespace posenc;
using namespace posenc::golden;
using reference::RopeScalingType;

namespace {

void check_accepted(const RopeModelConfig& m, std::string_view text) {
  const auto& p = m.params;
  const auto& s = m.scaling;
  fuzz::require(m.n_heads >= 1 && m.n_heads <= 65536, "num_attention_heads in [1, 65536]");
  fuzz::require(m.n_kv_heads >= 1 && m.n_heads % m.n_kv_heads == 0,
                "num_key_value_heads divides the heads");
  fuzz::require(p.head_dim >= 1 && p.head_dim <= 16384, "head_dim in [1, 16384]");
  fuzz::require(p.rotary_dim >= 2 && p.rotary_dim % 2 == 0 && p.rotary_dim <= p.head_dim,
                "rotary_dim even, <= head_dim");
  fuzz::require(m.softmax_head_dim >= p.head_dim && m.softmax_head_dim <= 2 * 16384,
                "softmax head dim");
  fuzz::require(p.base > 1.0 && p.base <= 1e15, "base in (1, 1e15]");
  fuzz::require(m.max_position >= 0 && m.max_position <= optimized::kRopeMaxPosition,
                "max_position <= 2^28");
  if (s.type != RopeScalingType::kNone) {
    fuzz::require(s.factor >= 0.001 && s.factor <= 65536.0, "factor in [0.001, 65536]");
    fuzz::require(
        s.original_max_position >= 0 && s.original_max_position <= optimized::kRopeMaxPosition,
        "original_max_position <= 2^28");
    fuzz::require(s.attention_factor >= 0.0 && s.attention_factor <= 100.0,
                  "attention_factor 0 (derived) or in (0, 100]");
  }
  if (s.type == RopeScalingType::kDynamic) {
    fuzz::require(m.max_position >= 1 && 2 * m.max_position - 1 <= optimized::kRopeMaxPosition,
                  "dynamic 2L - 1 <= 2^28");
  }
  if (s.type == RopeScalingType::kYarn)
    fuzz::require(s.beta_fast > s.beta_slow && s.beta_slow > 0, "beta order");
  if (s.type == RopeScalingType::kLlama3)
    fuzz::require(s.high_freq_factor > s.low_freq_factor, "freq order");
  if (s.type == RopeScalingType::kLongRope) {
    const auto n = static_cast<std::size_t>(p.rotary_dim / 2);
    fuzz::require(s.short_factor.size() == n && s.long_factor.size() == n,
                  "longrope lists of rotary_dim / 2");
  }
  // The canonical form reads back (rope_config_to_json's contract).
  RopeModelConfig back;
  try {
    back = rope_config_from_json(rope_config_to_json(m), "canonical");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "the canonical form of an accepted config is refused: %s\n", e.what());
    std::abort();
  }
  fuzz::require(back.params.head_dim == p.head_dim && back.params.rotary_dim == p.rotary_dim &&
                    back.params.base == p.base && back.scaling.type == s.type &&
                    back.max_position == m.max_position,
                "the canonical config reads back to the same model");
  const std::string name = config_case_name(m, text);
  fuzz::require(!name.empty() && name.size() <= kConfigNameMax + 9, "case name length");
  fuzz::require(
      name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") == std::string::npos,
      "case name in [a-z0-9_]");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  fuzz::expect_clean("rope_config_parse", [&] {
    const RopeModelConfig m = rope_config_parse(text, "fuzz/config.json");
    check_accepted(m, text);
  });
  return 0;
}
