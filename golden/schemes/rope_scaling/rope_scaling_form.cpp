// The manifest form of scheme rope_scaling: scaled RoPE: RoPE's keys and the scaling rule.
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

std::vector<form::Form> rope_scaling_forms() {
  return {{"rope_scaling",
           nullptr,
           true,
           rope_keys() + std::vector<Key>{object("scaling")},
           {integer("softmax_head_dim", 1)},
           {"scaling"},
           rope_shapes(),
           "q",
           rope_rules}};
}

}  // namespace posenc::golden
