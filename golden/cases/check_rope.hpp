// The compiled part of check/rope.hpp (posenc's RoPE properties on a user's kernel): the calling
// convention, and one property at one drawn call, judged with the budgets of the in-memory golden
// case of that call (golden/cases/rope_call_case.hpp). check/rope.hpp adds the RapidCheck and
// GoogleTest glue; this part is in posenc::golden so that a user's test compiles only the glue.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "golden/cases/catalog.hpp"
#include "golden/verify/verify.hpp"
#include "reference/common/span.hpp"
#include "reference/rope.hpp"

namespace posenc::check {

using reference::RopeLayout;

/// One call of a user's RoPE kernel. Tensors are row-major [tokens, heads, head_dim]; token t is
/// at positions[t] for every head. Pairs: RopeLayout::kHalfSplit (i, i + rotary_dim/2), NeoX /
/// HF rotate_half; kInterleaved (2i, 2i + 1), GPT-J / Meta. Channels >= rotary_dim are copied.
/// inv_freq[i] = base^(-2i/rotary_dim) correctly rounded to double, for kernels that take a
/// table instead of the base. The kernel writes every element of q_out and k_out.
struct RopeCall {
  span<const std::int64_t> positions;
  int n_heads = 0, n_kv_heads = 0, head_dim = 0, rotary_dim = 0;
  double base = 0;
  RopeLayout layout = RopeLayout::kHalfSplit;
  span<const double> inv_freq;
  span<const float> q, k;
  span<float> q_out, k_out;
};
using RopeKernel = std::function<void(const RopeCall&)>;

/// What the properties draw, and under which profile they judge.
struct RopeCheckOptions {
  std::string profile = "fp32";  // strict, fp32 (fp32-angles), fp32-recurrence
  std::vector<RopeLayout> layouts = {RopeLayout::kHalfSplit, RopeLayout::kInterleaved};
  std::vector<int> head_dims = {8, 64, 128};
  bool partial_rotary = true;  // also draw rotary_dim = head_dim / 2
  std::vector<double> bases = {10000.0, 500000.0, 1000000.0};
  int max_tokens = 4;
  std::int64_t max_position = (std::int64_t{1} << 24) + 1;  // hard positions up to here too
  int max_success = 25;  // per property; RC_PARAMS max_success lowers it
};

enum class RopeProperty { kOracle, kRelative, kPairNorm, kComposition };

inline const char* rope_property_name(RopeProperty p) {
  switch (p) {
    case RopeProperty::kOracle: return "Oracle";
    case RopeProperty::kRelative: return "Relative";
    case RopeProperty::kPairNorm: return "PairNorm";
    case RopeProperty::kComposition: return "Composition";
  }
  return "?";
}

inline std::vector<RopeProperty> rope_properties() {
  return {RopeProperty::kOracle, RopeProperty::kRelative, RopeProperty::kPairNorm,
          RopeProperty::kComposition};
}

/// The outcome of one property run: passed, or the report of the shrunk counterexample.
struct PropertyResult {
  bool passed = false;
  std::string message;
};


namespace detail {

/// One drawn call: everything but the values, which the case draws from `seed`.
struct RopeDraw {
  int head_dim = 0, rotary_dim = 0, n_heads = 1;
  double base = 0;
  RopeLayout layout = RopeLayout::kHalfSplit;
  std::vector<std::int64_t> positions;  // Oracle, PairNorm: the call; Relative: m, n
  std::int64_t shift = 0;               // Relative: s; Composition: positions = {b}, shift = a
  std::uint32_t seed = 0;
};

/// What the last failing run saw: the case and the outputs (for the diagnoser).
struct LastFailure {
  std::optional<golden::LoadedCase> lc;
  golden::TensorMap out;
};

/// "head_dim 8, rotary_dim 8, base 10000, layout half_split, ..." for messages.
std::string describe(const RopeDraw& d);

/// One property at one drawn call: "" or what fails (the oracle's verdict at the same inputs
/// included). Records the failing case in `last`.
std::string property_at(RopeProperty which, const RopeKernel& kernel, const std::string& profile,
                        const RopeDraw& d, LastFailure* last);

/// posenc's diagnosis of the last failing outputs, one line ("" when there is none).
std::string diagnose_last(const LastFailure& last, const std::string& profile);

/// The hard positions (golden/cases/hard_positions.hpp) in [0, max_position].
std::vector<std::int64_t> hard_position_values(std::int64_t max_position);

}  // namespace detail
}  // namespace posenc::check
