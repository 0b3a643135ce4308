// libFuzzer target: the shard record reader (shard_record_from_json) on arbitrary text, parsed
// within the JSON limits as posenc catalog reads a record. An accepted record holds only plain
// case ids of the given schemes, shards inside its count, a count within kMaxShards, and at most
// 64 bounded options; shell_quote of every option is one shell word.
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>

#include "fuzz/fuzz_common.hpp"
#include "golden/format/limits.hpp"
#include "golden/format/shard_record.hpp"

using namespace posenc;
using namespace posenc::golden;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  static const std::set<std::string> schemes = {"rope", "rope_scaling", "learned", "plan"};
  fuzz::expect_clean("shard_record_from_json", [&] {
    check_json_depth(text, "record.json", input_limits().json_depth);
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception&) {
      return;  // not JSON: the reader's caller refuses it (read_json_file)
    }
    const ShardRecord r = shard_record_from_json(j, "record.json", schemes);
    fuzz::require(r.shard_count >= 1 && r.shard_count <= kMaxShards && r.shard_index < r.shard_count,
                  "the shard is inside its count");
    fuzz::require(r.options.size() <= 64, "at most 64 options");
    for (const auto& c : r.cases) {
      fuzz::require(schemes.count(c.scheme) == 1, "a case of a known scheme");
      fuzz::require(c.shard >= 0 && c.shard < r.shard_count, "a case's shard is inside the count");
      fuzz::require(!c.id.empty() && c.id.size() <= 200 &&
                        c.id.find_first_of("/\\ '\"$;()*") == std::string::npos,
                    "a case id is a plain name");
    }
    for (const auto& o : r.options) {
      const std::string q = shell_quote(o);
      fuzz::require(!q.empty() && (q.front() != '\'' || q.back() == '\''), "one quoted shell word");
    }
    (void)shard_record_text(r);
  });
  return 0;
}
