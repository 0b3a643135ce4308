// The manifest form of scheme attention: plain attention over positions.
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

std::vector<form::Form> attention_forms() {
  const auto att = attention_keys();
  const auto att_shapes = attention_shapes();
  return {{"attention", nullptr, true, att, {}, {}, att_shapes, "q", attention_rules}};
}

}  // namespace posenc::golden
