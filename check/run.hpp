// The RapidCheck and GoogleTest plumbing shared by the property headers of check/: run one
// property with RC_PARAMS' seed (at most `max_success` draws) and turn the result into a
// PropertyResult; a GoogleTest test whose body runs one such check.
#pragma once
#include <algorithm>
#include <functional>
#include <sstream>
#include <string>
#include <utility>

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include "golden/cases/check_rope.hpp"  // PropertyResult

namespace posenc::check::detail {

/// Runs `prop` (a RapidCheck property lambda) as the test `id`. On failure, `message` holds
/// RapidCheck's report (the seed, the shrunk counterexample's failure, reproduce=); callers add
/// what they know about the shrunk draw.
template <class Prop>
PropertyResult run_property(const std::string& id, int max_success, const Prop& prop) {
  rc::detail::TestMetadata md;
  md.id = md.description = id;
  rc::detail::TestParams params = rc::detail::configuration().testParams;
  params.maxSuccess = std::min(params.maxSuccess, max_success);
  const auto result = rc::detail::checkTestable(prop, md, params);
  PropertyResult r;
  r.passed = result.template is<rc::detail::SuccessResult>();
  if (r.passed) return r;
  std::ostringstream os;
  rc::detail::printResultMessage(result, os);
  r.message = os.str();
  return r;
}

/// A GoogleTest test that runs one property check and fails with its message.
class PropertyTest : public ::testing::Test {
 public:
  explicit PropertyTest(std::function<PropertyResult()> run) : run_(std::move(run)) {}
  void TestBody() override {
    const PropertyResult r = run_();
    if (!r.passed) ADD_FAILURE() << r.message;
  }

 private:
  std::function<PropertyResult()> run_;
};

}  // namespace posenc::check::detail
