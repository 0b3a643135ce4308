// The RoPE scaling rule as JSON (a manifest's params.scaling, a plan type's scaling): one codec,
// in golden/cases/plan_json.cpp, a translation unit without the oracle (fuzz/fuzz_plan.cpp links
// it alone). golden/cases/rope_case.hpp includes this header.
#pragma once
#include <nlohmann/json.hpp>

#include "reference/rope_scaling.hpp"

namespace posenc::golden {

/// The scaling rule as manifest params, and back (GoldenFileError naming the key).
nlohmann::json rope_scaling_to_json(const reference::RopeScaling& s);
reference::RopeScaling rope_scaling_from_json(const nlohmann::json& j);

}  // namespace posenc::golden
