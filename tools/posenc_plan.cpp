// `posenc verify` and `posenc diagnose` on a plan manifest: tools/posenc_plan.hpp.
#include "golden/cases/mistakes.hpp"
#include "tools/posenc_plan.hpp"

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <map>
#include <sstream>

#include "golden/cases/diagnose.hpp"
#include "golden/verify/catalog.hpp"

namespace posenc::tools {

namespace {

/// The mistakes this file branches on (::posenc::golden::golden/cases/mistakes.hpp).
enum class MistakeId { kNone, kOther, kOtherLayerType };
const ::posenc::golden::MistakeTable<MistakeId, 1> kMistakes(
    {"plan"},
    {{
     {MistakeId::kOtherLayerType, "other-layer-type"}}});

}  // namespace


namespace fs = std::filesystem;
using golden::CaseReport;
using golden::PlanManifest;
using golden::Verdict;
using Json = nlohmann::json;

namespace {

std::string verdict_word(const CaseReport* r) {
  if (r == nullptr) return "NO OUTPUT";
  switch (r->status) {
    case Verdict::kPass:
      return "PASS";
    case Verdict::kFail:
      return "FAIL";
    case Verdict::kError:
      return "ERROR";
    case Verdict::kNotApplicable:
      return "NOT APPLICABLE";
    case Verdict::kInconclusive:
      return "INCONCLUSIVE";
    default:
      return "NO OUTPUT";
  }
}

std::string ratio_text(double r) {
  char buf[32];
  std::snprintf(buf, sizeof buf, r < 1e4 ? "%.3g" : "%.3g", r);
  return buf;
}

/// The worst judged tensor of a report: "probs at 4.1e+06 of its budget".
std::string worst_words(const CaseReport& r) {
  std::string name;
  double w = -1;
  for (const auto& t : r.tensors) {
    if (golden::judged(t.status) && t.max_ratio > w) {
      w = t.max_ratio;
      name = t.name;
    }
  }
  if (w < 0) return "";
  return "worst " + ratio_text(w) + " of budget in " + name;
}

std::size_t name_width(const PlanManifest& plan) {
  std::size_t width = 0;
  for (const auto& t : plan.types) width = std::max(width, t.name.size());
  return width;
}

}  // namespace

int print_plan_summary(const PlanManifest& plan, const std::vector<CaseReport>& reports,
                       Json* json) {
  const std::size_t width = name_width(plan);
  int failed = 0, layers_failed = 0, missing = 0;
  Json types = Json::array();
  std::vector<int> failing;
  std::cout << "plan " << plan.model << ": " << plan.n_layers << " layers, " << plan.types.size()
            << " layer types\n";
  for (const auto& t : plan.types) {
    const CaseReport* r = nullptr;
    for (const auto& x : reports) {
      if (x.id == t.case_id && x.status != Verdict::kNoOutput) r = &x;
    }
    const std::string verdict = verdict_word(r);
    if (verdict != "PASS") {
      ++failed;
      missing += r == nullptr;
      layers_failed += static_cast<int>(t.layers.size());
      failing.insert(failing.end(), t.layers.begin(), t.layers.end());
    }
    types.push_back({{"name", t.name}, {"case", t.case_id}, {"verdict", verdict},
                     {"layers", t.layers}});
    std::cout << "  " << t.name << std::string(width - t.name.size(), ' ') << "  " << verdict
              << ": layers " << golden::plan_layer_ranges(t.layers) << " (" << t.layers.size()
              << " layers; case " << t.case_id << ")\n";
  }
  std::cout << "plan " << plan.model << ": "
            << (failed == 0 ? std::string("PASS, every layer")
                            : std::string(failed == 1 ? "1 layer type"
                                                      : std::to_string(failed) + " layer types") +
                                  " not passing" +
                                  (missing ? " (" + std::to_string(missing) +
                                                 " without output, which fails its layers)"
                                           : std::string()) +
                                  ", " + std::to_string(layers_failed) + " of " +
                                  std::to_string(plan.n_layers) + " layers affected")
            << "\n";
  if (json) {
    std::sort(failing.begin(), failing.end());
    *json = {{"model", plan.model},   {"n_layers", plan.n_layers},
             {"verdict", failed == 0 ? "PASS" : "FAIL"},
             {"layers_failing", failing}, {"types", types}};
  }
  return layers_failed;
}

int plan_layer_table_report(const PlanManifest& plan, const fs::path& table,
                            const std::string& format, Json* json) {
  const auto diffs = golden::plan_layer_table_check(plan, table);
  std::vector<int> layers;
  for (const auto& d : diffs) {
    if (layers.empty() || layers.back() != d.layer) layers.push_back(d.layer);
  }
  if (format == "json") {
    Json arr = Json::array();
    for (const auto& d : diffs) {
      arr.push_back({{"layer", d.layer},
                     {"type", d.type},
                     {"key", d.key},
                     {"plan", Json::parse(d.plan_value)},
                     {"engine", Json::parse(d.engine_value)}});
    }
    (*json)["layer_table"] = {
        {"file", table.string()}, {"layers_differing", layers}, {"differences", arr}};
    return static_cast<int>(layers.size());
  }
  std::cout << "layer table " << table.string() << ": ";
  if (diffs.empty()) {
    std::cout << "every layer of " << plan.model << " as the plan says (" << plan.n_layers
              << " layers, " << golden::plan_layer_keys().size() << " keys each)\n";
    return 0;
  }
  std::cout << layers.size() << " of " << plan.n_layers << " layers differ from plan " << plan.model
            << ": " << golden::plan_layer_ranges(layers) << "\n";
  for (const auto& d : diffs) {
    std::cout << "  layer " << d.layer << " (" << d.type << "): " << d.key << ": engine "
              << d.engine_value << ", plan " << d.plan_value << "\n";
  }
  return static_cast<int>(layers.size());
}

int print_plan_layers(const PlanManifest& plan, const std::vector<PlanLayerResult>& results,
                      const std::string& format, bool verbose, Json* json) {
  std::vector<int> failing;
  std::map<std::string, std::vector<int>> by_type;
  for (const auto& r : results) {
    const bool pass = r.report.status == Verdict::kPass;
    if (!pass) {
      failing.push_back(r.layer);
      by_type[r.type].push_back(r.layer);
    }
  }
  if (format == "json") {
    Json arr = Json::array();
    for (const auto& r : results) {
      Json j = golden::case_report_json(r.report);
      j["layer"] = r.layer;
      j["type"] = r.type;
      arr.push_back(std::move(j));
    }
    (*json)["layers"] = arr;
    (*json)["layers_failing"] = failing;
    return static_cast<int>(failing.size());
  }
  const std::size_t width = name_width(plan);
  for (const auto& r : results) {
    const std::string v =
        r.report.status == Verdict::kNoOutput ? "NO OUTPUT" : golden::to_string(r.report.status);
    std::cout << "layer " << golden::plan_layer_dir_name(r.layer, plan.n_layers) << "  " << r.type
              << std::string(width - r.type.size(), ' ') << "  " << v;
    const std::string w =
        r.report.status == Verdict::kNoOutput ? r.report.message : worst_words(r.report);
    if (!w.empty()) std::cout << "  " << w;
    std::cout << "  (case " << r.case_id << ")\n";
    if (verbose && r.report.status == Verdict::kFail)
      std::cout << golden::format_case_text(r.report, false);
  }
  std::cout << "plan " << plan.model << ": " << plan.n_layers
            << " layers, each verified on its own output (layers/NN)\n";
  for (const auto& t : plan.types) {
    const auto it = by_type.find(t.name);
    const std::size_t n = it == by_type.end() ? 0 : it->second.size();
    std::cout << "  " << t.name << std::string(width - t.name.size(), ' ') << "  "
              << (n == 0 ? "PASS: every one of its " + std::to_string(t.layers.size()) + " layers"
                         : "FAIL: layers " + golden::plan_layer_ranges(it->second) + " (" +
                               std::to_string(n) + " of " + std::to_string(t.layers.size()) +
                               " layers)")
              << " (case " << t.case_id << ")\n";
  }
  std::cout << "plan " << plan.model << ": "
            << (failing.empty()
                    ? std::string("PASS, every layer")
                    : std::to_string(failing.size()) + " of " + std::to_string(plan.n_layers) +
                          " layers fail: " + golden::plan_layer_ranges(failing))
            << "\n";
  return static_cast<int>(failing.size());
}

namespace {

/// The layers of `type` under a layer pattern: l is `type` when (l + offset) % period == 0.
std::vector<int> pattern_layers(int n, int period, int offset) {
  std::vector<int> v;
  for (int l = 0; l < n; ++l) {
    if ((l + offset) % period == 0) v.push_back(l);
  }
  return v;
}

/// The (period, offset) whose pattern gives exactly `layers` of n, period 2 .. n, offset 0 ..
/// period - 1; the smallest period first. Empty when none does.
std::optional<std::pair<int, int>> fit_pattern(const std::vector<int>& layers, int n) {
  if (layers.empty()) return std::nullopt;
  for (int p = 2; p <= n; ++p) {
    for (int o = 0; o < p; ++o) {
      if (pattern_layers(n, p, o) == layers) return std::pair{p, o};
    }
  }
  return std::nullopt;
}

bool same_tensors(const golden::TensorMap& a, const golden::TensorMap& b) {
  if (a.size() != b.size()) return false;
  for (const auto& [name, t] : a) {
    const auto it = b.find(name);
    if (it == b.end() || it->second.shape != t.shape || it->second.data != t.data) return false;
  }
  return true;
}

std::string pattern_words(int period, int offset) {
  return "(i + " + std::to_string(offset) + ") % " + std::to_string(period) + " == 0";
}

}  // namespace

int plan_diagnose_layers(const PlanManifest& plan, const fs::path& actual,
                         const std::string& profile, const std::string& format,
                         const ActualReader& read, Json* json) {
  std::vector<golden::LoadedCase> cases;
  for (const auto& t : plan.types) cases.push_back(golden::load_case(t.manifest));
  // the type each layer computes, as the engine's outputs show it (-1: unknown)
  std::vector<int> computes(static_cast<std::size_t>(plan.n_layers), -1);
  Json layers = Json::array();
  std::ostringstream text;
  int wrong = 0;
  golden::VerifyOptions vo;
  vo.profile = profile;
  struct Seen {
    int type;
    golden::TensorMap output;
    golden::Diagnosis diagnosis;
  };
  std::vector<Seen> seen;
  for (int l = 0; l < plan.n_layers; ++l) {
    const int ti = plan.layer_type[static_cast<std::size_t>(l)];
    const golden::LoadedCase& lc = cases[static_cast<std::size_t>(ti)];
    const fs::path dir = actual / "layers" / golden::plan_layer_dir_name(l, plan.n_layers);
    std::optional<golden::TensorMap> act;
    if (fs::is_directory(dir)) act = read(dir, lc.spec.id);
    Json j = {{"layer", l}, {"type", plan.types[static_cast<std::size_t>(ti)].name}};
    if (!act) {
      ++wrong;
      j["verdict"] = "no output";
      layers.push_back(j);
      continue;
    }
    if (golden::verify_case(lc.spec, lc.golden, *act, vo).status == Verdict::kPass) {
      computes[static_cast<std::size_t>(l)] = ti;
      j["verdict"] = "correct";
      layers.push_back(j);
      continue;
    }
    ++wrong;
    // layers of one type with the same output have the same diagnosis
    auto same = std::find_if(seen.begin(), seen.end(), [&](const auto& x) {
      return x.type == ti && same_tensors(x.output, *act);
    });
    if (same == seen.end()) {
      seen.push_back({ti, *act, golden::diagnose_case(lc, *act, profile)});
      same = seen.end() - 1;
    }
    const golden::Diagnosis& d = same->diagnosis;
    j["verdict"] = d.verdict;
    j["summary"] = d.summary;
    const golden::Hypothesis* top = d.ranked.empty() ? nullptr : &d.ranked.front();
    if (top && top->confirmed() && kMistakes.is(top->mistake, MistakeId::kOtherLayerType)) {
      // the other type of a two-type plan (golden/cases/plan_case.cpp, other-layer-type)
      for (std::size_t k = 0; k < plan.types.size(); ++k) {
        if (static_cast<int>(k) != ti) computes[static_cast<std::size_t>(l)] = static_cast<int>(k);
      }
      j["computes"] = plan.types[static_cast<std::size_t>(computes[l])].name;
    }
    text << "layer " << golden::plan_layer_dir_name(l, plan.n_layers) << " ("
         << plan.types[static_cast<std::size_t>(ti)].name << "): " << d.verdict << ": " << d.summary
         << "\n";
    layers.push_back(j);
  }
  // The engine's assignment of the plan's last type, fitted as a pattern against the plan's.
  Json fit;
  std::string fit_text;
  if (plan.types.size() == 2 && wrong > 0 &&
      std::none_of(computes.begin(), computes.end(), [](int c) { return c < 0; })) {
    std::vector<int> engine, model;
    for (int l = 0; l < plan.n_layers; ++l) {
      if (computes[static_cast<std::size_t>(l)] == 1) engine.push_back(l);
      if (plan.layer_type[static_cast<std::size_t>(l)] == 1) model.push_back(l);
    }
    const auto fe = fit_pattern(engine, plan.n_layers), fm = fit_pattern(model, plan.n_layers);
    const std::string name = plan.types[1].name;
    fit_text = "the engine computes " + name + " on layers " + golden::plan_layer_ranges(engine) +
               ", the plan on layers " + golden::plan_layer_ranges(model);
    fit = {{"type", name}, {"engine_layers", engine}, {"plan_layers", model}};
    if (fe && fm) {
      fit["engine_pattern"] = {{"period", fe->first}, {"offset", fe->second}};
      fit["plan_pattern"] = {{"period", fm->first}, {"offset", fm->second}};
      fit_text += ": layer pattern fitted as " + name + " when " +
                  pattern_words(fe->first, fe->second) + " where the plan has " +
                  pattern_words(fm->first, fm->second);
      if (fe->first == fm->first) {
        // engine layer i is `name` when (i + oe) % P == 0: the plan's layers moved by om - oe
        const int d = (fm->second - fe->second + fm->first) % fm->first;
        const int shift = d <= fm->first / 2 ? d : d - fm->first;
        const std::string by = (shift > 0 ? "+" : "") + std::to_string(shift);
        fit["shift"] = shift;
        fit["words"] = "the layer pattern is off by " + by;
        fit_text += ": the layer pattern is off by " + by + " (the engine's " + name +
                    " layers are the plan's moved by " + by + ")";
      } else {
        fit_text += ": the engine uses another period";
      }
    } else {
      fit_text += " (no period and offset give the engine's layers)";
    }
    fit["text"] = fit_text;
  }
  if (format == "json") {
    (*json)["layers"] = layers;
    (*json)["layer_pattern"] = fit;
  } else {
    std::cout << text.str();
    std::cout << "diagnose plan " << plan.model << ": " << wrong << " of " << plan.n_layers
              << " layers not correct";
    if (!fit_text.empty()) std::cout << "; " << fit_text;
    std::cout << "\n";
  }
  return wrong;
}

}  // namespace posenc::tools
