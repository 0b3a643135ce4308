// The diagnoser: which pipeline and which known mistake explain an engine's output.
//
// verify says whether an output is within a profile's budget; diagnose says what the output
// is. For one case it forms hypotheses, each a (pipeline, mistake) pair that posenc can run:
// every emulated pipeline without a mistake (exact, fp32, fp32-recurrence, bf16, f16: "you
// compute the way engine X does") and every mistake the scheme's engine knows (`posenc engine
// --mistake`, the bug classes of docs/bug-classes.md) with the exact and the fp32 pipeline.
// Each hypothesis is run through the scheme's engine, and the engine's output is judged against
// that run instead of the oracle, with the budgets of the hypothesis's profile: a residual
// <= 1 (<= 2 for an exact run judged by another profile, Hypothesis::limit) confirms the hypothesis (the output is what that pipeline with that mistake computes,
// within what the pipeline's own error analysis allows). Hypotheses are ranked by residual;
// ties (mistakes a case cannot tell apart) are reported together. A correct engine (its output
// passes the claimed profile) gets no diagnosis; an output no hypothesis explains is reported
// as unexplained, with the best partial fit.
//
// RoPE-family cases (rope, rope_scaling) also get fitted hypotheses (golden/cases/rope_fit.hpp):
// the position offset d, the base, a constant magnitude ratio (attention factor) and the angle
// precision, each confirmed by judging the output against the run its fitted value gives. A
// fitted hypothesis ranks after every confirmed fixed one (a named mistake or pipeline is the
// better answer when both fit); the `offset` mistake carries the fitted d as its evidence.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "golden/cases/catalog.hpp"
#include "golden/verify/verify.hpp"

namespace posenc::golden {

struct Hypothesis {
  std::string pipeline;  // `posenc engine --pipeline`
  std::string profile;   // the profile whose budgets judge the residual
  std::string mistake;   // "" = none
  Verdict status = Verdict::kError;  // verify's status of the output against this hypothesis's run
  double residual = 0;   // worst element's share of the budget
  /// Confirmed when residual <= limit: 1 when the run is the hypothesis's own pipeline; 2 for a
  /// mistake run on the exact pipeline and judged with another profile's budget (the engine is
  /// within one budget of the mistake's exact values and the run within the strict budget of
  /// them, so within about two budgets of the run).
  double limit = 1;
  bool confirmed() const { return residual <= limit; }
  std::string worst_tensor;
  std::string words;  // one sentence
  /// A fitted parameter (golden/cases/rope_fit.hpp): its value, the case's, the fit in words.
  struct Fit {
    std::string parameter, value, case_value, words;
  };
  std::optional<Fit> fit;
};

struct Diagnosis {
  std::string id, scheme, claimed_profile;
  Verdict verify_status = Verdict::kError;  // the output against the oracle under the claimed profile
  double verify_ratio = 0;
  /// "correct" (passes the claimed profile), "explained" (a hypothesis is confirmed),
  /// "unexplained" (none is; ranked still holds the best partial fits).
  std::string verdict;
  std::string summary;  // one or two sentences, the answer in words
  std::vector<Hypothesis> ranked;  // best first; only hypotheses that could be judged
};

/// Diagnoses one valid case (a negative control is refused: its values are a mistake already).
Diagnosis diagnose_case(const LoadedCase& lc, const TensorMap& actual,
                        const std::string& claimed_profile);

/// Text: the verdict line, the summary and the top hypotheses (all of them with `verbose`).
std::string diagnosis_text(const Diagnosis& d, bool verbose);
nlohmann::json diagnosis_json(const Diagnosis& d);

}  // namespace posenc::golden
