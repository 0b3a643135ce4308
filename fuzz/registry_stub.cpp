// The fuzz build links the readers without the scheme generators: golden/cases/catalog.cpp
// refers to the registry only to select cases, which no fuzz target does.
#include <stdexcept>
#include <string>
#include <vector>

#include "golden/cases/registry.hpp"

namespace posenc::golden {

const std::vector<SchemeEntry>& schemes() {
  static const std::vector<SchemeEntry> none;
  return none;
}

const SchemeEntry& scheme_by_slug(std::string_view slug) {
  throw std::logic_error("fuzz build: no scheme registry (asked for " + std::string(slug) + ")");
}

}  // namespace posenc::golden
