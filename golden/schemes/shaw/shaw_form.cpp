// The manifest form of scheme shaw: Shaw relative positions.
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

std::vector<form::Form> shaw_forms() {
  const auto att = attention_keys();
  const auto att_shapes = attention_shapes();
  return {{"shaw",
           nullptr,
           true,
           att + std::vector<Key>{integer("max_relative_position"), integer("table_rows", 1)},
           {},
           {},
           att_shapes + std::vector<ShapeRule>{{"relative_index", {"tq", "tk"}},
                                               {"relations_keys", {"table_rows", "head_dim"}}},
           "q",
           attention_rules}};
}

}  // namespace posenc::golden
