// Test-only mutant switch: deliberate bugs that show each property test can fail.
//
// In a normal build POSENC_MUTANT(name) is the constant false and every mutant branch is
// compiled away. The mutant test binaries (posenc_<label>_test_mutant) define
// POSENC_ENABLE_MUTANTS; there the environment variable POSENC_MUTANT names the one active
// mutant, e.g. POSENC_MUTANT=ref_sin_sign_flipped. docs/mutants.md lists them.
// The switches of the reference (ref_*) are not in reference/: tools/mutants/reference.patch adds
// them to the copy of reference/ that the mutant build compiles (tools/mutant_patch.sh).
// It lives in reference/common/, beside errors.hpp and dtype.hpp, because that is the one folder
// every library may include (posenc::verify included: it needs no library); no file of
// reference/ uses it (CMake refuses a mutant switch in reference/ when it configures), only the
// patched copy does.
#pragma once

namespace posenc {
/// The *_thread_dependent mutants: results that depend on the thread that computed them. Off
/// thread 0, x[i] += x[i] * 2^-23 for the n entries of a tile.
inline void mutant_nudge(float* x, int n, int thread) {
  if (thread == 0) return;
  for (int i = 0; i < n; ++i) x[i] += x[i] * 0x1p-23f;
}
}  // namespace posenc

#ifdef POSENC_ENABLE_MUTANTS
#include <cstdlib>
#include <string_view>

namespace posenc {
inline std::string_view active_mutant() {
  static const char* const name = std::getenv("POSENC_MUTANT");
  return name ? std::string_view(name) : std::string_view();
}
}  // namespace posenc
#define POSENC_MUTANT(name) (::posenc::active_mutant() == (name))
#else
#define POSENC_MUTANT(name) false
#endif
