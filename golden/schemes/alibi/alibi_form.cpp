// The manifest form of scheme alibi: ALiBi: biased attention, or the slopes alone.
// The params keys, tensors and shapes verify checks before it judges a case
// (golden/verify/manifest_form.hpp); compiled into posenc::verify, listed by CMake for
// golden/verify/manifest_check.cpp.
#include <set>
#include <string>
#include <vector>

#include "golden/verify/manifest_form.hpp"

namespace posenc::golden {

using namespace form;
using Json = nlohmann::json;

namespace {

void slopes_rules(const CaseSpec& c, const Json&, const std::string& source) {
  const TensorSpec* t = find_tensor(c, "slopes");
  rule(t != nullptr && t->shape.size() == 1, source, "tensor \"slopes\"",
       "expected one slope per head (a list), as an alibi slopes manifest has");
}

bool alibi_attention(const Json& m) { return m.value("alibi_case", Json()) == Json("attention"); }

}  // namespace

std::vector<form::Form> alibi_forms() {
  const auto att = attention_keys();
  const auto att_shapes = attention_shapes();
  return {{"alibi attention (alibi_case \"attention\")",
           alibi_attention,
           true,
           att,
           {},
           {"alibi"},
           att_shapes,
           "q",
           attention_rules},
          {"alibi slopes", nullptr, false, {}, {}, {"alibi_case"}, {}, "", slopes_rules}};
}

}  // namespace posenc::golden
