// The shard record's JSON form and strict reader (golden/format/shard_record.hpp).
#include "golden/format/shard_record.hpp"

#include <cstdint>
#include <string_view>

#include "reference/common/errors.hpp"

namespace posenc::golden {

namespace {

/// A case id as a record may name it: a plain file stem of [A-Za-z0-9_.-], at most 200 bytes.
bool plain_case_id(const std::string& id) {
  return !id.empty() && id.size() <= 200 && id != "." && id != ".." &&
         id.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") ==
             std::string::npos;
}

struct RecordReader {
  const nlohmann::json& j;
  const std::string& source;
  [[noreturn]] void bad(const std::string& what) const {
    throw GoldenFileError(source + ": not a shard record of posenc: " + what);
  }

  /// "options" (an argv list) and "cases" ([scheme, id, shard] each): literal ids of known
  /// schemes only, shards within the record's count.
  void lists(ShardRecord* r, const std::set<std::string>& schemes) const {
    if (!j.contains("options") || !j["options"].is_array() || j["options"].size() > 64) {
      bad("\"options\" must be an array of at most 64 strings");
    }
    for (const auto& o : j["options"]) {
      if (!o.is_string() || o.get<std::string>().size() > 4096) {
        bad("each of \"options\" must be a string of at most 4096 bytes");
      }
      r->options.push_back(o.get<std::string>());
    }
    if (!j.contains("cases") || !j["cases"].is_array()) bad("\"cases\" must be an array");
    for (const auto& c : j["cases"]) {
      if (!c.is_array() || c.size() != 3 || !c[0].is_string() || !c[1].is_string() ||
          !c[2].is_number_integer() || c[2].get<std::int64_t>() < 0 ||
          c[2].get<std::int64_t>() >= r->shard_count) {
        bad("each of \"cases\" must be [scheme, id, shard] with 0 <= shard < " +
            std::to_string(r->shard_count));
      }
      const std::string scheme = c[0].get<std::string>(), id = c[1].get<std::string>();
      if (!schemes.count(scheme)) bad("case scheme \"" + scheme.substr(0, 64) + "\" is not a scheme of posenc");
      if (!plain_case_id(id)) {
        bad("case id \"" + id.substr(0, 64) + "\" is not a plain case id (letters, digits, _ . -; at most 200 bytes)");
      }
      r->cases.push_back({scheme, id, c[2].get<int>()});
    }
  }
};

}  // namespace

void parse_shard(const std::string& text, int* index, int* count) {
  const auto slash = text.find('/');
  auto digits = [](const std::string& t) {
    return !t.empty() && t.size() <= 18 && t.find_first_not_of("0123456789") == std::string::npos;
  };
  if (slash == std::string::npos || !digits(text.substr(0, slash)) || !digits(text.substr(slash + 1))) {
    throw_invalid("parse_shard",
                  "shard must look like i/n with decimal integers (no spaces, signs or other characters)", text);
  }
  const long long i = std::stoll(text.substr(0, slash)), n = std::stoll(text.substr(slash + 1));
  if (n < 1 || i >= n) throw_invalid("parse_shard", "shard i/n needs 0 <= i < n", text);
  if (n > kMaxShards) {
    throw_invalid("parse_shard", "shard i/n needs n <= " + std::to_string(kMaxShards) + " (the most shards of a run)",
                  text);
  }
  *index = static_cast<int>(i);
  *count = static_cast<int>(n);
}

std::string shard_record_text(const ShardRecord& r) {
  nlohmann::json j;
  j["schema"] = "posenc-shard";
  j["level"] = r.level;
  j["shard"] = std::to_string(r.shard_index) + "/" + std::to_string(r.shard_count);
  j["options"] = r.options;
  nlohmann::json cases = nlohmann::json::array();
  for (const ShardRecordCase& c : r.cases) cases.push_back({c.scheme, c.id, c.shard});
  j["cases"] = std::move(cases);
  return j.dump(2) + "\n";
}

std::string shard_batch_key(const ShardRecord& r) {
  std::string key = std::to_string(r.level) + "\n" + std::to_string(r.shard_count);
  for (const std::string& o : r.options) key += "\n" + o;
  for (const ShardRecordCase& c : r.cases) key += "\n" + c.scheme + "/" + c.id + "@" + std::to_string(c.shard);
  return key;
}

ShardRecord shard_record_from_json(const nlohmann::json& j, const std::string& source,
                                   const std::set<std::string>& schemes) {
  const RecordReader rd{j, source};
  if (!j.is_object() || !j.contains("schema") || j["schema"] != "posenc-shard") {
    rd.bad("no \"schema\": \"posenc-shard\"");
  }
  if (!j.contains("shard") || !j["shard"].is_string()) rd.bad("\"shard\" must be a string");
  if (!j.contains("level") || !j["level"].is_number_integer()) rd.bad("\"level\" must be an integer");
  ShardRecord r;
  const std::int64_t level = j["level"].get<std::int64_t>();
  if (level != 1 && level != 2) {
    throw GoldenFileError(source + ": \"level\" is " + std::to_string(level) +
                          ", a catalog level this posenc does not generate (it knows levels 1 and 2)");
  }
  r.level = static_cast<int>(level);
  try {
    parse_shard(j["shard"].get<std::string>(), &r.shard_index, &r.shard_count);
  } catch (const InvalidArgument& e) {
    rd.bad(e.what());
  }
  rd.lists(&r, schemes);
  return r;
}

std::string shell_quote(const std::string& s) {
  static constexpr std::string_view kSafe =
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+=:,./-";
  if (!s.empty() && s.find_first_not_of(kSafe) == std::string::npos) return s;
  std::string q = "'";
  for (const char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

}  // namespace posenc::golden
