// The manifest form of scheme sinusoidal: sinusoidal absolute positions.
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

std::vector<form::Form> sinusoidal_forms() {
  return {{"sinusoidal",
           nullptr,
           true,
           {number("base", 1e-300), integer("d_model", 1), integer("n_freq", 1),
            integer("n_tokens", 1), string("variant"), dtype_key()},
           {},
           {},
           {{"positions", {"n_tokens"}, true},
            {"e", {"n_tokens", "d_model"}},
            {"inv_freq", {"n_freq"}},
            {"pe", {"n_tokens", "d_model"}},
            {"h", {"n_tokens", "d_model"}}},
           ""}};
}

}  // namespace posenc::golden
