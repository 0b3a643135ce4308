// One RoPE golden case, plain or scaled, for any model config: the generator (mp50 oracle,
// per-profile budgets), the built-in engine (posenc's kernel and the emulated pipelines) and the
// scaling rule's manifest form. The `rope` and `rope_scaling` schemes and
// `posenc generate --config` all build cases through here.
//
// A case is one call of the model: a list of token positions (the call's seq_len is the largest
// + 1, which the dynamic and LongRoPE rules read), q and k inputs, and the stages
//   inv_freq [d/2]         f32 table
//   attention_factor [1]   f32 (scaled cases): the factor cos and sin carry
//   softmax_scale [1]      f32 (DeepSeek MLA): q_head_dim^-1/2 times the YaRN multiplier
//   cos, sin [T, d/2]      the tables in the target dtype, attention factor folded in
//   q_rot [T, Hq, h], k_rot [T, Hk, h], scores [Hq, T, T] (unscaled q_rot . k_rot)
// The error analysis of every profile is in rope_budgets.cpp; docs/profiles.md has the table.
#pragma once
#include <cstdint>
#include <optional>
#include <memory>
#include <string>
#include <vector>

#include "golden/cases/hard_positions.hpp"
#include "golden/cases/hf_config.hpp"
#include "golden/cases/registry.hpp"
#include "golden/cases/scaling_json.hpp"
#include "reference/rope_scaling.hpp"

