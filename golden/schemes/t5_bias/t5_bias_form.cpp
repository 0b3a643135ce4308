// The manifest form of scheme t5_bias: T5 bias: biased attention, or the buckets alone.
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

std::vector<form::Form> t5_bias_forms() {
  const auto att = attention_keys();
  const auto att_shapes = attention_shapes();
  return {
      {"t5_bias attention (params.tq)",
       has_tq,
       true,
       att + std::vector<Key>{boolean("bidirectional"), integer("max_distance", 1),
                              integer("max_exact", 1), integer("num_buckets", 1)},
       {},
       {},
       att_shapes + std::vector<ShapeRule>{{"relative_attention_bias", {"num_buckets", "n_heads"}},
                                           {"buckets", {"tq", "tk"}},
                                           {"bias", {"n_heads", "tq", "tk"}}},
       "q",
       attention_rules},
      {"t5_bias buckets",
       nullptr,
       true,
       {boolean("bidirectional"), integer("direction_buckets", 1), integer("max_distance", 1),
        integer("max_exact", 1), integer("num_buckets", 1), signed_integer("r_min"),
        signed_integer("r_max")},
       {},
       {},
       {{"relative_position", {"r_max-r_min+1"}, true}, {"buckets", {"r_max-r_min+1"}, true}},
       "",
       range_rules}};
}

}  // namespace posenc::golden
