// Shared by the libFuzzer targets of fuzz/: what counts as a clean rejection.
//
// A reader or the verifier may reject its input only with GoldenFileError (a bad file, with its
// name) or InvalidArgument (a broken precondition, with function, parameter and value). Any other
// exception escaping is a finding: the target prints it and aborts, so libFuzzer saves the input.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <exception>

#include "reference/common/errors.hpp"

namespace posenc::fuzz {

template <class F>
void expect_clean(const char* what, F&& f) {
  try {
    f();
  } catch (const GoldenFileError&) {
  } catch (const InvalidArgument&) {
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: unexpected exception: %s\n", what, e.what());
    std::abort();
  }
}

/// A property of the reader that must hold for every accepted input; aborts otherwise.
inline void require(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "property violated: %s\n", what);
    std::abort();
  }
}

}  // namespace posenc::fuzz