namespace posenc::golden {

/// The oracle's rotation of every head of T tokens (x: [T, heads, head_dim] as doubles) with
/// tables already computed (cos, sin: [T, rotary_dim / 2], attention factor folded in), appended
/// to out: the operations of reference::rope_apply, y_a = x_a c - x_b s, y_b = x_a s + x_b c,
/// without evaluating every cos and sin once more per head. Shared by rope and mrope.
template <class Real>
void rope_rotate_heads(const reference::RopeParams& p, const std::vector<Real>& cos,
                       const std::vector<Real>& sin, std::size_t tokens, const std::vector<double>& x,
                       int heads, std::vector<Real>* out) {
  const int h = p.head_dim, np = p.rotary_dim / 2;
  for (std::size_t t = 0; t < tokens; ++t) {
    for (int hh = 0; hh < heads; ++hh) {
      const std::size_t off = (t * heads + hh) * h;
      std::vector<Real> y(x.begin() + off, x.begin() + off + h);
      for (int i = 0; i < np; ++i) {
        const int ca = reference::rope_pair_a(p, i), cb = reference::rope_pair_b(p, i);
        const Real& c = cos[t * np + i];
        const Real& sn = sin[t * np + i];
        const Real xa = Real(x[off + ca]), xb = Real(x[off + cb]);
        y[ca] = xa * c - xb * sn;
        y[cb] = xa * sn + xb * c;
      }
      out->insert(out->end(), y.begin(), y.end());
    }
  }
}

/// A declared alternative convention of a case: an engine that follows it passes the case
/// (verify judges each tensor by the convention it follows and names it). For behaviours where
/// correct engines differ (e.g. current vLLM's LongRoPE switch); the same rule also has its own
/// `acceptable` case.
struct RopeAlternative {
  std::string name, description;
  reference::RopeScaling rule;  // seq_len is the case's
};

/// Everything a RoPE case is made from.
struct RopeCaseDef {
  RopeModelConfig model;       // params (a = 1), heads, the configured scaling rule
  std::string scheme = "rope"; // "rope" (no scaling rule) or "rope_scaling"
  std::string id;
  std::string short_id;        // the model's part of the id
  DType dtype = DType::kF32;
  std::uint64_t seed = 0;
  int n_q_heads = 2, n_kv_heads = 1;  // n_kv_heads 0: q only (no k, no scores)
  std::vector<HardPosition> positions;
  // Given q and k values ([tokens, heads, head_dim], representable in dtype) instead of the
  // ones drawn from `seed`; empty = drawn (check/rope.hpp rotates a kernel's own output again).
  std::vector<double> q_values, k_values;
  bool dense = false;          // positions 0..kRopeDenseLast, then hard positions above
  // Level 2 (`posenc generate --level 2`): tables only (inv_freq, factors, cos, sin; q is one
  // head of inputs, no rotations, no scores), computed by the fast oracle (fast_rope.hpp) and
  // cross-checked in mp100 on a sample. The manifest lists the positions in
  // [sweep_first, sweep_last] as a range ("positions_sweep"), not one by one.
  bool tables_only = false;
  std::int64_t sweep_first = -1, sweep_last = -1;
  // A sweep chunk names its swept positions without holding them (a long context has millions,
  // and `list` must not hold them): entries [sweep_begin, sweep_end) of `sweep_list` (sorted,
  // shared by the chunks of one call), or, when sweep_list is null, the integers in that range.
  // `positions` then holds only the others (the call's last position); rope_case_generate puts
  // the chunk's positions first, as they were listed.
  bool sweep_lazy = false;
  std::shared_ptr<const std::vector<std::int64_t>> sweep_list;
  std::size_t sweep_begin = 0, sweep_end = 0;
  bool resolution = true;      // record the per-position resolution (plain cases)
  std::string call;            // what this call is (seq_len, which side of a boundary)
  // The convention the expected values follow: `expected` is model.scaling (seq_len set from
  // the positions) unless a declared alternative (result "acceptable") or a known-wrong
  // convention (result "invalid") changes it; `reason` says what differs and who does it.
  reference::RopeScaling expected;
  std::string result = "valid";
  std::string convention;
  std::string reason;
  std::vector<RopeAlternative> alternatives;
};

/// The LongRoPE alternative every engine may follow: current vLLM uses the long factors for
/// every call when max_position_embeddings > L0 (nothing when the call is long under HF anyway).
std::vector<RopeAlternative> rope_default_alternatives(const RopeModelConfig& m, const reference::RopeScaling& expected);

/// What generating `d` costs, estimated from its shapes before any oracle runs: the largest
/// tensor of its file (scores.exact, f64 [Hq, T, T], once there are scores), the whole file
/// (every expected tensor with its .cond, .exact and per-profile .extra companions) and the
/// seconds on one core: a full case about 3.5e-7 s per score and head_dim channel (the mp50 and
/// mp100 dot products) plus 1 ms per token (its rotations), a tables-only case 30 ms plus 7.5e-7 s
/// per position and pair (the fast oracle and the budgets). Fitted to `posenc generate --level 2`
/// (every preset: sampled cases of 58-69 positions, 8192-position sweeps) and to `generate
/// --config --positions` of 128-512 positions, on one core of a 2-core machine at load 2: within
/// 1.5x of the measured time. Also the cost by which level-2 shards are balanced.
void rope_case_estimate(const RopeCaseDef& d, std::uint64_t* largest_tensor_bytes, std::uint64_t* file_bytes,
                        double* seconds);
/// How many positions the case holds, and the largest (a lazy sweep chunk's included).
std::size_t rope_case_n_positions(const RopeCaseDef& d);
std::int64_t rope_case_last_position(const RopeCaseDef& d);

inline constexpr int kRopeDenseLast = 511;  // dense cases hold every position 0..511
inline constexpr std::size_t kRopeMaxGivenPositions = 2048;  // --positions: scores are T x T

/// A base as it appears in case ids: "1e4", "5e5"; other bases as integers.
std::string rope_base_tag(double base);

/// A stable seed from a case id (FNV-1a), for cases made from a config.
std::uint64_t rope_seed_of(const std::string& id);

/// The hard positions up to `last`, the given boundary positions, and `last` itself (the
/// call's seq_len is last + 1), sorted and without repeats.
std::vector<HardPosition> rope_call_positions(std::int64_t last,
                                              const std::vector<HardPosition>& edges);

/// The positions on both sides of every length boundary of the rule (L0, L, band edges and
/// ramp edges as wavelengths), each with why, capped at `last`.
std::vector<HardPosition> rope_scaling_edges(const RopeModelConfig& m, std::int64_t last);

/// A case definition for one call of a model (heads from the config: 2 q heads, 2 kv heads when
/// the model has as many kv heads as q heads, else 1). `expected` = the model's rule with
/// seq_len = last position + 1.
RopeCaseDef rope_case_for(const RopeModelConfig& m, const std::string& short_id, DType t,
                          std::vector<HardPosition> positions, const std::string& call);

/// The standard calls of a model's rule: one call over the hard positions (and the rule's
/// boundaries), plus for LongRoPE a short call (last position L0 - 1) and for dynamic NTK a call
/// within L (last position L - 1); `positions` non-empty: one call with exactly those. The
/// case ids carry `name` (sanitised; config_case_name for `generate --config`), else m.id.
std::vector<RopeCaseDef> rope_cases_for_config(const RopeModelConfig& m, DType t,
                                               const std::vector<std::int64_t>& positions,
                                               const std::string& name = {});

GoldenCase rope_case_generate(const RopeCaseDef& def);

/// Level 2 of a model (`posenc generate --level 2`, never committed): tables-only cases (cos,
/// sin for every position) of a dense sweep to the context length, cut into calls of `chunk`
/// positions that each also hold the sweep's last position (so every chunk's seq_len is the
/// sweep's: L, for LongRoPE also L0 with the short factors, for dynamic NTK also 2L); one
/// tables-only case of every position within `window` of each boundary (rope_scaling_edges,
/// 2^k up to the context, 2^24); and one full case (q, k, rotations, scores of every pair) at
/// `samples` sampled positions (the boundaries, then evenly spread over the context).
struct RopeLevel2Plan {
  std::int64_t chunk = 8192, window = 8;
  int samples = 48;
};
std::vector<RopeCaseDef> rope_level2_cases(const RopeModelConfig& m, DType t, const std::string& name,
                                           const RopeLevel2Plan& plan = {});

/// The tables-only chunks of a given list of positions (sorted, unique; `call` names them),
/// plus a full case at `samples` of them (first, last, evenly spread): `generate --config
/// --positions` with more than kRopeMaxGivenPositions positions.
std::vector<RopeCaseDef> rope_given_level2_cases(const RopeModelConfig& m, DType t, const std::string& name,
                                                 const std::vector<std::int64_t>& positions,
                                                 const RopeLevel2Plan& plan = {});

/// The built-in engine for rope and rope_scaling cases (params and the scaling rule from the
/// manifest).
TensorMap rope_case_run_engine(const CaseSpec& spec, const TensorMap& golden, const EngineOptions& o);
std::vector<std::string> rope_case_mistakes();

/// An emulated engine pipeline's float32 tables (`fp32`, `bf16`, `f16`: HF's inv_freq, angle
/// fl(fl(p) inv_freq), cosf/sinf, times fl(a); `fp32-recurrence`: ggml's theta recurrence and
/// rule): inv_freq [d/2], cos and sin [positions, d/2] with the factor folded in, the factors.
struct RopePipelineTables {
  std::vector<float> inv_freq, cos, sin;
  float a = 1.0f, softmax = 0.0f;
};
/// `magnitude`: the factors an engine applies instead of the rule's (an engine mistake such as
/// `no-mscale`): the attention factor a (in double, before the pipeline rounds it) and the
/// softmax-scale multiplier; unset: the rule's.
struct RopeMagnitude {
  std::optional<double> a, softmax_multiplier;
};
RopePipelineTables rope_pipeline_tables(const std::string& pipeline, const reference::RopeParams& p,
                                        const reference::RopeScaling& s, int softmax_head_dim,
                                        const std::vector<std::int64_t>& pos,
                                        const RopeMagnitude& magnitude = {});

/// A profile's angle error bounds (absolute, [positions, d/2]) from the error analysis in
/// rope_budgets.cpp (zeros for strict: posenc's kernel bound covers its double angles), A (the
/// attention factor's share of a table entry's error, in eps_f32) and the factor a.
struct RopeAngleErrors {
  std::vector<double> angle;
  double A = 0, a = 1;
};
RopeAngleErrors rope_pipeline_angle_errors(const std::string& profile, const reference::RopeParams& p,
                                           const reference::RopeScaling& s,
                                           const std::vector<std::int64_t>& pos);

/// The budgets of the RoPE stages under one profile (bound and ulps; the angle extras are the
/// caller's, from rope_pipeline_angle_errors): inv_freq, the cos/sin tables, the rotated q/k,
/// the scores (head_dim h) and the scalar factors; A as in RopeAngleErrors. M-RoPE reuses them.
struct RopeStageBudgets {
  ProfileBudget inv_freq, table, rotated, scores, scalar;
};
RopeStageBudgets rope_stage_budgets(const std::string& profile, DType t, double A, int h);

}  // namespace posenc::golden
