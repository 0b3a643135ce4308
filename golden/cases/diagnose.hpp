// The diagnoser: which pipeline and which known mistake explain an engine's output.
//
// verify says whether an output is within a profile's budget; diagnose says what the output
// is. For one case it forms hypotheses, each a (pipeline, mistake) pair that posenc can run:
// every emulated pipeline (exact, fp32, fp32-recurrence, bf16, f16: "you compute the way engine
// X does") without a mistake and with every mistake the scheme's engine knows (`posenc engine
// --mistake`, the bug classes of docs/bug-classes.md): stacked, as a PyTorch engine with GPT-J
// pairing on a NeoX case is (fp32, pairing). A pipeline without a mistake is judged exactly as
// verify judges it (the output against the oracle with that pipeline's profile), so diagnose
// never contradicts verify: it is confirmed when the output passes that profile. A mistake is
// judged against its run instead of the oracle, with the budgets of the run's profile (of the
// claimed profile and fp32 for the exact pipeline), each element's budget on a float pipeline
// widened by how far that pipeline's run lies from the exact run with the same mistake (its own
// rounding of the mistaken computation, which the case's budgets, made for its own convention,
// need not cover): a residual <= 1 of that budget confirms it, and nothing else does. Confirmed
// hypotheses rank first; among confirmed mistakes those on the claimed profile's pipeline first;
// then by residual.
//
// The answer: a correct engine (its output passes the claimed profile) gets no diagnosis. Else
// a profile the output passes is the answer ("claim --profile X"); when it passes several, all
// are named and the one whose run the output lies closest to (Hypothesis::deviation: the
// engine's family) is recommended, with the note that which fits best depends on the engine's
// libm. Else the best confirmed mistake; mistakes with the same residual are reported as a tie
// ("cannot tell apart on this case: A or B"). An output no hypothesis explains is reported as
// unexplained, with the best partial fit when it lies within 4 budgets ("closest, not
// confirmed"), else with none.
//
// RoPE-family cases (rope, rope_scaling) also get fitted hypotheses (golden/cases/rope_fit.hpp):
// the position offset d, the base, a constant magnitude ratio (attention factor) and the angle
// precision, each confirmed by judging the output against the run its fitted value gives (the
// stages a fitted run lacks, such as the softmax scale, against the oracle). M-RoPE cases get
// the streams' and sections' order, a grid's h/w swap, the temporal rule, tokens_per_second
// and the base (mrope_fit_candidates). A fitted
// hypothesis ranks after every confirmed fixed one (a named mistake or pipeline is the better
// answer when both fit); the `offset` mistake carries the fitted d as its evidence.
#pragma once
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "golden/cases/catalog.hpp"
#include "golden/verify/verify.hpp"

namespace posenc::golden {

struct Hypothesis {
  std::string pipeline;  // `posenc engine --pipeline`
  std::string profile;   // the profile whose budgets judge the residual
  std::string mistake;   // "" = none
  Verdict status = Verdict::kError;  // verify's status of the output against this hypothesis's run
  double residual = 0;   // worst element's share of the budget
  /// Confirmed when residual <= limit, which is 1 for every hypothesis: within one budget of
  /// that pipeline's values (for a mistake on a float pipeline, the budget widened element by
  /// element by the pipeline's own rounding of the mistaken computation).
  double limit = 1;
  /// How far the output lies from this hypothesis's run (sum |actual - run| / sum |run| per
  /// stage, averaged; -1: not measured): among pipelines that all pass, the closest is the
  /// engine's family.
  double deviation = -1;
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
  /// The profile to claim: the claimed one when it passes, else the passing pipeline the output
  /// lies closest to; empty when no profile passes.
  std::string recommended_profile;
  /// Mistakes that explain the output equally well (same residual): the case cannot tell them
  /// apart. Empty or one name when the answer is not a tie.
  std::vector<std::string> tied;
  std::vector<Hypothesis> ranked;  // best first; only hypotheses that could be judged
};

/// The runs of posenc's engine (pipeline x mistake) a diagnosis makes, kept for further
/// diagnoses of the same cases (a test diagnosing many outputs of one case): keyed by case id,
/// pipeline and mistake; nullopt where the engine refuses that pair.
struct DiagnoseRunCache {
  std::map<std::tuple<std::string, std::string, std::string>, std::optional<TensorMap>> runs;
};

/// Diagnoses one valid case (a negative control is refused: its values are a mistake already).
Diagnosis diagnose_case(const LoadedCase& lc, const TensorMap& actual,
                        const std::string& claimed_profile, DiagnoseRunCache* cache = nullptr);

/// Text: the verdict line, the summary and the top hypotheses (all of them with `verbose`).
std::string diagnosis_text(const Diagnosis& d, bool verbose);
nlohmann::json diagnosis_json(const Diagnosis& d);

}  // namespace posenc::golden
