// The manifest form of scheme mla: MLA's decoupled RoPE.
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

/// MLA: head-major inputs, one shared k_pe head; the scaling rule of the rotated part.
Form mla_form() {
  return {"mla",
          nullptr,
          true,
          {integer("n_heads", 1), integer("qk_nope_head_dim"), integer("qk_rope_head_dim", 2),
           number("base", 1e-300), boolean("rope_interleave"), integer("n_tokens", 1),
           object("scaling"), object("derived"), dtype_key()},
          {},
          {},
          {{"positions", {"n_tokens"}, true},
           {"q_nope", {"n_heads", "n_tokens", "qk_nope_head_dim"}, true},
           {"q_pe", {"n_heads", "n_tokens", "qk_rope_head_dim"}, true},
           {"k_nope", {"n_heads", "n_tokens", "qk_nope_head_dim"}, true},
           {"k_pe", {"1", "n_tokens", "qk_rope_head_dim"}, true},
           {"softmax_scale", {"1"}},
           {"q_pe_rot", {"n_heads", "n_tokens", "qk_rope_head_dim"}},
           {"k_pe_rot", {"1", "n_tokens", "qk_rope_head_dim"}},
           {"scores", {"n_heads", "n_tokens", "n_tokens"}}},
          "q_pe"};
}

}  // namespace

std::vector<form::Form> mla_forms() { return {mla_form()}; }

}  // namespace posenc::golden
