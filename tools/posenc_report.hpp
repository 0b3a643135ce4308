// `--report out.html` of posenc verify, check and diagnose (golden/verify/html_report.hpp has the
// page): the CLI's side, which adds each judged case and diagnoses failing ones while cheap.
#pragma once
#include <filesystem>
#include <string>

#include "golden/verify/catalog.hpp"
#include "golden/verify/html_report.hpp"
#include "golden/verify/verify.hpp"

namespace posenc::golden {

/// How many failing cases `verify --report` and `check --report` diagnose (each diagnosis runs
/// every hypothesis of the scheme); the rest get the `posenc diagnose` command.
inline constexpr int kReportDiagnoses = 4;

/// Adds one case to the page (r and ratios from verify_case_with_ratios). A failing valid case is diagnosed under `profile` while
/// *diagnoses_left > 0 (decremented); otherwise, and when diagnosis fails, the page shows
/// `diagnose_command`.
void report_add_case(HtmlReport& html, const LoadedCase& lc, const TensorMap* actual,
                     const CaseReport& r, const ElementRatios& ratios, const std::string& profile,
                     int* diagnoses_left, const std::string& diagnose_command);

/// A page and where it goes (written at the end of the run, through a temporary file).
struct ReportFile {
  std::filesystem::path path;
  HtmlReport page;
  void write(const OutputRule& rule) const { page.write(path, rule); }
};

/// The command line as typed, for the page's header.
std::string report_command_line(int argc, char** argv);

}  // namespace posenc::golden
