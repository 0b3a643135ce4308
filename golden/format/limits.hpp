// Input limits and safe opening of the files posenc reads from other people (engine outputs,
// golden files, catalogs, HF configs). Every reader of golden/ goes through here:
//
// - A path must be a regular file (after symbolic links). A FIFO would block the reader, a
//   device (/dev/zero) never ends, a directory cannot be read: each is refused by what it is,
//   "<path>: is a FIFO, not a regular file", before anything is opened for reading (the open
//   itself is non-blocking and re-checked with fstat, so a swap after the check cannot hang).
// - A reader refuses before it allocates: a file, one tensor, a header or the nesting of a
//   JSON document larger than its limit is a GoldenFileError naming the file, the size and the
//   limit with the variable that raises it. Shapes are multiplied with overflow checks.
//
// Limits (the defaults below; each is changed by its environment variable: a byte count with
// an optional K, M, G or T suffix, powers of 1024, e.g. POSENC_MAX_TENSOR_BYTES=32G):
//   POSENC_MAX_FILE_BYTES     16 GiB   a safetensors or .npy file, engine output or golden
//   POSENC_MAX_TENSOR_BYTES    8 GiB   the data of one tensor
//   POSENC_MAX_HEADER_BYTES  100 MiB   a safetensors header (the safetensors crate's limit) or
//                                      a .npy header
//   POSENC_MAX_JSON_BYTES     64 MiB   a manifest, a catalog.json or an HF config.json
//   POSENC_MAX_JSON_DEPTH         64   nesting of arrays and objects in any JSON posenc reads
//                                      (a safetensors header included)
// The largest committed manifest is 0.25 MB and nests 7 deep; the catalog is 60 kB.
#pragma once
#include <sys/types.h>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace posenc::golden {

struct InputLimits {
  std::uint64_t file_bytes = 16ull << 30;
  std::uint64_t tensor_bytes = 8ull << 30;
  std::uint64_t header_bytes = 100ull << 20;
  std::uint64_t json_bytes = 64ull << 20;
  std::uint64_t json_depth = 64;
};

/// The limits in force: the defaults of InputLimits, each overridden by its environment
/// variable when set; InvalidArgument naming the variable and its value when it is not a
/// positive count.
InputLimits input_limits();

/// Help text listing every limit, its variable, default and the value in force.
std::string input_limits_help();

/// The largest job a command starts without being told to: its estimated output (bytes, every
/// file it writes) and time (seconds of one core), each estimated before any work and refused
/// above the limit (exit 2, with the estimate and the variable that raises it).
///   POSENC_MAX_OUTPUT_BYTES   4 GiB   what one generate run writes (a byte count, K/M/G/T)
///   POSENC_MAX_JOB_SECONDS      300   its estimated seconds of one core (a count)
struct JobLimits {
  std::uint64_t output_bytes = 4ull << 30;
  std::uint64_t seconds = 300;
};
/// The limits in force (InvalidArgument naming the variable when it is not a positive count).
JobLimits job_limits();
/// GoldenFileError "<what>: the run would write about X GB ... over the limit ..." when the
/// estimate exceeds job_limits(); `advice` says how to make the job smaller.
void check_job_size(const std::string& what, std::uint64_t bytes, double seconds,
                    const std::string& advice);

/// Throws GoldenFileError "<source>: <what> of <size> bytes exceeds the limit of <limit> bytes
/// (<limit in units>; <variable> raises it)" when size > limit.
void check_limit(const std::string& source, const std::string& what, std::uint64_t size,
                 std::uint64_t limit, const char* variable);

/// "" for a regular file (after symbolic links) or a path that does not exist; otherwise what
/// it is: "a directory", "a FIFO", "a character device", "a block device", "a socket".
std::string special_file_kind(const std::filesystem::path& path);
/// "a regular file", "a directory", "a FIFO", "a character device", "a block device", "a socket"
/// (or "not a regular file") for a stat mode: the words of every message about a path's type.
const char* file_type_name(mode_t mode);

/// GoldenFileError "<path>: is a FIFO, not a regular file" (and the like) for anything but a
/// regular file; "<path>: cannot open: <reason>" when it cannot be found.
void require_regular_file(const std::filesystem::path& path);

/// A regular file open for reading, with its size; closed on destruction.
class InputFile {
 public:
  /// require_regular_file, then a non-blocking read-only open re-checked with fstat.
  explicit InputFile(const std::filesystem::path& path);
  /// The file `name` in the folder open as dirfd, never through a symbolic link (O_NOFOLLOW):
  /// how an output is read back through the folder handle it is written through
  /// (golden/format/output_path.hpp). Errors name `display`.
  InputFile(int dirfd, const std::string& name, const std::string& display);
  ~InputFile();
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  std::uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }
  /// Reads exactly out.size() bytes at offset; GoldenFileError naming the file on a read
  /// error or when the file ends early (it shrank while being read).
  void read_at(std::uint64_t offset, std::span<std::uint8_t> out) const;

 private:
  std::string path_;
  int fd_ = -1;
  std::uint64_t size_ = 0;
};

/// GoldenFileError "<source>: JSON nests deeper than the limit of N (POSENC_MAX_JSON_DEPTH)"
/// when arrays and objects nest more than `limit` deep; a scan of the text, before parsing.
void check_json_depth(std::string_view text, const std::string& source, std::uint64_t limit);

/// The bytes of a JSON file, within POSENC_MAX_JSON_BYTES (not parsed, depth not checked).
std::string read_json_text(const std::filesystem::path& path);

/// Reads and parses a JSON file (manifest, catalog, config) within the JSON limits; errors
/// name the path ("<path>: invalid JSON: ...").
nlohmann::json read_json_file(const std::filesystem::path& path);
/// The same for a file already open; errors name f.path().
nlohmann::json read_json_file(const InputFile& f);

/// SHA-256 of a file's bytes, read in chunks (memory independent of the file's size).
std::string sha256_file(const std::filesystem::path& path);
std::string sha256_file(const InputFile& f);

}  // namespace posenc::golden
