// The verifier: compares an engine's output tensors with a golden case, element by element,
// with the case's checks and a tolerance profile (see golden/manifest.hpp for the error
// formula). A mismatch is data: verify_case never throws for it; it returns the worst element
// with its index, position and pair. Bad input (wrong dtype or shape, unreadable tensors) is
// reported as status "ERROR" (exit code 2 in the CLI).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "golden/format.hpp"
#include "golden/manifest.hpp"

namespace posenc::golden {

using TensorMap = std::map<std::string, Tensor>;

TensorMap tensor_map(std::vector<Tensor> tensors);

struct VerifyOptions {
  std::string profile = "strict";
  std::map<std::string, std::string> rename;  // golden name -> name in the engine's file
  bool require_all = false;                   // a missing expected tensor fails the case
};

struct WorstElement {
  std::int64_t index = -1;
  std::vector<std::int64_t> coords;
  std::string where;  // "token 3 (position 131071), head 1, channel 5 (pair 2)"
  double exact = 0, expected = 0, actual = 0;
  double error = 0;   // in units of the element's scale
};

struct TensorReport {
  std::string name, stage, kind;
  std::string status;  // "PASS", "FAIL", "MISSING", "ERROR"
  std::string message;
  double bound = 0;
  double max_error = 0;  // max over elements of error in units of scale
  std::int64_t n = 0, n_over = 0;
  WorstElement worst;
  double ratio() const { return bound > 0 ? max_error / bound : (max_error > 0 ? INFINITY : 0); }
};

struct CaseReport {
  std::string id, scheme, result, profile;
  std::string status;  // "PASS", "FAIL", "ERROR"
  std::string message;
  std::vector<TensorReport> tensors;
  int n_checked() const;
  double worst_ratio() const;  // max over checked tensors of max_error / bound
};

/// golden: all tensors of the golden safetensors file (inputs, expected, companions).
CaseReport verify_case(const CaseSpec& spec, const TensorMap& golden, const TensorMap& actual,
                       const VerifyOptions& opt);

/// Checks that each tensor named in the manifest exists in `golden` with its dtype, shape and
/// SHA-256; GoldenFileError naming `source` otherwise.
void check_golden_tensors(const CaseSpec& spec, const TensorMap& golden, const std::string& source);

std::string format_case_text(const CaseReport& r, bool verbose);
nlohmann::json case_report_json(const CaseReport& r);

}  // namespace posenc::golden
