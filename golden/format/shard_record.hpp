// The record a sharded `generate --no-catalog` leaves before it starts (DIR/.posenc-shards/),
// by which `posenc catalog` knows whether every shard of a batch finished: its JSON form and its
// strict reader. The records are written and checked against the folder by golden/cases/catalog.
//
// A record holds literal case ids, never a pattern: every case of the whole run with the shard
// that writes it, and the generate options that select the run (an argv list, shell-quoted
// when a rerun command is printed). Read back, every field is checked and bounded before use:
// the level (1: posenc's own cases; 2: `generate --level 2`), "i/n" with n <= kMaxShards,
// at most 64 options of at most 4096 bytes, case ids of [A-Za-z0-9_.-] (at most 200 bytes) of
// known schemes, each with a shard below n.
#pragma once
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace posenc::golden {

/// The most shards of a run (--shard i/n, records).
inline constexpr int kMaxShards = 10000;

struct ShardRecordCase {
  std::string scheme, id;
  int shard = 0;
};
struct ShardRecord {
  int level = 1;
  int shard_index = 0, shard_count = 1;  // this record's shard
  std::vector<std::string> options;      // e.g. {"--scheme", "learned"}; {"--level", "2", ...}
  std::vector<ShardRecordCase> cases;    // the whole run's cases and their shards
};

inline constexpr const char* kShardRecordDir = ".posenc-shards";

/// Parses "i/n" (decimal digits only, 0 <= i < n <= kMaxShards); InvalidArgument otherwise.
void parse_shard(const std::string& text, int* index, int* count);
/// The record's JSON text ("schema": "posenc-shard").
std::string shard_record_text(const ShardRecord& r);
/// What identifies a batch: its level, shard count, options and case list (not the index).
std::string shard_batch_key(const ShardRecord& r);
/// A record read back; GoldenFileError "<source>: not a shard record of posenc: <what>", or
/// naming a level this posenc does not know. `schemes`: the slugs a case may name.
ShardRecord shard_record_from_json(const nlohmann::json& j, const std::string& source,
                                   const std::set<std::string>& schemes);

/// `s` as one shell word: unchanged when it holds only [A-Za-z0-9_@%+=:,./-], else in single
/// quotes (a quote inside as '\'').
std::string shell_quote(const std::string& s);

}  // namespace posenc::golden
