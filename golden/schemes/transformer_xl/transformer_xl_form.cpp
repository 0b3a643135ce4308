// The manifest form of scheme transformer_xl: Transformer-XL relative attention.
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

void transformer_xl_rules(const CaseSpec& c, const Json& p, const std::string& source) {
  attention_rules(c, p, source);
  for (auto [a, b] :
       {std::pair{"qlen", "tq"}, std::pair{"klen", "tk"}, std::pair{"d_head", "head_dim"}}) {
    rule(pint(p, a) == pint(p, b), source, std::string("params.") + a,
         std::string("expected ") + b + " " + p.at(b).dump() + " (got " + p.at(a).dump() + ")");
  }
}

}  // namespace

std::vector<form::Form> transformer_xl_forms() {
  const auto att = attention_keys();
  const auto att_shapes = attention_shapes();
  return {{"transformer_xl",
           nullptr,
           true,
           att + std::vector<Key>{integer("clamp_len"), integer("d_head", 1), integer("d_model", 1),
                                  boolean("has_pos_emb"), integer("klen", 1), integer("mem_len"),
                                  integer("mlen"), integer("qlen", 1), boolean("same_length")},
           {},
           {},
           att_shapes + std::vector<ShapeRule>{{"rel_position", {"tq", "tk"}},
                                               {"r_w_bias", {"n_heads", "d_head"}},
                                               {"r_r_bias", {"n_heads", "d_head"}}},
           "q",
           transformer_xl_rules}};
}

}  // namespace posenc::golden
