// The committed catalog, write side: the files of a generated case written into a catalog folder
// (golden/data/<scheme>/<case_id>.json + .safetensors), the registry's cases selected by scheme,
// id and shard (shards balanced by cost), and the records by which `posenc catalog` knows that
// the shards of a batch all finished. Reading the catalog and loading a case:
// golden/verify/catalog.hpp. Running the shards on a cluster: docs/cluster.md.
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "golden/format/manifest.hpp"
#include "golden/format/output_path.hpp"
#include "golden/format/shard_record.hpp"
#include "golden/cases/registry.hpp"
#include "golden/verify/catalog.hpp"
#include "golden/verify/verify.hpp"

namespace posenc::golden {

/// Encoded files of one case (bit-reproducible), in memory (spilled tensors read back).
struct CaseFiles {
  std::string manifest_text;
  std::vector<std::uint8_t> tensors;
};
CaseFiles case_files(const GoldenCase& c);

/// dir/<scheme>/<id>.json and dir/<scheme>/<id>.safetensors: where write_case puts a case.
std::filesystem::path case_manifest_path(const std::filesystem::path& dir, const std::string& scheme,
                                         const std::string& id);
std::filesystem::path case_tensors_path(const std::filesystem::path& dir, const std::string& scheme,
                                        const std::string& id);
/// Writes the two files of a case atomically under dir/<scheme>/ (through `rule`: OutputKind
/// kGoldenTensors and kGoldenManifest) and returns its entry.
CatalogEntry write_case(const std::filesystem::path& dir, const std::string& scheme,
                        const std::string& id, const CaseFiles& f,
                        const OutputRule& rule = OutputRule());
/// The same files, the tensors streamed to disk chunk by chunk (safetensors_write: memory is the
/// in-memory tensors, never the encoded file or the spilled ones); *bytes = both files' sizes.
CatalogEntry write_case(const std::filesystem::path& dir, const std::string& scheme,
                        const std::string& id, const GoldenCase& c, const OutputRule& rule = OutputRule(),
                        std::uint64_t* bytes = nullptr);

/// Which stages show each of the scheme's engine mistakes under each profile (manifest
/// "mistake_detection": {profile: {mistake: [stages]}}), measured: the scheme's engine runs
/// every mistake on the exact pipeline, and each stage of its output, given alone, is judged
/// with every profile that applies; a stage shows the mistake when verify fails it. Only
/// mistakes some stage shows are listed. verify reads it to say when the stages an engine gave
/// cannot see a mistake at that profile's resolution although other stages can (the
/// resolution gap of 16-bit targets: docs/verifying.md). Empty for negative controls, traces
/// and cases whose tensors spilled to disk exceed kMistakeDetectionMaxSpilledBytes (a long
/// call's scores: too large to judge 5 profiles x every mistake at generation).
inline constexpr std::uint64_t kMistakeDetectionMaxSpilledBytes = std::uint64_t{64} << 20;
nlohmann::json mistake_detection(const SchemeEntry& scheme, const GoldenCase& c);
/// Which stages tell a negative control's right convention from its known-wrong one under each
/// profile (manifest "control_detection": {profile: [stages]}, CaseSpec::control_stages),
/// measured: the scheme's engine without a mistake on the exact pipeline is the right
/// convention, and each stage of its output, given alone, is judged against the control with
/// every profile that applies; a stage tells them apart when its worst element lies more than
/// two budgets away (an exact stage: when any element differs). A profile under which no stage
/// tells gets an empty list. Empty for valid cases.
nlohmann::json control_detection(const SchemeEntry& scheme, const GoldenCase& c);
/// Adds "mistake_detection" and "control_detection" to a generated case's manifest.
void add_detection(const SchemeEntry& scheme, GoldenCase& c);
/// scheme.generate(id) with its manifest's "mistake_detection" and "control_detection" (the one
/// way cases are generated for the catalog, `posenc generate` and the up-to-date tests).
GoldenCase generate_case(const SchemeEntry& scheme, const std::string& id);

/// catalog.json of out, from the case files in it: posenc's own cases (registry order) that
/// are there, then every other golden manifest of a scheme folder that has its tensors file
/// (by path). Each other case carries its origin (CatalogEntry::origin): origins[id] when
/// given (the run that wrote it: "generate --config", "generate --level 2"), else what out's
/// previous catalog said, else "found". Scheme folders are read through rule.folder (never
/// through a link); the catalog is written through `rule`. Returns the number of cases listed.
std::size_t catalog_write_from_files(const std::filesystem::path& out, const OutputRule& rule,
                                     const std::map<std::string, std::string>& origins = {});
/// The origin of each case a level-2 shard record of dir lists ("generate --level 2"), for the
/// catalog a merge writes.
std::map<std::string, std::string> shard_record_origins(const std::filesystem::path& dir);

/// What a whole-scheme `generate` removes and keeps in its output folder.
struct StaleSweep {
  std::vector<std::string> removed;  // "<scheme>/<file>"
  std::vector<std::string> kept;     // "<scheme>/<file> (why)"
  int temps = 0;                     // temporary files of killed runs removed
};
/// Removes, in out/<slug> for each slug, exactly the files posenc's own generate wrote there
/// that this run no longer generates: listed in out/catalog.json with no origin, still holding
/// the catalog's SHA-256, of a case not in ids_now. Every other file is kept and named (a
/// file posenc did not write, one changed since, a case of another run); so are folders.
/// Also sweep_dead_temps in those folders. Folders are opened through rule (never a link).
StaleSweep sweep_stale(const std::filesystem::path& out, const OutputRule& rule,
                       const std::set<std::string>& slugs, const std::set<std::string>& ids_now);

/// Every case of every scheme (in registry order), filtered. With shard_count n > 1: the cases
/// of shard shard_index of the selection's balanced_shards by case_cost (registry order kept);
/// the n shards are disjoint and their union is the selection.
struct CaseSelection {
  std::string scheme;      // "" = all
  std::string case_regex;  // "" = all; a CaseMatcher pattern searched in the id
  int shard_index = 0, shard_count = 1;
};

/// The longest --case pattern accepted.
inline constexpr std::size_t kMaxCasePatternBytes = 256;

/// A --case pattern: an RE2 regular expression (ECMAScript-like syntax without backreferences
/// or lookaround) searched in each case id, in time linear in the id's length whatever the
/// pattern, with bounded memory and no recursion. An empty pattern matches every id.
class CaseMatcher {
 public:
  /// InvalidArgument "--case <pattern>: not a valid regular expression (<why>)", or "longer
  /// than 256 characters".
  explicit CaseMatcher(const std::string& pattern);
  ~CaseMatcher();
  CaseMatcher(const CaseMatcher&) = delete;
  CaseMatcher& operator=(const CaseMatcher&) = delete;
  bool matches(const std::string& id) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};
std::vector<std::pair<const SchemeEntry*, CaseRow>> select_cases(const CaseSelection& sel);


/// Estimated cost of generating a case, in units of 0.1 ms of one core's CPU time: the measured
/// table golden/cases/case_costs.inc (written by tools/case_costs.py); a case the table lacks
/// costs the median of its scheme's rows (of every row when the scheme has none). A constant
/// of the build, so every machine of a batch computes the same shards.
std::uint64_t case_cost(const std::string& scheme, const std::string& id);

/// The shard (0 .. shard_count-1) of each item, balanced by cost with the greedy longest
/// processing time rule: items in decreasing cost (equal costs in index order) each go to the
/// shard with the smallest total so far (the lowest shard on a tie). Integer arithmetic only:
/// deterministic. The largest shard is at most 4/3 of the best possible (Graham, 1969).
std::vector<int> balanced_shards(const std::vector<std::uint64_t>& costs, int shard_count);

/// What a `generate --no-catalog` run (a shard of a batch) promised before it began, kept in
/// DIR/.posenc-shards/ (kShardRecordDir) until `posenc catalog` finds every case of the run (all
/// its shards) in DIR: then the catalog is written and the records removed; else the catalog is
/// refused (shard_gaps). The record's form: golden/format/shard_record.hpp.
/// A level-1 run's record: sel's whole selection (every shard) with the shard of each case.
ShardRecord level1_shard_record(const CaseSelection& sel);
/// Removes DIR/.posenc-shards and the records in it, through rule's folder handles.
void shard_records_remove(const std::filesystem::path& dir, const OutputRule& rule);
/// DIR/.posenc-shards/<selection hash>-<i>-of-<n>.json: one file per shard of a selection.
std::filesystem::path shard_record_path(const std::filesystem::path& dir, const ShardRecord& r);
/// Every record in dir/.posenc-shards (none when the folder is absent), by file name;
/// GoldenFileError naming a malformed record or one of an unknown level (posenc knows 1 and 2).
std::vector<ShardRecord> read_shard_records(const std::filesystem::path& dir);

/// A shard of a recorded selection some of whose cases are not in the folder (a manifest or
/// its tensors file missing): it failed or never ran.
struct ShardGap {
  ShardRecord shard;                 // shard_index / shard_count: the shard to rerun
  std::vector<std::string> missing;  // its case ids without both files, in run order
};
/// The gaps of every selection recorded in dir, each shard of it checked (recorded or not: a
/// shard that never started left no record, its siblings' records name it).
std::vector<ShardGap> shard_gaps(const std::filesystem::path& dir);

}  // namespace posenc::golden
