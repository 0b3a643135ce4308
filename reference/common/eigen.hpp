// Eigen, included once through here so that one false positive stays quiet.
//
// GCC 12 reports -Wmaybe-uninitialized and -Wuninitialized ("'__Y' is used uninitialized" in
// _mm512_unpacklo_ps and friends) inside its own avx512fintrin.h when Eigen's packet code is
// inlined with -march=native on an AVX-512 machine (measured: 133 warnings for
// optimized/attention.cpp with -march=skylake-avx512, 120 in a whole build, none without AVX-512). GCC judges a
// diagnostic pragma by source location, so ignoring those two warnings around the first
// inclusion of Eigen (and the intrinsics headers it pulls in) silences exactly those reports;
// every other warning, and this one in posenc's own code, stays on.
#pragma once

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <Eigen/Dense>
#pragma GCC diagnostic pop
