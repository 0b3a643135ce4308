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
// Rules 1 to 3 hold with --force too. A symbolic link to a regular file given as a file output
// (--report, engine --out) is kept: the file it names is replaced.
//
// Resolved once. A path is resolved when it is checked (OutputRule::check_file, check_dir):
// its folder is opened then (a file descriptor, O_DIRECTORY) and every later step goes through
// that handle by name: the temporary file is created with openat(O_CREAT | O_EXCL |
// O_NOFOLLOW), compared (st_dev, st_ino) with every input, and renamed with renameat within the
// same folder, the final name checked again with fstatat(AT_SYMLINK_NOFOLLOW) just before. A
// symbolic link swapped in after the check (the file or any folder on its path) changes
// nothing: the path is never looked up again.
//
// Output folders. A folder output (generate --out, check --keep, oracle --out) is resolved
// once as given; below it, posenc opens every folder with O_NOFOLLOW and writes no file
// through a link: a scheme folder that is a symbolic link (DIR/learned -> ../victim) is
// refused, never followed. Missing folders are created with mkdirat below the handle.
//
// Temporary files are named ".posenc.<pid>.<n>.tmp" in the target's folder (short, whatever
// the target's name), removed if anything fails, and on SIGINT, SIGTERM and SIGHUP once
// install_interrupt_cleanup() has run; sweep_dead_temps removes those a SIGKILLed run left.
#pragma once
#include <sys/stat.h>
#include <sys/types.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace posenc::golden {

class InputFile;  // golden/format/limits.hpp

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
bool is_own_output(const InputFile& f, OutputKind kind);

/// The file a write to path replaces: path itself when absent or a regular file, the file a
/// symbolic link names (canonical path) when it is a regular file. GoldenFileError "<path>: is
/// a FIFO, not a regular file; posenc writes regular files only" (and the like), "<path>: is
/// a symbolic link to a missing file", or when a parent exists and is not a directory.
std::filesystem::path output_target(const std::filesystem::path& path);

/// A folder opened once; files in it are created, checked, renamed and removed by name
/// through the handle. Closed when the last FolderPtr goes.
class Folder {
 public:
  Folder(int fd, std::filesystem::path path) : fd_(fd), path_(std::move(path)) {}
  ~Folder();
  Folder(const Folder&) = delete;
  Folder& operator=(const Folder&) = delete;
  int fd() const { return fd_; }
  /// The path it was opened by (for messages).
  const std::filesystem::path& path() const { return path_; }
  /// The names of its entries (not . and ..), sorted.
  std::vector<std::string> names() const;
  /// lstat of an entry through the handle (fstatat AT_SYMLINK_NOFOLLOW); false when absent.
  bool entry_stat(const std::string& name, struct ::stat* st) const;

 private:
  int fd_;
  std::filesystem::path path_;
};
using FolderPtr = std::shared_ptr<const Folder>;

/// The folder `name` inside `parent`, opened with O_NOFOLLOW; nullptr when absent;
/// GoldenFileError "<path>: is a symbolic link (to <where>); ... refused" or "is a regular
/// file, not a directory".
FolderPtr folder_open_below(const FolderPtr& parent, const std::string& name);

/// Removes, in `folder`, the temporary files ".posenc.<pid>.<n>.tmp" whose process is gone
/// (left by a run that was killed); returns how many.
int sweep_dead_temps(const Folder& folder);

/// Removes the temporary files of every AtomicFile of this process on SIGINT, SIGTERM and
/// SIGHUP, then lets the signal end the process as it would have. Idempotent.
void install_interrupt_cleanup();

/// A private folder of one run under $TMPDIR ("<prefix>-XXXXXX", mkdtemp) for files nobody
/// keeps (check's engine outputs), removed with what is in it when destroyed, and on SIGINT,
/// SIGTERM and SIGHUP once install_interrupt_cleanup() has run.
class ScratchFolder {
 public:
  explicit ScratchFolder(const std::string& prefix);
  ~ScratchFolder();
  ScratchFolder(const ScratchFolder&) = delete;
  ScratchFolder& operator=(const ScratchFolder&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  FolderPtr parent_;
  int slot_ = -1;
};

class AtomicFile;

/// The files one command reads and whether --force was given; checks and writes its outputs.
/// Copies share what was resolved.
class OutputRule {
 public:
  explicit OutputRule(bool force = false);
  /// A file the command reads (symbolic links followed); a missing path is ignored.
  void add_read(const std::filesystem::path& path);
  /// Every regular file in dir and in its folders down to `depth` levels (1: dir's own files).
  void add_reads_below(const std::filesystem::path& dir, int depth);
  /// Rules 1-4 for a file output, resolving it once; GoldenFileError naming path.
  void check_file(const std::filesystem::path& path, OutputKind kind) const;
  /// A folder output (files are written into it, below it no link is followed): absent, or a
  /// directory (a link given as the folder itself is followed, once).
  void check_dir(const std::filesystem::path& dir) const;
  /// check_file (if not done), then the temporary file through the folder handle; commit()
  /// checks the final name again and renames it into place.
  std::unique_ptr<AtomicFile> open(const std::filesystem::path& path, OutputKind kind) const;
  /// open, write, commit.
  void write(const std::filesystem::path& path, OutputKind kind,
             std::span<const std::uint8_t> bytes) const;
  void write_text(const std::filesystem::path& path, OutputKind kind, std::string_view text) const;
  /// A folder at or below a checked folder output, opened without following links below it;
  /// nullptr when it does not exist.
  FolderPtr folder(const std::filesystem::path& dir) const;
  bool force() const { return force_; }

  struct State;

 private:
  std::shared_ptr<State> state_;
  bool force_;
};

/// A file written whole or not at all: bytes go to ".posenc.<pid>.<n>.tmp" created with
/// O_CREAT | O_EXCL | O_NOFOLLOW in the target's folder (missing folders are created), are
/// fsync'd and renamed over the target by commit(). Destroyed uncommitted, it removes the
/// temporary file.
class AtomicFile {
 public:
  /// Rules 1 and 2 only (no reads, no kind): the path resolved now, once.
  explicit AtomicFile(const std::filesystem::path& path);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  void write(std::span<const std::uint8_t> bytes);
  void commit();
  /// The path of the file it replaces (a symbolic link's target for a file output).
  const std::filesystem::path& target() const { return target_; }

  struct Target;
  explicit AtomicFile(std::shared_ptr<const Target> t);

 private:
  void create();
  [[noreturn]] void fail_and_remove(const std::string& what);
  std::shared_ptr<const Target> t_;
  FolderPtr folder_;
  std::string where_, temp_;
  std::filesystem::path target_;
  std::FILE* f_ = nullptr;
  int slot_ = -1;
};

}  // namespace posenc::golden
