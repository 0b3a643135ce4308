// A lock on an output folder (see dir_lock.hpp).
#include "golden/format/dir_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <system_error>

#include "reference/common/errors.hpp"
#include "reference/common/mutant.hpp"

namespace posenc::golden {

namespace fs = std::filesystem;

DirectoryLock::DirectoryLock(const fs::path& dir, Mode mode) : path_(dir / kFileName), mode_(mode) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw GoldenFileError(dir.string() + ": cannot create directory: " + ec.message());
  // The holder of an exclusive lock removes the file when it is done. A process that opened the
  // file before that removal may then lock an unlinked file: it checks that the path still
  // names the file it locked and starts over otherwise.
  for (int attempt = 0; attempt < 100; ++attempt) {
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd_ < 0) {
      throw GoldenFileError(path_.string() + ": cannot create lock file: " + std::strerror(errno));
    }
    const int op = (mode == Mode::kExclusive ? LOCK_EX : LOCK_SH) | LOCK_NB;
    if (POSENC_MUTANT("golden_output_lock_ignored")) return;
    if (::flock(fd_, op) != 0) {
      const int err = errno;
      ::close(fd_);
      fd_ = -1;
      if (err == EWOULDBLOCK) {
        throw GoldenFileError(
            dir.string() + ": another posenc process is writing into this folder (it holds " +
            path_.string() + "); refused rather than mixing its files with this run's. Wait "
            "for it to finish, then run again");
      }
      throw GoldenFileError(path_.string() + ": cannot lock: " + std::strerror(err));
    }
    struct stat held {}, named {};
    if (::fstat(fd_, &held) == 0 && ::stat(path_.c_str(), &named) == 0 &&
        held.st_ino == named.st_ino && held.st_dev == named.st_dev) {
      return;
    }
    ::close(fd_);
    fd_ = -1;
  }
  throw GoldenFileError(path_.string() + ": cannot lock: the lock file keeps being replaced");
}

DirectoryLock::~DirectoryLock() {
  if (fd_ < 0) return;
  // Only a sole holder may remove the file; shared holders leave it (another may hold it).
  if (mode_ == Mode::kExclusive) ::unlink(path_.c_str());
  ::close(fd_);
}

}  // namespace posenc::golden
