#include "golden/cases/registry.hpp"

#include "reference/common/errors.hpp"

namespace posenc::golden {

const std::vector<SchemeEntry>& schemes() {
  static const std::vector<SchemeEntry> all = {rope_scheme(), rope_scaling_scheme(), attention_scheme(), nope_scheme(), learned_scheme(), sinusoidal_scheme(), alibi_scheme(), t5_bias_scheme()};
  return all;
}

const SchemeEntry& scheme_by_slug(std::string_view slug) {
  std::string known;
  for (const auto& s : schemes()) {
    if (s.slug == slug) return s;
    known += (known.empty() ? "" : ", ") + s.slug;
  }
  throw_invalid("scheme_by_slug", "scheme must be one of: " + known, slug);
}

}  // namespace posenc::golden
