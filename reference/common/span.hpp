// posenc::span is std::span (the project is C++20).
#pragma once
#include <span>

namespace posenc {
using std::span;
}  // namespace posenc
