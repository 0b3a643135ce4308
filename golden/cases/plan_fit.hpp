// Fitted parameters of a plan case's output (scheme plan): what diagnose measures instead of
// picking a named mistake from a list.
//
// The diagnoser (golden/cases/diagnose.hpp) runs the fixed mistakes of the plan engine
// (plan_case_mistakes: the other layer type's output, the global RoPE on sliding layers, ...).
// Here the parameters of the case's layer type are fitted to the output, each candidate with the
// run it predicts (the built-in engine, plan_case_run_type, with that value on the case's
// inputs), judged by the diagnoser like a mistake:
//   base                the RoPE base of the type: from q_rot against the rotation's input at
//                       the smallest position > 0 (phi_i = w_i p, least squares of log w_i over
//                       the faster half of the pairs: log w_i = a - (2i / d) log base), rounded to
//                       3 digits; without q_rot, bases 10^2 .. 10^7.5 in quarter decades
//   window              a sliding type's window W + d, d = -3 .. +2 (the case's positions W - 3
//                       .. W + 2 tell each apart)
//   temperature-offset  the temperature's floor((p + b + o) / L), o = -2 .. +2 (b = 1 Llama 4,
//                       0 Mistral; the o of the other rule is the fixed mistake already)
//   temperature-floor   tau without the floor: 1 + c ln(1 + (p + b) / L)
//   temperature-scale   the coefficient c: from |q_rot| / |q| at the tokens past a step when the
//                       output has q_rot (rounded to 4 digits), else c / 2 and 2 c
#pragma once
#include <string>
#include <vector>

#include "golden/cases/catalog.hpp"
#include "golden/cases/rope_fit.hpp"
#include "golden/verify/verify.hpp"

namespace posenc::golden {

/// The candidates for a plan case (empty for other schemes, and for a type these fits do not
/// read). Never throws on odd output values.
std::vector<RopeFitCandidate> plan_fit_candidates(const LoadedCase& lc, const TensorMap& actual);

/// The fit in words, e.g. "window fitted as W + 1 = 1025; the case says 1024 (...)".
std::string plan_fit_words(const RopeFitCandidate& c, const std::string& residual_text);

}  // namespace posenc::golden
