// The diagnoser (golden/cases/diagnose.hpp has the method).
#include "golden/cases/mistakes.hpp"
#include "golden/cases/pipelines.hpp"
#include "golden/cases/diagnose.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <sstream>

#include "golden/cases/plan_fit.hpp"
#include "golden/cases/registry.hpp"
#include "golden/cases/rope_fit.hpp"
#include "golden/format/profiles.hpp"
#include "golden/verify/tensor_source.hpp"
#include "reference/common/mutant.hpp"
#include "reference/common/errors.hpp"

namespace posenc::golden {

namespace {

/// The mistakes this file branches on (golden/cases/mistakes.hpp).
enum class MistakeId { kNone, kOther, kOffset };
const MistakeTable<MistakeId, 1> kMistakes(
    {},
    {{
     {MistakeId::kOffset, "offset"}}});

}  // namespace

namespace {

/// An unexplained output names its best partial fit only when that fit's residual is at most
/// this many budgets.
constexpr double kClosestWithin = 4;

const ProfileInfo* profile_of_pipeline(const std::string& pipeline) {
  for (const auto& p : profiles()) {
    if (p.pipeline == pipeline) return &p;
  }
  return nullptr;
}

/// The engine's output judged against one hypothesis's run: the run's values take the place of
/// the oracle's (exact-kind tensors: the target values; the others: the exact companion), with
/// the budgets of `profile`. Declared alternatives are dropped: the hypothesis is the
/// convention. A tensor the run does not produce (a fitted run has only the RoPE stages) is
/// judged against the oracle: the hypothesis changes nothing there, so a stage it cannot
/// explain (a wrong softmax scale under a fitted angle precision) still counts against it.
/// The budget of a hypothesis (a mistake, or a fitted value) at each element: two of the case's
/// budgets of `profile` (one for the engine's rounding, one for the run's: both compute the same
/// values in that pipeline's arithmetic) plus, for a float pipeline's run (`widen`: the exact
/// pipeline's run of the same hypothesis), how far the run lies from it there: the pipeline's
/// own rounding of the mistaken computation, which the case's budgets (made for its own
/// convention: its pairing, its positions) need not cover. The residual is a share of that
/// budget, and <= 1 confirms the hypothesis. A pipeline without a mistake is judged as verify
/// judges it (scale 1, no widening).
constexpr double kHypothesisBudgets = 2;

/// The case's golden tensors with some replaced (a run's values, widened budgets): no copy of
/// the case's tensors per hypothesis.
class OverlaySource : public TensorSource {
 public:
  OverlaySource(const TensorMap& base, const TensorMap& over) : base_(base), over_(over) {}
  const TensorEntry* find(const std::string& name) const override {
    const TensorEntry* e = over_.find(name);
    return e ? e : base_.find(name);
  }
  std::vector<std::string> names() const override {
    std::vector<std::string> n = base_.names(), o = over_.names();
    n.insert(n.end(), o.begin(), o.end());
    std::sort(n.begin(), n.end());
    n.erase(std::unique(n.begin(), n.end()), n.end());
    return n;
  }
  std::span<const std::uint8_t> read(const std::string& name, std::int64_t b,
                                     std::int64_t e) override {
    return over_.find(name) ? over_.read(name, b, e) : base_.read(name, b, e);
  }

