// The in-memory RoPE golden case of one call of a user's kernel: given dims, base, pairing,
// heads, token positions and (optionally) q and k values, the case rope_case_generate builds
// (mp50 oracle cross-checked with mp100, every profile's budgets). check/rope.hpp draws such
// calls; `posenc oracle rope` writes one as .npy files.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "golden/cases/catalog.hpp"
#include "golden/cases/rope_case.hpp"

namespace posenc::golden {

/// q, k: [tokens, n_heads | n_kv_heads, head_dim] values representable in float32, or empty
/// (drawn from seed). n_kv_heads divides n_heads.
inline LoadedCase rope_call_case(const reference::RopeParams& p, int n_heads, int n_kv_heads,
                                 const std::vector<std::int64_t>& positions, std::uint64_t seed,
                                 const std::vector<double>& q = {},
                                 const std::vector<double>& k = {}) {
  RopeModelConfig m;
  m.id = "call";
  m.params = p;
  m.params.attention_factor = 1.0;
  m.n_heads = n_heads;
  m.n_kv_heads = n_kv_heads;
  m.softmax_head_dim = p.head_dim;
  std::vector<HardPosition> hp;
  for (std::int64_t x : positions) hp.push_back({x, "given"});
  RopeCaseDef def = rope_case_for(m, "call", DType::kF32, hp, "");
  def.n_q_heads = n_heads;
  def.n_kv_heads = n_kv_heads;
  def.resolution = false;
  def.seed = seed;
  def.q_values = q;
  def.k_values = k;
  GoldenCase g = rope_case_generate(def);
  load_spilled(g);
  LoadedCase lc;
  lc.spec = case_spec_from_json(g.manifest, def.id);
  lc.golden = tensor_map(std::move(g.tensors));
  return lc;
}

}  // namespace posenc::golden
