// The diagnoser (golden/cases/diagnose.hpp has the method).
#include "golden/cases/diagnose.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "golden/cases/registry.hpp"
#include "golden/cases/rope_fit.hpp"
#include "golden/format/profiles.hpp"
#include "reference/common/errors.hpp"
#include "optimized/common/mutant.hpp"

namespace posenc::golden {
namespace {

const ProfileInfo* profile_of_pipeline(const std::string& pipeline) {
  for (const auto& p : profiles()) {
    if (p.pipeline == pipeline) return &p;
  }
  return nullptr;
}

/// The engine's output judged against one hypothesis's run: the run's values take the place of
/// the oracle's (exact-kind tensors: the target values; the others: the exact companion), with
/// the budgets of `profile`. Declared alternatives are dropped: the hypothesis is the
/// convention. Tensors the run does not produce are not judged.
CaseReport judge_against(const LoadedCase& lc, const TensorMap& run, const TensorMap& actual,
                         const std::string& profile,
                         std::optional<std::int64_t> max_position = std::nullopt) {
  VerifyOptions o;
  o.profile = profile;
  o.max_position = max_position;
  if (POSENC_MUTANT("diagnose_judges_against_oracle")) return verify_case(lc.spec, lc.golden, actual, o);
  CaseSpec spec = lc.spec;
  TensorMap g = lc.golden;
  std::vector<TensorSpec> judged;
  for (TensorSpec t : spec.expected) {
    const auto it = run.find(t.name);
    if (it == run.end()) continue;
    t.alternatives.clear();
    if (t.check.kind == CheckKind::kExact || t.exact.empty()) {
      Tensor v = it->second;
      v.name = t.name;
      g[t.name] = v;
    } else {
      g[t.exact] = tensor_from_f64(t.exact, t.shape, tensor_to_f64(it->second));
    }
    judged.push_back(std::move(t));
  }
  spec.expected = std::move(judged);
  return verify_case(spec, g, actual, o);
}

std::string hypothesis_words(const Hypothesis& h, const std::string& scheme) {
  const ProfileInfo* p = profile_of_pipeline(h.pipeline);
  std::string pipe = h.pipeline == "exact" ? "correctly rounded tables (posenc's kernels)"
                                           : "the " + h.pipeline + " pipeline";
  if (p && h.pipeline != "exact") {
    const std::string s = p->summary;
    pipe += " (" + s.substr(0, s.find(':')) + ")";
  }
  if (h.mistake.empty()) return "computes with " + pipe;
  // The mistake's name, and the bug in engine terms where the scheme says it.
  const auto words = scheme_by_slug(scheme).mistake_words;
  const std::string bug = words ? words(h.mistake) : "";
  const std::string named = "has the " + scheme + " mistake `" + h.mistake + "`" +
                            (bug.empty() ? "" : " (" + bug + ")");
  if (h.pipeline == "exact" && h.profile != "strict") {
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
  for (const auto& c : rope_fit_candidates(lc, actual, offset_plus_one_only)) {
    for (const auto& prof : judge_by) {
      const CaseReport r = judge_against(lc, c.run, actual, prof, c.max_position);
      if (!judged(r.status)) continue;
      Hypothesis h = make_hypothesis("exact", prof, c.parameter);
      h.status = r.status;
      h.residual = r.worst_ratio();
      h.limit = prof == "strict" ? 1 : 2;
      h.worst_tensor = worst_of(r).first;
      h.fit = Hypothesis::Fit{c.parameter, c.value, c.case_value,
                              rope_fit_words(c, fmt_ratio(h.residual) + " of the " + prof +
                                                    " budget")};
      h.words = "has the " + lc.spec.scheme + " mistake `" + c.parameter + "`: " +
                rope_fit_words(c, "");
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

}  // namespace

Diagnosis diagnose_case(const LoadedCase& lc, const TensorMap& actual,
                        const std::string& claimed_profile) {
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

  std::vector<Hypothesis> hs;
  for (const auto& p : profiles()) hs.push_back(make_hypothesis(p.pipeline, p.name, ""));
  // A mistake is judged with the budgets of the claimed profile and of fp32 (the commonest
  // pipeline, for engines that claim strict by default), run on the exact pipeline and on that
  // profile's own (where the scheme's engine serves mistakes there): a float32 engine with an
  // offset is (exact, offset) within the fp32 budget.
  std::vector<std::string> judge_by = {d.claimed_profile};
  if (d.claimed_profile != "fp32") judge_by.push_back("fp32");
  for (const auto& m : s.mistakes()) {
    for (const auto& prof : judge_by) {
      hs.push_back(make_hypothesis("exact", prof, m));
      for (const auto& p : profiles()) {
        if (p.name == prof && p.pipeline != "exact") hs.push_back(make_hypothesis(p.pipeline, prof, m));
      }
    }
  }
  for (auto& h : hs) {
    try {
      EngineOptions eo;
      eo.pipeline = h.pipeline;
      eo.mistake = h.mistake;
      const TensorMap run = s.run_engine(lc.spec, lc.golden, eo);
      const CaseReport r = judge_against(lc, run, actual, h.profile);
      if (!judged(r.status)) continue;  // N/A, ERROR: cannot judge
      h.status = r.status;
      h.residual = r.worst_ratio();
      if (!h.mistake.empty() && h.pipeline == "exact" && h.profile != "strict") h.limit = 2;
      double worst = -1;
      for (const auto& t : r.tensors) {
        if (judged(t.status) && t.max_ratio > worst) {
          worst = t.max_ratio;
          h.worst_tensor = t.name;
        }
      }
    } catch (const std::exception&) {
      continue;  // the pipeline does not serve this case
    }
    h.words = hypothesis_words(h, d.scheme);
    d.ranked.push_back(h);
  }
  // Best first: lower residual; on a tie, no mistake before a mistake, then the order above.
  std::stable_sort(d.ranked.begin(), d.ranked.end(), [](const Hypothesis& a, const Hypothesis& b) {
    if (a.residual != b.residual) return a.residual < b.residual;
    return a.mistake.empty() && !b.mistake.empty();
  });
  if (base.status == Verdict::kFail && !POSENC_MUTANT("diagnose_fits_nothing")) {
    // Fitted hypotheses rank after every confirmed fixed one, and among the rest by residual.
    // When a fixed hypothesis is confirmed, only a confirmed `offset` asks for its fit (d = +1,
    // the evidence): fitting the rest would not change the answer.
    const bool fixed_confirmed = !d.ranked.empty() && d.ranked.front().confirmed();
    const bool offset_confirmed =
        std::any_of(d.ranked.begin(), d.ranked.end(),
                    [](const Hypothesis& h) { return h.mistake == "offset" && h.confirmed(); });
    std::vector<Hypothesis> fitted;
    if (!fixed_confirmed || offset_confirmed) {
      fitted = fitted_hypotheses(lc, actual, judge_by, fixed_confirmed);
    }
    for (auto& f : fitted) {
      if (f.mistake == "offset" && f.fit->value == "+1") {
        bool attached = false;
        for (auto& h : d.ranked) {
          if (h.mistake == "offset" && h.pipeline == "exact") {
            RopeFitCandidate c;
            c.parameter = "offset";
            c.value = "+1";
            h.fit = f.fit;
            h.fit->words = rope_fit_words(c, fmt_ratio(h.residual) + " of the " + h.profile +
                                                 " budget");
            h.words = f.words;
            attached = true;
          }
        }
        if (attached) continue;
      }
      auto at = d.ranked.begin();
      while (at != d.ranked.end() &&
             ((!at->fit && at->confirmed()) ||
              (at->residual <= f.residual && (at->confirmed() || !f.confirmed())))) {
        ++at;
      }
      d.ranked.insert(at, std::move(f));
    }
  }
  if (POSENC_MUTANT("diagnose_ranks_reversed")) std::reverse(d.ranked.begin(), d.ranked.end());

  std::ostringstream sum;
  const auto confirmed = [](const Hypothesis& h) { return h.confirmed(); };
  if (base.status == Verdict::kPass) {
    d.verdict = "correct";
    sum << "passes " << d.claimed_profile << ": nothing to diagnose";
  } else if (d.ranked.empty() || !confirmed(d.ranked.front())) {
    d.verdict = "unexplained";
    sum << "fails " << d.claimed_profile << " and no known pipeline or mistake of " << d.scheme
        << " explains it";
    if (!d.ranked.empty()) {
      const auto& h = d.ranked.front();
      sum << "; closest: it " << h.words << " (residual " << fmt_ratio(h.residual) << " of the "
          << h.profile << " budget, worst in " << h.worst_tensor << ")";
    }
  } else {
    d.verdict = "explained";
    // Prefer a mistake-free explanation (a pipeline difference) when one is confirmed.
    const auto clean = std::find_if(d.ranked.begin(), d.ranked.end(), [&](const Hypothesis& h) {
      return confirmed(h) && h.mistake.empty();
    });
    const Hypothesis& h = clean != d.ranked.end() ? *clean : d.ranked.front();
    sum << "fails " << d.claimed_profile << "; the output " << h.words << " (residual "
        << fmt_ratio(h.residual) << " of the " << h.profile << " budget)";
    if (h.mistake.empty()) {
      sum << ": no mistake, claim --profile " << h.profile;
    } else {
      std::vector<std::string> tied;
      for (const auto& o : d.ranked) {
        if (confirmed(o) && !o.mistake.empty() && o.mistake != h.mistake &&
            o.residual == h.residual && std::find(tied.begin(), tied.end(), o.mistake) == tied.end()) {
          tied.push_back(o.mistake);
        }
      }
      if (!tied.empty()) {
        sum << "; this case cannot tell it from";
        for (const auto& t : tied) sum << " `" << t << "`";
      }
    }
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
  os << "  hypotheses, best first (residual = worst element's share of that profile's budget "
        "against that run; <= 1 confirms, <= 2 for an exact run judged by another profile):\n";
  for (std::size_t i = 0; i < n; ++i) {
    const auto& h = d.ranked[i];
    char buf[160];
    std::snprintf(buf, sizeof buf, "  %2zu. %-9s pipeline %-16s budget %-16s %-24s ", i + 1,
                  fmt_ratio(h.residual).c_str(), h.pipeline.c_str(), h.profile.c_str(),
                  h.mistake.empty() ? "(no mistake)" : h.mistake.c_str());
    os << buf << (h.confirmed() ? "confirmed" : "no") << (h.limit != 1 ? " (limit 2)" : "")
       << "\n";
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
          {"hypotheses", hs}};
}

}  // namespace posenc::golden
