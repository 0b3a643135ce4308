// A lock on an output folder, so that two posenc processes writing golden files into the same
// folder cannot interleave a catalog rebuild or a stale-file sweep with the other's writes.
//
// The lock is flock(2) on <dir>/.posenc.lock: the kernel releases it when its process ends,
// however it ends (a SIGKILLed `generate` leaves no stale lock; at most the empty file, which
// nothing reads). Writers that only add case files (`generate --shard i/n --no-catalog`, the
// fan-out of a batch scheduler) share it; writers that rebuild catalog.json or remove files
// (`generate`, `generate --config`, `catalog`) hold it alone. A process that cannot get it is
// refused at once with a message saying so; it never waits.
#pragma once
#include <filesystem>
#include <string>

namespace posenc::golden {

class DirectoryLock {
 public:
  enum class Mode { kShared, kExclusive };

  /// Creates dir when missing, then takes the lock; GoldenFileError "<dir>: another posenc
  /// process is writing into this folder ..." when an incompatible holder has it.
  DirectoryLock(const std::filesystem::path& dir, Mode mode);
  ~DirectoryLock();
  DirectoryLock(const DirectoryLock&) = delete;
  DirectoryLock& operator=(const DirectoryLock&) = delete;

  static constexpr const char* kFileName = ".posenc.lock";

 private:
  std::filesystem::path path_;
  int fd_ = -1;
  Mode mode_;
};

}  // namespace posenc::golden
