// The one rule for every file posenc writes (docs/bad-input.md, "Output files").
//
// posenc writes regular files only, through a temporary file and a rename. A write to PATH is
// refused (GoldenFileError naming PATH and the reason; exit 2 from the CLI) when PATH
//   1. is (after following symbolic links) a FIFO, a device, a socket or a directory;
//   2. is a symbolic link to nothing;
//   3. resolves (symbolic links followed; same st_dev and st_ino) to a file this command reads:
//      a golden manifest, its tensors file, a catalog.json, an --actual file, a --config;
//   4. is an existing, non-empty regular file that is not posenc's own kind of output for that
//      path (OutputKind below), unless --force is given. An empty file is always replaced.
// Rules 1 to 3 hold with --force too. A symbolic link to a regular file is kept: the file it
// names is replaced (the temporary file goes in that file's folder, then is renamed over it).
// Commands check every output up front (OutputRule::check_file, check_dir), before any long
// work, so a refused run writes nothing; the write re-checks (OutputRule::write).
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace posenc::golden {

/// What posenc writes at a path, and how an existing file there is recognised as posenc's own
/// kind of output (which may be replaced without --force).
enum class OutputKind {
  kReport,          // --report page: starts with kHtmlReportMark
  kEngineOutput,    // engine --out / check --keep .safetensors: __metadata__ has "posenc_output"
  kNpyOutput,       // engine --format npy, oracle: any well-formed .npy (the format has no room
                    // for a mark)
  kGoldenManifest,  // generate: a JSON object with "schema": "posenc-golden"
  kGoldenTensors,   // generate: a .safetensors whose __metadata__ has "posenc_case"
  kCatalog,         // generate, catalog: a JSON object with "schema": "posenc-catalog"
  kShardRecord,     // generate --no-catalog: a JSON object with "schema": "posenc-shard"
  kPlanManifest,    // generate --config on a model plan: a JSON object with "schema": "posenc-plan"
};

/// The first bytes of every HTML report posenc writes (golden/verify/html_report.cpp).
inline constexpr std::string_view kHtmlReportMark =
    "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
    "<meta name=\"generator\" content=\"posenc\">";

/// The safetensors __metadata__ key of an engine output written by posenc (value: the case id).
inline constexpr const char* kEngineOutputKey = "posenc_output";

/// "an HTML report of posenc (starting with its doctype and generator mark)", etc.
std::string output_kind_text(OutputKind kind);

/// True when the regular file at path holds posenc's own kind of output (or is empty); false
/// when it cannot be read or recognised. Never throws.
bool is_own_output(const std::filesystem::path& path, OutputKind kind);

/// The file a write to path replaces: path itself when absent or a regular file, the file a
/// symbolic link names (canonical path) when it is a regular file. GoldenFileError "<path>: is
/// a FIFO, not a regular file; posenc writes regular files only" (and the like), "<path>: is a
/// symbolic link to a missing file", or when a parent exists and is not a directory.
std::filesystem::path output_target(const std::filesystem::path& path);

/// The files one command reads and whether --force was given; checks and writes its outputs.
class OutputRule {
 public:
  explicit OutputRule(bool force = false) : force_(force) {}
  /// A file the command reads (symbolic links followed); a missing path is ignored.
  void add_read(const std::filesystem::path& path);
  /// Every regular file in dir and in its folders down to `depth` levels (1: dir's own files).
  void add_reads_below(const std::filesystem::path& dir, int depth);
  /// Rules 1-4 for a file output; GoldenFileError naming path.
  void check_file(const std::filesystem::path& path, OutputKind kind) const;
  /// A folder output (files are written into it): absent, or a directory (links followed).
  void check_dir(const std::filesystem::path& dir) const;
  /// check_file, then write_file_atomic.
  void write(const std::filesystem::path& path, OutputKind kind,
             std::span<const std::uint8_t> bytes) const;
  void write_text(const std::filesystem::path& path, OutputKind kind, std::string_view text) const;
  bool force() const { return force_; }

 private:
  struct Read {
    dev_t dev;
    ino_t ino;
    std::filesystem::path path;
  };
  std::vector<Read> reads_;
  bool force_;
};

/// A file written whole or not at all: bytes go to "<target>.tmp.<pid>" (".<n>" appended
/// should that name exist), created with O_CREAT | O_EXCL | O_NOFOLLOW in the target's folder
/// (missing folders are created), fsync'd and renamed over the target by commit(). target is
/// output_target(path). Destroyed uncommitted, it removes the temporary file.
class AtomicFile {
 public:
  explicit AtomicFile(const std::filesystem::path& path);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  void write(std::span<const std::uint8_t> bytes);
  void commit();
  const std::filesystem::path& target() const { return target_; }

 private:
  [[noreturn]] void fail_and_remove(const std::string& what);
  std::string where_;
  std::filesystem::path target_, temp_;
  std::FILE* f_ = nullptr;
};

}  // namespace posenc::golden
