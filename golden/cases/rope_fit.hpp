// Fitted parameters of a RoPE-family output (rope, rope_scaling): the numbers behind a diagnosis.
//
// The diagnoser (golden/cases/diagnose.hpp) runs fixed mistakes (`offset` is +1). Here the
// output itself is measured: the angle and magnitude of every rotation pair are read back, from
// cos and sin when the engine gave them, else from q_rot against the input q (y = m e^{i phi} x
// for each pair), and four parameters are fitted:
//   offset            a uniform position offset d in -4..+4 (angles (p + d) w_i)
//   base              theta from the pair frequencies at the smallest position <= 3
//                     (log w_i = -(2i / rotary_dim) log base, least squares over the fast pairs)
//   attention-factor  a constant magnitude ratio (median of |y| / |x| over the case's a)
//   angle-precision   float16, bfloat16 or float32 angles fl(fl(p) fl(w_i)) (the angle error
//                     grows with the angle at that precision's unit roundoff)
// Each candidate value comes with the run it predicts (cos, sin, q_rot, k_rot computed in double
// from those angles and rounded to the case dtype; scores from those rotations and the fitted
// attention factor where the case has those stages; inv_freq for a fitted base, and for 16-bit
// angles also as an engine that casts inv_freq first writes it); the diagnoser judges the
// output against each run with a profile's budgets (the stages a run lacks, against the
// oracle), so a fitted value is confirmed the same way a mistake is.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "golden/cases/catalog.hpp"
#include "golden/verify/verify.hpp"

namespace posenc::golden {

struct RopeFitCandidate {
  std::string parameter;   // "offset", "base", "attention-factor", "angle-precision"; mrope:
                           // "stream-order", "section-order", "grid-hw-swap", "temporal",
                           // "tokens-per-second", "base"
  std::string value;       // as said: "+1", "10000", "1.1", "float16"
  std::string case_value;  // what the case says: "0", "500000", "1", "correctly rounded"
  std::string evidence;    // what the measurement says, in words (may be empty)
  double number = 0;       // the fitted value as a number (precision: its unit roundoff)
  TensorMap run;           // the stages this value gives (cos, sin, q_rot, k_rot; base: inv_freq)
  std::optional<std::int64_t> max_position;  // judge only up to here (float16 overflow)
  /// The run's own budgets (its own case: a plan type whose mask or angles differ from the
  /// case's, golden/cases/plan_fit.hpp), with their companions in `run`; none: the case's.
  std::optional<CaseSpec> budgets;
  /// The pipeline whose numerics the run follows ("exact": correctly rounded; "fp32": float32
  /// angles as HF computes them) and, for a float pipeline's run, the same value's exact run:
  /// the diagnoser widens each element's budget by how far the two lie apart (the pipeline's
  /// own rounding of the fitted computation) and judges it with that pipeline's profile only.
  std::string pipeline = "exact";
  std::optional<TensorMap> widen;
};

/// The candidates for a rope or rope_scaling case (empty for other schemes, and when the output
/// has neither cos/sin nor q_rot of the case's shape). Never throws on odd output values.
/// `offset_plus_one_only`: just the offset d = +1 (the evidence of a confirmed `offset`).
std::vector<RopeFitCandidate> rope_fit_candidates(const LoadedCase& lc, const TensorMap& actual,
                                                  bool offset_plus_one_only = false);

/// The fit in words, e.g. "positions offset by +1 (fitted d = +1 of -4..+4, residual 0.3)".
std::string rope_fit_words(const RopeFitCandidate& c, const std::string& residual_text);

/// M-RoPE (golden/schemes/mrope/mrope_golden.cpp): the position streams' order (all 6; with the positions
/// stage as the engine wrote it, permuted or not), the mrope_section order (all 6), a grid read
/// as (t, w, h), the temporal rule (frame index, float32 or float64 product, integer seconds)
/// and tokens_per_second (fitted from the written positions, else the config defaults 1, 2, 4),
/// and the base (fitted from text tokens' pair frequencies). Each on the exact pipeline and on
/// `pipeline` (the claimed profile's, when it serves the case: widened by the exact run).
/// Empty for vision-tower and trace cases.
std::vector<RopeFitCandidate> mrope_fit_candidates(const LoadedCase& lc, const TensorMap& actual,
                                                   const std::string& pipeline);
/// The words of an M-RoPE fit.
std::string mrope_fit_words(const RopeFitCandidate& c, const std::string& residual_text);

}  // namespace posenc::golden
