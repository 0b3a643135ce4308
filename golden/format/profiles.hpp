// Tolerance profiles: named engine pipelines. A profile is part of the file format: every
// expected tensor of a manifest states, for each profile below, either its budget (a bound and
// an optional per-element extra) or why the profile does not apply to it.
//
// The error analyses behind the budgets live next to the code that computes them
// (golden/cases/budgets.hpp for the shared pieces, golden/schemes/<slug>/ for each scheme);
// docs/profiles.md collects them.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace posenc::golden {

struct ProfileInfo {
  std::string name;                  // as written in manifests and on the command line
  std::vector<std::string> aliases;  // accepted on the command line, never written
  std::string pipeline;              // `posenc engine --pipeline` name that emulates it
  std::string summary;               // one line: which engines compute this way
};

/// The five profiles, in manifest order: strict, fp32, fp32-recurrence, bf16, f16.
inline const std::vector<ProfileInfo>& profiles() {
  static const std::vector<ProfileInfo> all = {
      {"strict", {}, "exact",
       "correctly rounded tables (inv_freq, cos/sin, slopes, sinusoids) and a few eps for the "
       "arithmetic after them, outputs rounded once to the target dtype"},
      {"fp32", {"fp32-angles"}, "fp32",
       "the single-rounding float32 pipeline of PyTorch / HF / Meta / vLLM: float32 pow for "
       "inv_freq and slopes, float32 position and product, float32 cos/sin and sinusoid tables, "
       "float32 attention; outputs cast to the target dtype"},
      {"fp32-recurrence", {}, "fp32-recurrence",
       "ggml / llama.cpp: theta_scale = powf(base, -2/d) once and theta_{i+1} = theta_i * "
       "theta_scale in float32 (error grows with the pair index), slopes powf(m0, h + 1), "
       "float32 attention on q and k held in the KV-cache dtype (a 16-bit target's); 16-bit "
       "storage rounds the ALiBi distance in the KQ mask"},
      {"bf16", {}, "bf16",
       "PyTorch eager in bf16: float32 tables cast to bf16, every multiply and add rounded to "
       "bf16 (matmuls accumulate in float32), softmax in float32; bf16 targets only"},
      {"f16", {}, "f16",
       "PyTorch eager in f16: float32 tables cast to f16, every multiply and add rounded to f16 "
       "(matmuls accumulate in float32), softmax in float32; f16 targets only"},
  };
  return all;
}

/// The profile a command-line name or alias means, or "" when there is none.
inline std::string canonical_profile(std::string_view name) {
  for (const auto& p : profiles()) {
    if (p.name == name) return p.name;
    for (const auto& a : p.aliases) {
      if (a == name) return p.name;
    }
  }
  return "";
}

/// "strict, fp32 (alias fp32-angles), fp32-recurrence, bf16, f16" for messages and --help.
inline std::string profile_list_text() {
  std::string s;
  for (const auto& p : profiles()) {
    if (!s.empty()) s += ", ";
    s += p.name;
    for (const auto& a : p.aliases) s += " (alias " + a + ")";
  }
  return s;
}

}  // namespace posenc::golden