 private:
  MapSource base_, over_;
};

/// A mistake can route any pair's values through any channel (GPT-J pairs on a NeoX case give
/// channel 51 the angle of pair 25, whose float32 error is 20 x pair 51's): on a float pipeline
/// each element's budget also gets the largest angle extra of its position (the elements with
/// the same token or query index; in a tensor without positions, of the whole tensor).
void widen_by_position(const TensorSpec& t, const std::vector<double>& extra, std::vector<double>& x) {
  std::size_t ax = t.axes.size();
  for (std::size_t k = 0; k < t.axes.size() && k < t.shape.size(); ++k) {
    if (t.axes[k].name == "token" || t.axes[k].name == "query") {
      ax = k;
      break;
    }
  }
  if (extra.size() != x.size()) return;
  // A tensor without positions (inv_freq, a table per pair): its largest extra, everywhere.
  std::int64_t inner = 1;
  for (std::size_t k = ax + 1; k < t.shape.size(); ++k) inner *= t.shape[k];
  const std::int64_t rows = ax == t.axes.size() ? 1 : t.shape[ax];
  std::vector<double> row_max(static_cast<std::size_t>(rows), 0.0);
  auto row = [&](std::size_t j) { return static_cast<std::size_t>((static_cast<std::int64_t>(j) / inner) % rows); };
  for (std::size_t j = 0; j < x.size(); ++j) row_max[row(j)] = std::max(row_max[row(j)], extra[j]);
  for (std::size_t j = 0; j < x.size(); ++j) x[j] += row_max[row(j)];
}

CaseReport judge_against(const LoadedCase& lc, const TensorMap& run, const TensorMap& actual,
                         const std::string& profile,
                         std::optional<std::int64_t> max_position = std::nullopt,
                         const TensorMap* widen = nullptr, double scale = kHypothesisBudgets,
                         const CaseSpec* own = nullptr) {
  VerifyOptions o;
  o.profile = profile;
  o.max_position = max_position;
  if (POSENC_MUTANT("diagnose_judges_against_oracle")) return verify_case(lc.spec, lc.golden, actual, o);
  CaseSpec spec = lc.spec;
  TensorMap g;  // what replaces the case's golden tensors
  auto golden_f64 = [&](const std::string& name) {
    const auto it = g.find(name);
    return tensor_to_f64(it != g.end() ? it->second : lc.golden.at(name));
  };
  std::vector<TensorSpec> judged;
  for (TensorSpec t : spec.expected) {
    const auto it = run.find(t.name);
    if (it == run.end()) {
      if (!POSENC_MUTANT("diagnose_skips_stages_the_run_lacks")) judged.push_back(std::move(t));
      continue;
    }
    t.alternatives.clear();
    if (t.check.kind == CheckKind::kExact || t.exact.empty()) {
      Tensor v = it->second;
      v.name = t.name;
      g[t.name] = v;
    } else {
      g[t.exact] = tensor_from_f64(t.exact, t.shape, tensor_to_f64(it->second));
    }
    // A run with its own budgets (`own`: a hypothesis that changes the mask or the angles, a
    // plan oracle run of golden/cases/plan_case.hpp) brings its checks and companions.
    if (own) {
      for (const auto& o : own->expected) {
        if (o.name != t.name) continue;
        t.check = o.check;
        for (const auto& c : o.companions) {
          if (const auto ci = run.find(c.name); ci != run.end()) g[c.name] = ci->second;
        }
      }
    }
    ProfileBudget& b = t.check.profiles[profile];
    if (t.check.kind != CheckKind::kExact && b.applies && (scale != 1 || widen)) {
      b.bound *= scale;
      b.ulps *= scale;
      std::vector<double> x =
          b.extra.empty() ? std::vector<double>(static_cast<std::size_t>(it->second.numel()), 0.0)
                          : golden_f64(b.extra);
      for (auto& v : x) v *= scale;
      const auto w = widen ? widen->find(t.name) : TensorMap::const_iterator();
      if (widen && w != widen->end() && w->second.numel() == it->second.numel() &&
          !POSENC_MUTANT("diagnose_no_pipeline_widening")) {
        const std::vector<double> r = tensor_to_f64(it->second), e = tensor_to_f64(w->second);
        for (std::size_t j = 0; j < x.size(); ++j) {
          const double d = std::abs(r[j] - e[j]);
          if (std::isfinite(d)) x[j] += d;
        }
        if (!b.extra.empty()) widen_by_position(t, golden_f64(b.extra), x);
      }
      b.extra = t.name + ".extra.diagnose";
      g[b.extra] = tensor_from_f64(b.extra, t.shape, x);
    }
    judged.push_back(std::move(t));
  }
  spec.expected = std::move(judged);
  OverlaySource gs(lc.golden, g);
  MapSource as(actual);
  return verify_case(spec, gs, as, o);
}

std::string hypothesis_words(const Hypothesis& h, const std::string& scheme) {
  const ProfileInfo* p = profile_of_pipeline(h.pipeline);
  std::string pipe = pipelines::of(h.pipeline) == Pipeline::kExact ? "correctly rounded tables (posenc's kernels)"
                                           : "the " + h.pipeline + " pipeline";
  if (p && pipelines::of(h.pipeline) != Pipeline::kExact) {
    const std::string s = p->summary;
    pipe += " (" + s.substr(0, s.find(':')) + ")";
  }
  if (h.mistake.empty()) return "computes with " + pipe;
  // The mistake's name, and the bug in engine terms where the scheme says it.
  const auto words = scheme_by_slug(scheme).mistake_words;
  const std::string bug = words ? words(h.mistake) : "";
  const std::string named = "has the " + scheme + " mistake `" + h.mistake + "`" +
                            (bug.empty() ? "" : " (" + bug + ")");
  if (pipelines::of(h.pipeline) == Pipeline::kExact && h.profile != "strict") {
    return named + " (within the " + h.profile + " pipeline's error)";
  }
  return named + ", computed with " + pipe;
}

Hypothesis make_hypothesis(std::string pipeline, std::string profile, std::string mistake) {
  Hypothesis h;
  h.pipeline = std::move(pipeline);
  h.profile = std::move(profile);
  h.mistake = std::move(mistake);
  return h;
}

std::string fmt_ratio(double r) {
  char buf[32];
  if (std::isinf(r)) return "inf";
  std::snprintf(buf, sizeof buf, r < 1e4 ? "%.3g" : "%.2e", r);
  return buf;
}

/// The worst judged tensor of a report and its ratio.
std::pair<std::string, double> worst_of(const CaseReport& r) {
  std::pair<std::string, double> w{"", -1};
  for (const auto& t : r.tensors) {
    if (judged(t.status) && t.max_ratio > w.second) {
      w = {t.name, t.max_ratio};
    }
  }
  return w;
}

/// The fitted hypotheses of a RoPE-family output (golden/cases/rope_fit.hpp): per parameter the
/// candidate value and judging profile with the lowest residual. The best offset of +1 is the
/// `offset` mistake already: it is returned too, and the caller attaches it as evidence.
std::vector<Hypothesis> fitted_hypotheses(const LoadedCase& lc, const TensorMap& actual,
                                          const std::vector<std::string>& judge_by,
                                          bool offset_plus_one_only) {
  std::vector<Hypothesis> best;
  const bool mrope = lc.spec.scheme == "mrope";
  const bool plan = lc.spec.scheme == "plan";
  const ProfileInfo* claimed = nullptr;
  for (const auto& p : profiles()) {
    if (p.name == judge_by.front()) claimed = &p;
  }
  std::vector<RopeFitCandidate> candidates =
      mrope ? mrope_fit_candidates(lc, actual, claimed ? claimed->pipeline : "exact")
            : rope_fit_candidates(lc, actual, offset_plus_one_only);
  if (!offset_plus_one_only) {  // a plan type's parameters (golden/cases/plan_fit.hpp)
    for (auto& c : plan_fit_candidates(lc, actual)) candidates.push_back(std::move(c));
  }
  auto words = [&](const RopeFitCandidate& c, const std::string& residual) {
    return plan ? plan_fit_words(c, residual)
                : mrope ? mrope_fit_words(c, residual) : rope_fit_words(c, residual);
  };
  for (const auto& c : candidates) {
    // A float pipeline's run is judged by that pipeline's profile (its budget widened by the
    // pipeline's own rounding of the fitted computation); an exact run by every profile given.
    const ProfileInfo* own = pipelines::of(c.pipeline) == Pipeline::kExact ? nullptr : profile_of_pipeline(c.pipeline);
    const std::vector<std::string> by = own ? std::vector<std::string>{own->name} : judge_by;
    for (const auto& prof : by) {
      const CaseReport r = judge_against(lc, c.run, actual, prof, c.max_position,
                                         c.widen ? &*c.widen : nullptr, kHypothesisBudgets,
                                         c.budgets ? &*c.budgets : nullptr);
      if (!judged(r.status)) continue;
      Hypothesis h = make_hypothesis(c.pipeline, prof, c.parameter);
      h.status = r.status;
      h.residual = r.worst_ratio();
      h.worst_tensor = worst_of(r).first;
      h.fit = Hypothesis::Fit{c.parameter, c.value, c.case_value,
                              words(c, fmt_ratio(h.residual) + " of the " + prof + " budget")};
      h.words = "has the " + lc.spec.scheme + " mistake `" + c.parameter + "`: " + words(c, "");
      auto it = std::find_if(best.begin(), best.end(),
                             [&](const Hypothesis& b) { return b.mistake == c.parameter; });
      if (it == best.end()) {
        best.push_back(std::move(h));
      } else if (h.residual < it->residual) {
        *it = std::move(h);
      }
    }
  }
  return best;
}

/// How far an output lies from a run, scale-free: per stage both hold, sum |actual - run| /
/// sum |run|, averaged over the stages. Among pipelines that all pass, the one the output lies
/// closest to is the engine's family (an HF float32 engine whose libm rounds cos a little
/// differently is still far closer to the fp32 run than to ggml's recurrence).
double deviation_from(const CaseSpec& spec, const TensorMap& run, const TensorMap& actual) {
  double total = 0;
  int n = 0;
  for (const auto& t : spec.expected) {
    const auto r = run.find(t.name);
    const auto a = actual.find(t.name);
    if (r == run.end() || a == actual.end() || r->second.numel() != a->second.numel()) continue;
    double diff = 0, mag = 0;
    for (std::int64_t i = 0; i < r->second.numel(); ++i) {
      const double x = r->second.get_f64(i), y = a->second.get_f64(i);
      if (!std::isfinite(x) || !std::isfinite(y)) continue;
      diff += std::abs(y - x);
      mag += std::abs(x);
    }
    total += mag > 0 ? diff / mag : (diff > 0 ? 1 : 0);
    ++n;
  }
  return n ? total / n : -1;
}

bool same_outputs(const TensorMap& a, const TensorMap& b) {
  if (a.size() != b.size()) return false;
  for (const auto& [name, t] : a) {
    const auto it = b.find(name);
    if (it == b.end() || it->second.shape != t.shape || it->second.data != t.data) return false;
  }
  return true;
}

/// Fills a hypothesis from a report; false when the report judged nothing.
bool judge_into(Hypothesis& h, const CaseReport& r) {
  if (!judged(r.status)) return false;  // N/A, ERROR: cannot judge
  h.status = r.status;
  h.residual = r.worst_ratio();
  h.worst_tensor = worst_of(r).first;
  return true;
}

/// The fixed hypotheses: every (pipeline, mistake) the scheme's engine runs on this case.
/// A pipeline without a mistake is judged as verify judges it (against the oracle, with that
/// pipeline's profile): "you compute the way engine X does" is confirmed exactly when the output
/// passes X's profile, so diagnose never contradicts verify. A mistake is judged against its run:
/// on the exact pipeline with the budgets of each profile in `judge_by`, on an emulated
/// pipeline with that pipeline's profile, each within the hypothesis budget (judge_against). A
/// mistake whose run equals the pipeline's run without it is invisible here and not listed.
std::vector<Hypothesis> fixed_hypotheses(const LoadedCase& lc, const TensorMap& actual,
                                         const SchemeEntry& s,
                                         const std::vector<std::string>& judge_by,
                                         DiagnoseRunCache* cache) {
  std::vector<Hypothesis> out;
  std::vector<std::string> mistakes = {""};
  for (const auto& m : s.mistakes()) mistakes.push_back(m);
  std::map<std::string, TensorMap> exact_runs;  // mistake -> the exact pipeline's run
  for (const auto& p : profiles()) {
    std::optional<TensorMap> clean;
    for (const auto& m : mistakes) {
      std::optional<TensorMap> got;
      const auto key = std::make_tuple(lc.spec.id, p.pipeline, m);
      if (cache && cache->runs.count(key)) {
        got = cache->runs.at(key);
      } else {
        try {
          EngineOptions eo;
          eo.pipeline = p.pipeline;
          eo.mistake = m;
          got = s.run_engine(lc.spec, lc.golden, eo);
        } catch (const std::exception&) {
          got.reset();  // the pipeline does not serve this case, or not this mistake on it
        }
        if (cache) cache->runs[key] = got;
      }
      if (!got) {
        if (m.empty()) break;
        continue;
      }
      TensorMap run = std::move(*got);
      if (m.empty()) {
        Hypothesis h = make_hypothesis(p.pipeline, p.name, "");
        VerifyOptions vo;
        vo.profile = p.name;
        const CaseReport r = POSENC_MUTANT("diagnose_pipelines_judged_against_run")
                                 ? judge_against(lc, run, actual, p.name, std::nullopt, nullptr, 1)
                                 : verify_case(lc.spec, lc.golden, actual, vo);
        if (judge_into(h, r)) {
          h.deviation = deviation_from(lc.spec, run, actual);
          out.push_back(std::move(h));
        }
        clean = std::move(run);
        continue;
      }
      if (clean && same_outputs(*clean, run)) continue;
      if (pipelines::of(p.pipeline) == Pipeline::kExact) exact_runs[m] = run;
      // The budgets are the case's (its pairing, its positions): under a mistake they can be
      // far tighter than the pipeline's own rounding of the mistaken computation; that rounding,
      // element by element, is how far the exact run with the mistake lies from this run.
      const TensorMap* widen =
          pipelines::of(p.pipeline) != Pipeline::kExact && exact_runs.count(m) ? &exact_runs.at(m) : nullptr;
      const std::vector<std::string> by =
          pipelines::of(p.pipeline) == Pipeline::kExact ? judge_by : std::vector<std::string>{p.name};
      for (const auto& prof : by) {
        Hypothesis h = make_hypothesis(p.pipeline, prof, m);
        if (!judge_into(h, judge_against(lc, run, actual, prof, std::nullopt, widen))) continue;
        h.deviation = deviation_from(lc.spec, run, actual);
        out.push_back(std::move(h));
      }
    }
  }
  return out;
}

/// Inserts the fitted hypotheses (golden/cases/rope_fit.hpp) of a failing output: after every
/// confirmed fixed one, and among the rest by residual. When a fixed hypothesis is confirmed,
/// only a confirmed `offset` asks for its fit (d = +1, the evidence): fitting the rest would not
/// change the answer.
void add_fitted(const LoadedCase& lc, const TensorMap& actual,
                const std::vector<std::string>& judge_by, std::vector<Hypothesis>& ranked) {
  const bool fixed_confirmed = !ranked.empty() && ranked.front().confirmed();
  const bool offset_confirmed =
      std::any_of(ranked.begin(), ranked.end(),
                  [](const Hypothesis& h) { return kMistakes.is(h.mistake, MistakeId::kOffset) && h.confirmed(); });
  std::vector<Hypothesis> fitted;
  if (!fixed_confirmed || offset_confirmed) {
    fitted = fitted_hypotheses(lc, actual, judge_by, fixed_confirmed);
  }
  for (auto& f : fitted) {
    if (kMistakes.is(f.mistake, MistakeId::kOffset) && f.fit->value == "+1") {
      bool attached = false;
      for (auto& h : ranked) {
        if (kMistakes.is(h.mistake, MistakeId::kOffset) && pipelines::of(h.pipeline) == Pipeline::kExact) {
          RopeFitCandidate c;
          c.parameter = "offset";
          c.value = "+1";
          h.fit = f.fit;
          h.fit->words =
              rope_fit_words(c, fmt_ratio(h.residual) + " of the " + h.profile + " budget");
          h.words = f.words;
          attached = true;
        }
      }
      if (attached) continue;
    }
    auto at = ranked.begin();
    while (at != ranked.end() &&
           ((!at->fit && at->confirmed()) ||
            (at->residual <= f.residual && (at->confirmed() || !f.confirmed())))) {
      ++at;
    }
    ranked.insert(at, std::move(f));
  }
}

/// Two residuals a case cannot tell apart: equal to within rounding of the ratio itself.
bool same_residual(double a, double b) {
  return a == b || std::abs(a - b) <= 1e-9 * std::max(std::abs(a), std::abs(b));
}

/// The summary of a failing output with a confirmed hypothesis. A pipeline the output passes
/// comes first (verify accepts that claim): every such profile is named, the one whose run the
/// output lies closest to recommended. Else the best mistake, or the mistakes tied with it.
void explain(Diagnosis& d, std::ostringstream& sum) {
  std::vector<const Hypothesis*> pipes;
  for (const auto& h : d.ranked) {
    if (h.confirmed() && h.mistake.empty() && !h.fit) pipes.push_back(&h);
  }
  if (!pipes.empty()) {
    const Hypothesis* best = pipes.front();  // ranked: the closest run first
    d.recommended_profile = best->profile;
    sum << "fails " << d.claimed_profile << "; the output " << best->words << " (passes "
        << best->profile << " at " << fmt_ratio(best->residual) << " of its budget)"
        << ": no mistake, claim --profile " << best->profile;
    if (pipes.size() > 1) {
      sum << "; it also passes";
      for (const Hypothesis* h : pipes) {
        if (h != best) sum << " " << h->profile << " (" << fmt_ratio(h->residual) << ")";
      }
      sum << ": " << best->profile
          << " is the pipeline whose output it lies closest to; which of them fits best "
             "depends on the engine's libm (how its cos and sin round), and verify accepts "
             "each";
    }
    return;
  }
  const Hypothesis& h = d.ranked.front();
  for (const auto& o : d.ranked) {
    if (o.confirmed() && !o.mistake.empty() && same_residual(o.residual, h.residual) &&
        std::find(d.tied.begin(), d.tied.end(), o.mistake) == d.tied.end()) {
      d.tied.push_back(o.mistake);
    }
  }
  if (POSENC_MUTANT("diagnose_names_one_of_a_tie")) d.tied.resize(std::min<std::size_t>(d.tied.size(), 1));
  if (d.tied.size() > 1) {
    sum << "fails " << d.claimed_profile << "; cannot tell apart on this case:";
    for (std::size_t i = 0; i < d.tied.size(); ++i) {
      sum << (i ? " or" : "") << " `" << d.tied[i] << "`";
    }
    sum << " (each explains the output, residual " << fmt_ratio(h.residual) << " of the "
        << h.profile << " budget; a case that separates them is needed); best listed: it "
        << h.words;
    return;
  }
  sum << "fails " << d.claimed_profile << "; the output " << h.words << " (residual "
      << fmt_ratio(h.residual) << " of the " << h.profile << " budget)";
}

}  // namespace

Diagnosis diagnose_case(const LoadedCase& lc, const TensorMap& actual,
                        const std::string& claimed_profile, DiagnoseRunCache* cache) {
  if (lc.spec.result == "invalid") {
    throw_invalid("diagnose_case", "case is a negative control (its values hold a mistake "
                                   "already; diagnose a valid case)", lc.spec.id);
  }
  if (canonical_profile(claimed_profile).empty()) {
    throw_invalid("diagnose_case", "claimed_profile is not one of " + profile_list_text(),
                  claimed_profile);
  }
  const SchemeEntry& s = scheme_by_slug(lc.spec.scheme);
  Diagnosis d;
  d.id = lc.spec.id;
  d.scheme = lc.spec.scheme;
  d.claimed_profile = canonical_profile(claimed_profile);
  VerifyOptions vo;
  vo.profile = d.claimed_profile;
  const CaseReport base = verify_case(lc.spec, lc.golden, actual, vo);
  d.verify_status = base.status;
  d.verify_ratio = base.worst_ratio();

  // A mistake on the exact pipeline is judged with the budgets of the claimed profile and of
  // fp32 (the commonest pipeline, for engines that claim strict by default).
  std::vector<std::string> judge_by = {d.claimed_profile};
  if (d.claimed_profile != "fp32") judge_by.push_back("fp32");
  d.ranked = fixed_hypotheses(lc, actual, s, judge_by, cache);
  for (auto& h : d.ranked) h.words = hypothesis_words(h, d.scheme);
  // Best first: confirmed before unconfirmed; confirmed pipelines without a mistake (profiles
  // the output passes) first, the one whose run the output lies closest to leading; then lower
  // residual; on a tie, no mistake before a mistake, then the order above.
  // Among confirmed mistakes, those computed the way the claimed profile's pipeline computes
  // come first (a PyTorch engine that claims fp32 is told its mistake on fp32, not on ggml's
  // recurrence, when both explain it).
  const ProfileInfo* claimed_info = nullptr;
  for (const auto& p : profiles()) {
    if (p.name == d.claimed_profile) claimed_info = &p;
  }
  const std::string claimed_pipeline = claimed_info ? claimed_info->pipeline : "";
  auto claimed_family = [&](const Hypothesis& h) {
    return h.pipeline == claimed_pipeline ||
           (pipelines::of(h.pipeline) == Pipeline::kExact && h.profile == d.claimed_profile);
  };
  std::stable_sort(d.ranked.begin(), d.ranked.end(), [&](const Hypothesis& a, const Hypothesis& b) {
    if (a.confirmed() != b.confirmed()) return a.confirmed();
    if (a.confirmed() && a.mistake.empty() != b.mistake.empty()) return a.mistake.empty();
    if (a.confirmed() && !a.mistake.empty() && claimed_family(a) != claimed_family(b) &&
        !POSENC_MUTANT("diagnose_claimed_pipeline_not_first")) {
      return claimed_family(a);
    }
    if (a.confirmed() && a.mistake.empty() && b.mistake.empty() && a.deviation != b.deviation &&
        !POSENC_MUTANT("diagnose_recommends_lowest_residual")) {
      return a.deviation < b.deviation;
    }
    if (a.residual != b.residual) return a.residual < b.residual;
    return a.mistake.empty() && !b.mistake.empty();
  });
  if (base.status == Verdict::kFail && !POSENC_MUTANT("diagnose_fits_nothing")) {
    add_fitted(lc, actual, judge_by, d.ranked);
  }
  if (POSENC_MUTANT("diagnose_ranks_reversed")) std::reverse(d.ranked.begin(), d.ranked.end());

  std::ostringstream sum;
  if (base.status == Verdict::kPass) {
    d.verdict = "correct";
    d.recommended_profile = d.claimed_profile;
    sum << "passes " << d.claimed_profile << ": nothing to diagnose";
  } else if (d.ranked.empty() || !d.ranked.front().confirmed()) {
    d.verdict = "unexplained";
    sum << "fails " << d.claimed_profile << " and no known pipeline or mistake of " << d.scheme
        << " explains it";
    // A closest fit is named only when it comes within a small factor of confirming: a
    // hypothesis at 1e5 of its budget is no answer, and naming it misleads.
    if (!d.ranked.empty() && d.ranked.front().residual <= kClosestWithin &&
        !POSENC_MUTANT("diagnose_closest_always_named")) {
      const auto& h = d.ranked.front();
      sum << "; closest, not confirmed: it " << h.words << " (residual " << fmt_ratio(h.residual)
          << " of the " << h.profile << " budget, worst in " << h.worst_tensor << ")";
    } else if (!d.ranked.empty()) {
      sum << "; no hypothesis comes within " << fmt_ratio(kClosestWithin)
          << " budgets (the best is at " << fmt_ratio(d.ranked.front().residual) << ")";
    }
  } else {
    d.verdict = "explained";
    explain(d, sum);
  }
  d.summary = sum.str();
  return d;
}

std::string diagnosis_text(const Diagnosis& d, bool verbose) {
  std::ostringstream os;
  os << "diagnose " << d.id << " (" << d.scheme << "): " << d.verdict << "\n  " << d.summary
     << "\n";
  if (d.verdict == "correct" && !verbose) return os.str();
  const std::size_t n = verbose ? d.ranked.size() : std::min<std::size_t>(d.ranked.size(), 5);
  os << "  hypotheses, best first (residual = worst element's share of that profile's budget, "
        "against the oracle for a pipeline without a mistake (as verify), against the run for "
        "a mistake, its budget on a float pipeline widened by that pipeline's own rounding of "
        "the mistaken computation; <= 1 confirms):\n";
  for (std::size_t i = 0; i < n; ++i) {
    const auto& h = d.ranked[i];
    char buf[160];
    std::snprintf(buf, sizeof buf, "  %2zu. %-9s pipeline %-16s budget %-16s %-24s ", i + 1,
                  fmt_ratio(h.residual).c_str(), h.pipeline.c_str(), h.profile.c_str(),
                  h.mistake.empty() ? "(no mistake)" : h.mistake.c_str());
    os << buf << (h.confirmed() ? "confirmed" : "no");
    if (h.limit != 1) os << " (limit " << fmt_ratio(h.limit) << ")";
    os << "\n";
    if (h.fit) os << "      fitted: " << h.fit->words << "\n";
  }
  return os.str();
}

nlohmann::json diagnosis_json(const Diagnosis& d) {
  nlohmann::json hs = nlohmann::json::array();
  for (const auto& h : d.ranked) {
    nlohmann::json j = {{"pipeline", h.pipeline}, {"profile", h.profile}, {"mistake", h.mistake},
                  {"confirmed", h.confirmed()}, {"limit", h.limit},
                  {"worst_tensor", h.worst_tensor}, {"words", h.words}};
    // As verify's JSON: a non-finite residual is null with residual_nonfinite "inf".
    j["residual"] = std::isinf(h.residual) ? nlohmann::json(nullptr) : nlohmann::json(h.residual);
    if (std::isinf(h.residual)) j["residual_nonfinite"] = "inf";
    if (h.fit) {
      j["fit"] = {{"parameter", h.fit->parameter}, {"value", h.fit->value},
                  {"case_value", h.fit->case_value}, {"words", h.fit->words}};
    }
    hs.push_back(std::move(j));
  }
  return {{"id", d.id},
          {"scheme", d.scheme},
          {"claimed_profile", d.claimed_profile},
          {"verify_status", to_string(d.verify_status)},
          {"verdict", d.verdict},
          {"summary", d.summary},
          {"recommended_profile", d.recommended_profile},
          {"tied", d.tied},
          {"hypotheses", hs}};
}

}  // namespace posenc::golden
