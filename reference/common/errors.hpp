// Error types shared by every folder.
//
// InvalidArgument: a broken precondition. Message format "<function>: <what> (got <value>)".
// GoldenFileError: a malformed, truncated or unreadable golden/engine file, with its path.
// A numerical mismatch is never an exception: verify returns it as data.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace posenc {

class InvalidArgument : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

class GoldenFileError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Builds "<function>: <what> (got <value>)" and throws InvalidArgument.
template <class Value>
[[noreturn]] void throw_invalid(const char* function, const std::string& what,
                                const Value& value) {
  std::ostringstream os;
  os << function << ": " << what << " (got " << value << ")";
  throw InvalidArgument(os.str());
}

}  // namespace posenc
