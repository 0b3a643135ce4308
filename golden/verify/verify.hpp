// The verifier: compares an engine's output tensors with a golden case, element by element,
// with the case's checks and a tolerance profile (golden/format/manifest.hpp has the budget
// formula, golden/format/profiles.hpp the profiles). A mismatch is data: verify_case never
// throws for it; it returns, per tensor, the worst element with its index, position and pair,
// and the per-position answer (first failing position, "passes up to position P"). Bad input
// (wrong dtype or shape) is reported as Verdict::kError (exit code 2 in the CLI).
//
// Streaming: one implementation judges each tensor in chunks read from a TensorSource
// (golden/verify/tensor_source.hpp); the TensorMap overloads run it on in-memory views,
// `posenc verify` on files. Memory besides the sources' chunk buffers: 0.5 MiB of scratch,
// the per-axis position tables, one 24-byte account per distinct position and convention
// (details: the comment at the top of verify.cpp). The report does not depend on the chunk
// size or the thread count.
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "golden/format/format.hpp"
#include "golden/format/manifest.hpp"
#include "golden/verify/tensor_source.hpp"

namespace posenc::golden {

using TensorMap = std::map<std::string, Tensor>;

TensorMap tensor_map(std::vector<Tensor> tensors);

/// Elements judged at a time: verify reads and judges every expected tensor in chunks of this
/// many elements (memory: docs/performance.md, FileSource's contract).
inline constexpr std::int64_t kVerifyChunkElements = std::int64_t{1} << 18;

struct VerifyOptions {
  std::string profile = "strict";             // canonical profile name
  std::map<std::string, std::string> rename;  // golden name -> name in the engine's file
  bool require_all = false;                   // a missing expected tensor is an error
  std::optional<std::int64_t> max_position;   // judge only elements at positions <= this
  /// Elements read and judged at a time (>= 1); the report does not depend on it.
  std::int64_t chunk_elements = kVerifyChunkElements;
};

/// A tensor's or a case's verdict. Its text ("PASS", "FAIL", ...: to_string) appears only where
/// a report is printed or written (text, JSON, HTML).
enum class Verdict {
  kPass,
  kFail,
  kMissing,        // the engine output has no such tensor (tensors only)
  kError,          // bad input: wrong dtype or shape, nothing to judge, --require-all
  kNotApplicable,  // the profile does not apply
  kNoOutput,       // no engine output for the case (cases only)
  /// A negative control whose given stages cannot tell the right convention from the
  /// known-wrong one at the profile's resolution (manifest "control_detection"): neither PASS
  /// nor FAIL (cases only).
  kInconclusive,
};
/// "PASS", "FAIL", "MISSING", "ERROR", "N/A", "NO OUTPUT", "INCONCLUSIVE".
std::string to_string(Verdict v);
/// Judged: PASS or FAIL.
inline bool judged(Verdict v) { return v == Verdict::kPass || v == Verdict::kFail; }
/// gtest prints a Verdict by its text.
inline void PrintTo(Verdict v, std::ostream* os) { *os << to_string(v); }

struct WorstElement {
  std::int64_t index = -1;
  std::vector<std::int64_t> coords;
  std::string where;  // "token 3 (position 131071), head 1, channel 5 (pair 2)"
  double exact = 0, expected = 0, actual = 0;
  double abs_error = 0, budget = 0;
  double ratio = 0;  // abs_error / budget (an integer tensor: 2 |difference|, budget 1/2)
  /// Tensors with a "query" and a "key" axis (scores, probabilities, biases): the positions of
  /// the worst element's query and key (both or neither).
  std::optional<std::int64_t> query_position, key_position;
};

/// Worst ratio and counts of the elements at one position (max over the element's position
/// axes), and the share of them whose budget admits any angle there (from the manifest).
struct PositionStat {
  std::int64_t position = 0;
  double worst_ratio = 0;
  std::int64_t n = 0, n_over = 0;
  double saturated = 0;
};

struct TensorReport {
  std::string name, stage;
  CheckKind kind = CheckKind::kExact;
  Verdict status = Verdict::kError;  // any but kNoOutput
  std::string message;
  double bound = 0;
  bool has_extra = false;
  double max_ratio = 0;  // max over judged elements of |y - y*| / budget
  bool integer = false;  // an i32 / i64 tensor (positions, slots, buckets): printed as integers
  std::int64_t n = 0, n_over = 0, n_skipped = 0, n_nan = 0, n_inf = 0;  // n_inf: +-Inf elements
  WorstElement worst;
  std::string convention = "default";  // or the declared alternative the engine follows
  bool has_positions = false;
  std::optional<std::int64_t> first_fail_position, passes_up_to_position;
  std::vector<PositionStat> by_position;  // sorted by position
};

/// Trace cases (manifest "trace"): the first step with a failing tensor, and where.
struct TraceStepReport {
  int index = -1;               // step index; -1 = every checked step passes
  int n_steps = 0, n_checked = 0;
  std::string name, kind;       // "s03", "decode"
  std::string tensor, where;    // the step's worst failing tensor and its worst element
  double ratio = 0;
  bool integer = false;  // the tensor is an integer one (positions, slots): no ratio printed
  std::optional<std::int64_t> sequence, position, slot;
  std::optional<std::int64_t> engine_position;  // when the step's positions are what fails
};

struct CaseReport {
  std::string id, scheme, result, profile;
  std::optional<TraceStepReport> trace;  // trace cases only
  /// kPass, kFail, kError, kNotApplicable (profile applies to no stage), kNoOutput
  Verdict status = Verdict::kError;
  std::string message;
  std::vector<TensorReport> tensors;
  std::vector<std::string> notes;  // blind spots, alternatives followed
  /// A negative control that differs from its known-wrong values under the claimed profile:
  /// the other profiles under which the same output reproduces them (profile order).
  std::vector<std::string> reproduces_under;
  /// A negative control: the stages that tell its right convention from the known-wrong one
  /// under the claimed profile (manifest "control_detection"); an INCONCLUSIVE case names them.
  std::vector<std::string> telling_stages;
  /// A negative control whose output differs from the known-wrong values under the claimed
  /// profile (its PASS); reproduces_under is then looked for.
  bool control_differs = false;
  bool require_all = false;  // VerifyOptions::require_all: a stage not written is an error
  int n_checked() const;
  double worst_ratio() const;  // max over checked tensors
};

/// golden: all tensors of the golden safetensors file (inputs, expected, companions).
CaseReport verify_case(const CaseSpec& spec, const TensorMap& golden, const TensorMap& actual,
                       const VerifyOptions& opt);
/// The same judgement, reading the tensors chunk by chunk from sources (one implementation:
/// the TensorMap overload runs this on MapSource views). The small golden tensors (axis
/// positions, labels, trace tables) are loaded whole; the expected tensors are not.
CaseReport verify_case(const CaseSpec& spec, TensorSource& golden, TensorSource& actual,
                       const VerifyOptions& opt);

/// Checks that the golden file holds exactly the tensors the manifest lists (inputs, expected,
/// every companion), each with its dtype, shape and SHA-256; GoldenFileError naming `source`.
void check_golden_tensors(const CaseSpec& spec, const TensorMap& golden, const std::string& source);

/// Text: one line per tensor (worst ratio, first failing position, worst element on a FAIL),
/// MISSING stages, notes, then the case line. by_position adds one line per position.
std::string format_case_text(const CaseReport& r, bool verbose, bool by_position = false);
/// One line on a trace: the first failing step with its position and slot, or that all pass.
std::string trace_text(const TraceStepReport& t, bool negative);
nlohmann::json case_report_json(const CaseReport& r, bool by_position = false);

}  // namespace posenc::golden
