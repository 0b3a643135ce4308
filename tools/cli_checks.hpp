// Checks shared by the subcommands' option declarations (tools/posenc_cli.cpp and the
// subcommands that declare their own options).
#pragma once
#include <string>

#include <CLI/CLI.hpp>

namespace posenc::tools {

/// A file, folder or value option given as "": a usage error (exit 2), never silently ignored.
inline const CLI::Validator kNonEmpty(
    [](std::string& v) { return v.empty() ? std::string("must not be empty") : std::string(); },
    "NONEMPTY", "non-empty");

}  // namespace posenc::tools
