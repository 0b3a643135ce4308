// Every element's ratio, for the HTML report's heat maps and worst-element tables
// (golden/verify/html_report.hpp). verify_case keeps only the worst element and the per-position
// maxima; this asks it for all of them.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "golden/verify/verify.hpp"

namespace posenc::golden {

/// Tensor name -> |y - y*| / budget of every element in row-major order (NaN output: +inf;
/// elements beyond VerifyOptions::max_position: NaN). Tensors not judged are absent or empty.
using ElementRatios = std::map<std::string, std::vector<double>>;

/// verify_case, also filling `ratios`.
CaseReport verify_case_with_ratios(const CaseSpec& spec, const TensorMap& golden,
                                   const TensorMap& actual, const VerifyOptions& opt,
                                   ElementRatios& ratios);

/// An element of an expected tensor in words: "token 18 (position 16777217), head 1, channel 65
/// (pair 1)", as verify's worst element.
std::string describe_element(const TensorSpec& spec, const TensorMap& golden, std::int64_t index);

}  // namespace posenc::golden
