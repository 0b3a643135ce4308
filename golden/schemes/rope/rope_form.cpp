// The manifest form of scheme rope: plain RoPE: the rotation keys, q/k and their rotations, the
// tables. The params keys, tensors and shapes verify checks before it judges a case
// (golden/verify/manifest_form.hpp); compiled into posenc::verify, listed by CMake for
// golden/verify/manifest_check.cpp.
#include <set>
#include <string>
#include <vector>

#include "golden/verify/manifest_form.hpp"

namespace posenc::golden {

using namespace form;
using Json = nlohmann::json;

std::vector<form::Form> rope_forms() {
  return {{"rope", nullptr, true, rope_keys(), {}, {}, rope_shapes(), "q", rope_rules}};
}

}  // namespace posenc::golden
