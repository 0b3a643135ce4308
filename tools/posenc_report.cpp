// `--report out.html` of posenc verify, check and diagnose (tools/posenc_report.hpp).
#include "tools/posenc_report.hpp"

#include "golden/cases/diagnose.hpp"

namespace posenc::golden {

void report_add_case(HtmlReport& html, const LoadedCase& lc, const TensorMap* actual,
                     const CaseReport& r, const ElementRatios& ratios, const std::string& profile,
                     int* diagnoses_left, const std::string& diagnose_command) {
  std::optional<nlohmann::json> diagnosis;
  if (actual && r.status == Verdict::kFail && lc.spec.result != "invalid" && diagnoses_left &&
      *diagnoses_left > 0) {
    --*diagnoses_left;
    try {
      diagnosis = diagnosis_json(diagnose_case(lc, *actual, profile));
    } catch (const std::exception&) {
      diagnosis.reset();  // the page names the command instead
    }
  }
  html.add_case(lc.spec, lc.golden, actual, r, &ratios, std::move(diagnosis), diagnose_command);
}

std::string report_command_line(int argc, char** argv) {
  std::string s;
  for (int i = 0; i < argc; ++i) {
    std::string a = i == 0 ? "posenc" : argv[i];
    if (a.find_first_of(" \t'\"") != std::string::npos) a = "'" + a + "'";
    s += (i ? " " : "") + a;
  }
  return s;
}

}  // namespace posenc::golden
