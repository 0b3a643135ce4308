// The HTML report of `posenc verify|check|diagnose --report out.html`: one self-contained page
// (inline CSS and SVG, no script, no network) per run.
//
// The page holds the case table (case, scheme, profile, status, worst ratio per tensor), then per
// case with a failing tensor (and per checked case when the run has few) the diagnosis (or the
// `posenc diagnose` command to run), and per tensor judged at positions: a plot of the worst
// error / budget against position (log axes, the budget line at 1), a position x channel heat
// map of the ratio (log colour scale with its legend) and the worst elements. Sizes are capped
// (kHtmlMaxColumns position columns and kHtmlMaxRows channel rows per heat map, consecutive ones
// merged by their maximum; kHtmlMaxPlotted tensors plotted) and the page says so.
//
// The collector keeps only what the page draws (a downsampled grid per tensor), so a run over the
// whole catalog stays small. A diagnosis comes in as diagnose's JSON (golden/cases/diagnose.hpp
// sits above this layer).
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "golden/format/output_path.hpp"
#include "golden/verify/element_ratios.hpp"
#include "golden/verify/verify.hpp"

namespace posenc::golden {

inline constexpr int kHtmlMaxColumns = 200;
inline constexpr int kHtmlMaxRows = 64;
inline constexpr int kHtmlMaxPlotted = 24;
inline constexpr int kHtmlWorstElements = 8;

class HtmlReport {
 public:
  /// title: "posenc verify"; command: the command line as the user typed it.
  HtmlReport(std::string title, std::string command, std::string profile);

  /// One case: its report and every element's ratio (verify_case_with_ratios; nullptr: the
  /// table row and the per-position plot only), the golden tensors (positions, exact values),
  /// the engine output (nullptr: none), diagnose's JSON of the case (diagnosis_json) when
  /// diagnose ran, else the command that would.
  void add_case(const CaseSpec& spec, const TensorMap& golden, const TensorMap* actual,
                const CaseReport& report, const ElementRatios* ratios,
                std::optional<nlohmann::json> diagnosis, std::string diagnose_command);

  std::string html() const;
  /// "12 case(s): 9 passed, 1 failed, 2 inconclusive (...)": the summary line's counts.
  std::string summary_text() const;
  /// Writes the page through a temporary file and a rename (no partial page on failure), under
  /// the output rule (golden/format/output_path.hpp: OutputKind::kReport).
  void write(const std::filesystem::path& path, const OutputRule& rule = OutputRule()) const;

  struct Worst {
    std::string where;
    double actual = 0, exact = 0, ratio = 0;
  };
  struct TensorView {
    std::string name, stage;
    Verdict status = Verdict::kError;
    std::string message;
    double ratio = 0;
    std::int64_t n = 0, n_over = 0;
    std::optional<std::int64_t> first_fail, passes_up_to;
    std::optional<std::int64_t> worst_query, worst_key;  // query-key tensors' worst element
    std::vector<PositionStat> by_position;
    // Heat map: rows (channel axis bins) x columns (position bins), max ratio; NaN = none.
    std::string row_axis;
    std::vector<std::string> col_labels;  // position (or first..last of a merged bin)
    std::vector<std::int64_t> col_positions;
    std::vector<std::string> row_labels;
    std::vector<double> grid;  // rows x cols
    bool merged_cols = false, merged_rows = false;
    std::vector<Worst> worst;
  };
  struct CaseView {
    std::string id, scheme, result, profile;
    Verdict status = Verdict::kError;
    std::string message;
    std::vector<std::string> reproduces_under;  // CaseReport::reproduces_under
    std::vector<TensorView> tensors;
    std::vector<std::string> notes;
    std::optional<nlohmann::json> diagnosis;
    std::string diagnose_command;
  };

 private:
  std::string title_, command_, profile_;
  std::vector<CaseView> cases_;
};

}  // namespace posenc::golden
