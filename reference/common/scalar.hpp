// Multiprecision oracle types.
//
// mp50  : MPFR backend, 50 decimal digits (about 166 bits), expression templates off. The oracle.
// mp100 : MPFR backend, 100 decimal digits (about 333 bits). The cross-check type: every golden
//         value is computed in both and must round to the same target value.
// Fixed precision on purpose: Boost 1.74's variable-precision mpfr_float keeps its default
// precision in a process-global static.
#pragma once
#include "reference/common/eigen.hpp"  // first: Eigen with its one false positive silenced
#include <boost/multiprecision/eigen.hpp>  // Eigen NumTraits for the mp types
#include <boost/multiprecision/mpfr.hpp>

namespace posenc {

using mp50 = boost::multiprecision::number<boost::multiprecision::mpfr_float_backend<50>,
                                           boost::multiprecision::et_off>;
using mp100 = boost::multiprecision::number<boost::multiprecision::mpfr_float_backend<100>,
                                            boost::multiprecision::et_off>;

}  // namespace posenc
