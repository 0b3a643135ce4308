// The manifest form of scheme plan: a model plan's layer-type case.
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

/// A model plan's layer-type case (golden/cases/plan_case.hpp): the type and the plan as
/// objects (the engine reads them), heads, head_dim, the tokens, the score scale.
void plan_rules(const CaseSpec&, const Json& p, const std::string& source) {
  rule(pint(p, "n_q_heads") % pint(p, "n_kv_heads") == 0, source, "params.n_kv_heads",
       "expected a divisor of n_q_heads " + p.at("n_q_heads").dump() + " (got " +
           p.at("n_kv_heads").dump() + ")");
  rule(pint(p, "value_dim") == pint(p, "head_dim"), source, "params.value_dim",
       "expected head_dim " + p.at("head_dim").dump() + " (got " + p.at("value_dim").dump() + ")");
}

Form plan_form() {
  return {
      "plan",
      nullptr,
      true,
      {object("type"), integer("n_q_heads", 1), integer("n_kv_heads", 1), integer("head_dim", 2),
       integer("value_dim", 1), integer("n_tokens", 1), number("scale", 1e-300), object("plan"),
       string("qk_inputs", "projections|normalized"), dtype_key()},
      {},
      {},
      {{"positions", {"n_tokens"}, true},
       {"q", {"n_tokens", "n_q_heads", "head_dim"}, true},
       {"k", {"n_tokens", "n_kv_heads", "head_dim"}, true},
       {"v", {"n_tokens", "n_kv_heads", "value_dim"}, true},
       {"sinks", {"n_q_heads"}},
       {"q_norm_weight", {"head_dim"}},
       {"k_norm_weight", {"head_dim"}},
       {"q_rot", {"n_tokens", "n_q_heads", "head_dim"}},
       {"k_rot", {"n_tokens", "n_kv_heads", "head_dim"}},
       {"scores", {"n_q_heads", "n_tokens", "n_tokens"}},
       {"probs", {"n_q_heads", "n_tokens", "n_tokens"}},
       {"out", {"n_tokens", "n_q_heads", "value_dim"}}},
      "q",
      plan_rules};
}

}  // namespace

std::vector<form::Form> plan_forms() { return {plan_form()}; }

}  // namespace posenc::golden
