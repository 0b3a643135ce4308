// -----------------------------------------------------------------------------
// Query temperature: position-dependent query scaling of Llama 4 and Mistral (reference)
// -----------------------------------------------------------------------------
// Formula (m = the query's absolute position, >= 0; ln = natural log; integer floor division):
//
//   llama4   n(m) = floor((m + 1) / F)          F = floor_scale (8192), c = attn_scale (0.1)
//   mistral  n(m) = floor(m / L0)               L0 = original_max_position_embeddings,
//                                               c = llama_4_scaling_beta
//   tau(m) = 1 + c ln(1 + n(m))                 q'_m = tau(m) q_m   (every channel, every head)
//
//   tau is piecewise constant: 1 while n = 0 (m <= F - 2, resp. m <= L0 - 1), and it steps up
//   exactly where n grows: m = k F - 1 for Llama 4 (the p + 1), m = k L0 for Mistral (p).
//   Llama 4 applies it on its NoPE (global) layers only, when attn_temperature_tuning is on,
//   to the queries before attention; Mistral's form applies to the rotated queries of every
//   layer. Keys are never scaled.
//
//   c is a decimal written in a config (0.1); it enters the oracle as that decimal exactly: the
//   shortest decimal text of the double (what the JSON says) read as a ratio of integers and
//   rounded once in Real, the way reference/rope_scaling.hpp builds YaRN's 0.1.
//
// Source: meta-llama Llama 4 (HF transformers Llama4TextAttention: attn_scales =
//   log1p(floor((cache_position + 1) / floor_scale)) * attn_scale + 1, on layers without RoPE);
//   Mistral (HF transformers Ministral3 and vLLM Mistral `_get_llama_4_attn_scale`: 1 + beta log(1
//   + floor(positions / original_max_position_embeddings)), rope_parameters llama_4_scaling_beta).
// Index note: positions are 0-based in both; Llama 4 counts m + 1 tokens, Mistral m.
// Names elsewhere: HF attn_temperature_tuning, floor_scale, attn_scale (Llama4TextConfig);
//   llama_4_scaling_beta, original_max_position_embeddings (Mistral rope_parameters).
// Not modelled: float32 evaluation of the log (the kernel's bound covers it).
#pragma once
#include <charconv>
#include <cmath>
#include <cstdint>
#include <string>
#include <system_error>
#include <vector>

#include "reference/common/errors.hpp"
#include "reference/common/span.hpp"

namespace posenc::reference {

enum class QueryTemperatureRule { kLlama4, kMistral };

constexpr const char* query_temperature_rule_name(QueryTemperatureRule r) {
  return r == QueryTemperatureRule::kLlama4 ? "llama4" : "mistral";
}

/// The rule and its two config values.
struct QueryTemperature {
  QueryTemperatureRule rule = QueryTemperatureRule::kLlama4;
  std::int64_t length = 8192;  // F = floor_scale (llama4) or L0 (mistral), > 0
  double coefficient = 0.1;    // c = attn_scale (llama4) or llama_4_scaling_beta (mistral)
};

/// InvalidArgument naming `function` unless the rule is usable.
inline void query_temperature_check(const QueryTemperature& t,
                                    const char* function = "query_temperature_check") {
  const char* len = t.rule == QueryTemperatureRule::kLlama4
                        ? "floor_scale must be > 0"
                        : "original_max_position_embeddings must be > 0";
  if (t.length <= 0) throw_invalid(function, len, t.length);
  if (!std::isfinite(t.coefficient) || t.coefficient < 0.0) {
    throw_invalid(function,
                  t.rule == QueryTemperatureRule::kLlama4
                      ? "attn_scale must be finite and >= 0"
                      : "llama_4_scaling_beta must be finite and >= 0",
                  t.coefficient);
  }
}

/// n(m): the number of whole steps below position m (see the formula).
inline std::int64_t query_temperature_steps(const QueryTemperature& t, std::int64_t m) {
  query_temperature_check(t, "query_temperature_steps");
  if (m < 0) throw_invalid("query_temperature_steps", "position must be >= 0", m);
  return t.rule == QueryTemperatureRule::kLlama4 ? (m + 1) / t.length : m / t.length;
}

/// A config's decimal exactly in Real: the double's shortest decimal text (what the config
/// says, e.g. "0.1") read as digits * 10^e and rounded once. Decimals with more than 18
/// digits or |e| > 18 (none in practice) fall back to Real(v), the double itself.
template <class Real>
Real config_decimal(double v) {
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  if (res.ec != std::errc{} || !std::isfinite(v)) return Real(v);
  const std::string text(buf, res.ptr);
  const auto epos = text.find('e');
  std::string digits;
  for (std::size_t i = 0; i < epos; ++i) {
    if (text[i] >= '0' && text[i] <= '9') digits += text[i];
  }
  const int e = std::stoi(text.substr(epos + 1)) - static_cast<int>(digits.size()) + 1;
  if (digits.size() > 18 || e > 18 || e < -18) return Real(v);
  const std::int64_t mant = std::stoll(digits);
  std::int64_t p10 = 1;
  for (int i = 0; i < (e < 0 ? -e : e); ++i) p10 *= 10;
  const Real r = e < 0 ? Real(mant) / Real(p10) : Real(mant) * Real(p10);
  return v < 0 ? -r : r;
}

/// tau(m) = 1 + c ln(1 + n(m)), c as an exact decimal.
template <class Real>
Real query_temperature(const QueryTemperature& t, std::int64_t m) {
  using std::log;
  const std::int64_t n = query_temperature_steps(t, m);
  if (n == 0) return Real(1);
  return Real(1) + config_decimal<Real>(t.coefficient) * log(Real(1) + Real(n));
}

/// Scales rows of q in place: row r (head_dim * heads values) by tau(positions[r]).
template <class Real>
void query_temperature_apply(const QueryTemperature& t, span<const std::int64_t> positions,
                             span<Real> q) {
  query_temperature_check(t, "query_temperature_apply");
  if (positions.empty()) {
    if (!q.empty())
      throw_invalid("query_temperature_apply", "q must be empty without positions", q.size());
    return;
  }
  if (q.size() % positions.size() != 0) {
    throw_invalid("query_temperature_apply",
                  "q must have a multiple of " + std::to_string(positions.size()) + " entries",
                  q.size());
  }
  const std::size_t row = q.size() / positions.size();
  for (std::size_t r = 0; r < positions.size(); ++r) {
    const Real tau = query_temperature<Real>(t, positions[r]);
    for (std::size_t c = 0; c < row; ++c) q[r * row + c] *= tau;
  }
}

}  // namespace posenc::reference
