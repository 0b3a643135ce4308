// Test-only mutant switch: deliberate bugs that show each property test can fail.
//
// In a normal build POSENC_MUTANT(name) is the constant false and every mutant branch is
// compiled away. The mutant test build (CMake target posenc_rope_mutant_test) defines
// POSENC_ENABLE_MUTANTS; there the environment variable POSENC_MUTANT names the one active
// mutant, e.g. POSENC_MUTANT=ref_sin_sign_flipped. docs/mutants.md lists them.
#pragma once

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
