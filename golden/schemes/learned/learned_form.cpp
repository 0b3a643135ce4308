// The manifest form of scheme learned: learned absolute positions.
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

std::vector<form::Form> learned_forms() {
  return {{"learned",
           nullptr,
           true,
           {integer("d_model", 1), integer("max_positions", 1), integer("n_tokens", 1),
            integer("position_offset"), integer("preset_d_model", 1), dtype_key()},
           {},
           {},
           {{"positions", {"n_tokens"}, true},
            {"table", {"max_positions", "d_model"}, true},
            {"e", {"n_tokens", "d_model"}},
            {"position_ids", {"n_tokens"}},
            {"rows", {"n_tokens", "d_model"}},
            {"h", {"n_tokens", "d_model"}}},
           "table"}};
}

}  // namespace posenc::golden
