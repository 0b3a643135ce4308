// What the posenc subcommands share, and each file's entry points. tools/posenc.cpp parses the
// command line (tools/posenc_cli.cpp declares the options) and dispatches to:
//   tools/posenc_generate.cpp  generate (a selection, --config, --level 2), list --level 2, catalog
//   tools/posenc_verify.cpp    verify and diagnose (cases, folders, catalogs, plans)
//   tools/posenc_check.cpp     check and engine (posenc's own kernels and pipelines)
// Engine outputs on disk are read by golden/verify/actual_files.hpp (posenc::verify).
#pragma once
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "golden/cases/catalog.hpp"
#include "golden/format/output_path.hpp"
#include "golden/verify/actual_files.hpp"
#include "golden/verify/verify.hpp"
#include "tools/posenc_args.hpp"
#include "tools/posenc_report.hpp"

namespace posenc::tools {

inline constexpr int kExitPass = 0, kExitMismatch = 1, kExitUsage = 2, kExitInconclusive = 3;

/// A usage error found after parsing (bad file, unknown case): message and exit 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

double seconds_since(std::chrono::steady_clock::time_point t0);
/// UsageError unless --format is text or json.
void check_format(const std::string& f);
/// The canonical name of a profile or alias; UsageError naming the known ones.
std::string canonical_or_usage(const std::string& p);
/// A case argument: a manifest path, or a case id looked up in the catalog of `data`.
std::filesystem::path manifest_for(const std::string& arg, const std::filesystem::path& data);

/// One case to verify: its manifest, and its catalog entry when it came from a catalog (whose
/// SHA-256 of both files is then checked first).
struct GoldenArg {
  std::filesystem::path manifest;
  std::optional<golden::CatalogEntry> entry;
  std::filesystem::path data;
};
/// Golden arguments of verify: manifests, directories (a catalog folder, or all manifests
/// below) or catalog.json.
std::vector<GoldenArg> expand_golden(const std::vector<std::string>& args);
/// The output rule of a run that reads these cases and the engine's outputs.
golden::OutputRule golden_reads(const std::vector<GoldenArg>& cases,
                                const std::filesystem::path& actual, bool force);

/// --map golden=engine pairs; UsageError for a malformed one.
std::map<std::string, std::string> parse_maps(const std::vector<std::string>& maps);
/// The exit code of a verify run: 0 all pass, 1 a mismatch, 2 an error, 3 only INCONCLUSIVE.
int exit_code_of(const std::vector<golden::CaseReport>& reports);

struct Summary {
  int checked = 0, pass = 0, fail = 0, error = 0, no_output = 0, na = 0, inconclusive = 0;
};
Summary summarize(const std::vector<golden::CaseReport>& reports);
/// The reports as text (a line per case, the summary) or JSON (with the plan's summary).
void print_reports(const std::vector<golden::CaseReport>& reports, const std::string& format,
                   bool verbose, bool by_position, const std::string& profile,
                   const nlohmann::json* plan = nullptr);

/// catalog.json of `out` rebuilt from its files, each case's origin recorded.
void write_catalog(const std::filesystem::path& out, const golden::OutputRule& rule,
                   const std::map<std::string, std::string>& origins);
void write_catalog(const std::filesystem::path& out, const golden::OutputRule& rule,
                   const std::string& origin, const std::set<std::string>& run);

/// Progress of a long run on a terminal: "[i/n] case" rewritten in place on stderr, erased at
/// the end; silent when stderr is not a terminal (CI logs, pipes) or for a single case.
class Progress {
 public:
  Progress(const char* what, std::size_t n) : what_(what), n_(n), on_(n > 1 && ::isatty(2)) {}
  ~Progress() { done(); }
  /// Erases the line; call before printing results.
  void done() {
    if (on_ && shown_) std::fprintf(stderr, "\r\033[K");
    shown_ = false;
  }
  void step(const std::string& id) {
    if (!on_) return;
    std::fprintf(stderr, "\r\033[K%s [%zu/%zu] %s", what_, ++i_, n_, id.c_str());
    std::fflush(stderr);
    shown_ = true;
  }

 private:
  const char* what_;
  std::size_t n_, i_ = 0;
  bool on_, shown_ = false;
};

/// --report FILE of verify, diagnose and check: the page, judged by `profile`.
std::optional<golden::ReportFile> report_for(const std::string& report, const std::string& sub, int argc,
                                     char** argv, const std::string& profile);

// ---- the subcommands ----------------------------------------------------------------------

int run_generate(GenerateArgs a);
int run_catalog(const CatalogArgs& a);
int cmd_list_level2(const ListArgs& a, const golden::CaseSelection& sel);
int run_verify(const VerifyArgs& a, int argc, char** argv);
int run_diagnose(const DiagnoseArgs& a, int argc, char** argv);
int run_check(const CheckArgs& a, int argc, char** argv);
int cmd_engine(const std::string& which, const std::filesystem::path& data,
               const std::filesystem::path& out, const std::string& mistake,
               const std::string& pipeline, const std::string& format, bool force);

}  // namespace posenc::tools
