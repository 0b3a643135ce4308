// The manifest form of scheme deberta: DeBERTa: disentangled attention, or the buckets alone.
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

bool has_tq(const Json& m) {
  return m.contains("params") && m.at("params").is_object() && m.at("params").contains("tq");
}

}  // namespace

std::vector<form::Form> deberta_forms() {
  const auto att = attention_keys();
  const auto att_shapes = attention_shapes();
  return {{"deberta attention (params.tq)",
           has_tq,
           true,
           att + std::vector<Key>{integer("att_span", 1), integer("hidden", 1),
                                  integer("max_relative_positions", 1), string("pos_att_type"),
                                  signed_integer("position_buckets"), number("scale", 0),
                                  number("scale_factor", 0), boolean("share_att_key")},
           {},
           {},
           att_shapes + std::vector<ShapeRule>{{"relative", {"tq", "tk"}}, {"index", {"tq", "tk"}}},
           "q",
           attention_rules},
          {"deberta buckets",
           nullptr,
           true,
           {integer("att_span", 1), integer("max_relative_positions", 1),
            signed_integer("position_buckets"), signed_integer("r_min"), signed_integer("r_max")},
           {},
           {},
           {{"relative_position", {"r_max-r_min+1"}, true},
            {"buckets", {"r_max-r_min+1"}, true},
            {"index", {"r_max-r_min+1"}}},
           "",
           range_rules}};
}

}  // namespace posenc::golden
