// GoogleTest helper for engines that verify in process: compares an engine's output tensors with
// a loaded golden case under a tolerance profile, as `posenc verify` does.
//
//   const auto c = posenc::golden::load_case(data / "rope" / "<case id>.json");
//   posenc::golden::TensorMap out = posenc::golden::tensor_map({tensor_from_f32("q_rot", ...), ...});
//   EXPECT_POSENC_CASE(c, out, "fp32");
//
// Success when verify_case says PASS; otherwise the failure message is the verifier's verbose
// report (per tensor: worst ratio, first failing position, worst element). Header-only; include
// it from a test that links GTest and posenc::verify (the verify library alone: no oracle, no
// MPFR).
#pragma once
#include <exception>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "golden/format/format.hpp"
#include "golden/format/profiles.hpp"
#include "golden/verify/catalog.hpp"
#include "golden/verify/verify.hpp"

namespace posenc::golden {

/// verify_case(c, outputs) under `profile` (a name or alias of profiles()); success iff PASS.
inline ::testing::AssertionResult case_passes(const LoadedCase& c, const TensorMap& outputs,
                                              const std::string& profile) {
  const std::string canonical = canonical_profile(profile);
  if (canonical.empty()) {
    return ::testing::AssertionFailure()
           << "unknown tolerance profile \"" << profile << "\" (known: " << profile_list_text()
           << ")";
  }
  VerifyOptions opt;
  opt.profile = canonical;
  CaseReport report;
  try {
    report = verify_case(c.spec, c.golden, outputs, opt);
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "verifying case " << c.spec.id << " ("
                                         << c.manifest_path.string() << ") threw: " << e.what();
  }
  const std::string head = "case " + c.spec.id + " under profile " + canonical + ": " +
                           to_string(report.status) + (report.message.empty() ? "" : " (" + report.message + ")");
  if (report.status == Verdict::kPass) {
    return ::testing::AssertionSuccess() << head << '\n' << format_case_text(report, true);
  }
  return ::testing::AssertionFailure() << head << '\n' << format_case_text(report, true);
}

/// The same for outputs given as a list of tensors.
inline ::testing::AssertionResult case_passes(const LoadedCase& c,
                                              const std::vector<Tensor>& outputs,
                                              const std::string& profile) {
  return case_passes(c, tensor_map(outputs), profile);
}

}  // namespace posenc::golden

/// EXPECT_POSENC_CASE(loaded_case, outputs, profile): outputs is a TensorMap or a
/// std::vector<Tensor> named as the case's expected tensors (q_rot, k_rot, ...).
#define EXPECT_POSENC_CASE(loaded_case, outputs, profile) \
  EXPECT_TRUE(::posenc::golden::case_passes((loaded_case), (outputs), (profile)))
#define ASSERT_POSENC_CASE(loaded_case, outputs, profile) \
  ASSERT_TRUE(::posenc::golden::case_passes((loaded_case), (outputs), (profile)))
