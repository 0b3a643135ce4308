// The one rule for every file posenc writes (golden/format/output_path.hpp).
#include "golden/format/output_path.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "golden/format/format.hpp"
#include "golden/format/limits.hpp"
#include "golden/format/manifest.hpp"
#include "reference/common/errors.hpp"

namespace posenc::golden {

namespace fs = std::filesystem;

namespace {

[[noreturn]] void fail(const std::string& where, const std::string& what) {
  throw GoldenFileError(where + ": " + what);
}

/// A path under a parent that is not a directory (lstat said ENOTDIR): names that parent.
[[noreturn]] void fail_parent_not_directory(const fs::path& path) {
  fs::path p = path.parent_path();
  while (!p.empty()) {
    struct stat st {};
    if (::stat(p.c_str(), &st) == 0 && !S_ISDIR(st.st_mode)) {
      fail(path.string(), "cannot create directory " + path.parent_path().string() + ": " +
                              p.string() + " is " + std::string(file_type_name(st.st_mode)) + ", not a directory");
    }
    if (p == p.parent_path()) break;
    p = p.parent_path();
  }
  fail(path.string(),
       "cannot create directory " + path.parent_path().string() + ": a parent is not a directory");
}

std::string json_schema(const fs::path& path) {
  const nlohmann::json j = read_json_file(path);
  if (!j.is_object() || !j.contains("schema") || !j["schema"].is_string()) return "";
  return j["schema"].get<std::string>();
}

}  // namespace

std::string output_kind_text(OutputKind kind) {
  switch (kind) {
    case OutputKind::kReport:
      return "an HTML report of posenc (it does not start with posenc's doctype and generator "
             "mark)";
    case OutputKind::kEngineOutput:
      return std::string("a .safetensors output of posenc (no \"") + kEngineOutputKey +
             "\" in its __metadata__)";
    case OutputKind::kNpyOutput:
      return "a .npy file";
    case OutputKind::kGoldenManifest:
      return std::string("a golden manifest (no \"schema\": \"") + kSchemaName + "\")";
    case OutputKind::kGoldenTensors:
      return "a golden tensors file of posenc (no \"posenc_case\" in its __metadata__)";
    case OutputKind::kCatalog:
      return "a posenc catalog (no \"schema\": \"posenc-catalog\")";
    case OutputKind::kShardRecord:
      return "a shard record of posenc (no \"schema\": \"posenc-shard\")";
    case OutputKind::kPlanManifest:
      return "a plan manifest of posenc (no \"schema\": \"posenc-plan\")";
  }
  return "posenc's output";
}

bool is_own_output(const fs::path& path, OutputKind kind) {
  try {
    const InputFile f(path);
    if (f.size() == 0) return true;
    switch (kind) {
      case OutputKind::kReport: {
        if (f.size() < kHtmlReportMark.size()) return false;
        std::vector<std::uint8_t> head(kHtmlReportMark.size());
        f.read_at(0, head);
        return std::equal(head.begin(), head.end(), kHtmlReportMark.begin(),
                          [](std::uint8_t a, char b) { return a == static_cast<std::uint8_t>(b); });
      }
      case OutputKind::kEngineOutput:
        return safetensors_index(f).metadata.count(kEngineOutputKey) > 0;
      case OutputKind::kGoldenTensors:
        return safetensors_index(f).metadata.count("posenc_case") > 0;
      case OutputKind::kNpyOutput:
        npy_index(f, "x");
        return true;
      case OutputKind::kGoldenManifest:
        return json_schema(path) == kSchemaName;
      case OutputKind::kCatalog:
        return json_schema(path) == "posenc-catalog";
      case OutputKind::kShardRecord:
        return json_schema(path) == "posenc-shard";
      case OutputKind::kPlanManifest:
        return json_schema(path) == "posenc-plan";
    }
  } catch (const std::exception&) {
    return false;
  }
  return false;
}

fs::path output_target(const fs::path& path) {
  const std::string where = path.string();
  struct stat lst {};
  if (::lstat(path.c_str(), &lst) != 0) {
    if (errno == ENOTDIR) fail_parent_not_directory(path);
    if (errno == ENOENT) return path;  // a new file (missing folders are created)
    fail(where, std::string("cannot stat: ") + std::strerror(errno));
  }
  if (S_ISLNK(lst.st_mode)) {
    struct stat st {};
    std::error_code ec;
    const fs::path to = fs::read_symlink(path, ec);
    if (::stat(path.c_str(), &st) != 0) {
      fail(where, "is a symbolic link to a missing file (" + to.string() +
                      "); refused: posenc does not create files through a link");
    }
    if (!S_ISREG(st.st_mode)) {
      fail(where, "is a symbolic link to " + std::string(file_type_name(st.st_mode)) + " (" + to.string() +
                      "), not a regular file; posenc writes regular files only");
    }
    return fs::canonical(path);
  }
  if (!S_ISREG(lst.st_mode)) {
    fail(where, "is " + std::string(file_type_name(lst.st_mode)) +
                    ", not a regular file; posenc writes regular "
                    "files only");
  }
  return path;
}

void OutputRule::add_read(const fs::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return;
  reads_.push_back({st.st_dev, st.st_ino, path});
}

void OutputRule::add_reads_below(const fs::path& dir, int depth) {
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code e2;
    if (it->is_directory(e2)) {
      if (depth > 1) add_reads_below(it->path(), depth - 1);
    } else {
      add_read(it->path());
    }
  }
}

void OutputRule::check_file(const fs::path& path, OutputKind kind) const {
  const fs::path target = output_target(path);  // rules 1 and 2
  struct stat st {};
  if (::stat(target.c_str(), &st) != 0) return;  // a new file
  for (const Read& r : reads_) {
    if (r.dev == st.st_dev && r.ino == st.st_ino) {
      fail(path.string(), "is the file " + r.path.string() +
                              " that this command reads (same device and inode); refused, "
                              "--force or not");
    }
  }
  if (!force_ && !is_own_output(target, kind)) {
    fail(path.string(), "exists and is not " + output_kind_text(kind) +
                            "; refused to replace it (--force replaces it)");
  }
}

void OutputRule::check_dir(const fs::path& dir) const {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) {
    if (errno == ENOTDIR) fail_parent_not_directory(dir);
    return;  // created when the first file is written
  }
  if (!S_ISDIR(st.st_mode)) {
    fail(dir.string(), "is " + std::string(file_type_name(st.st_mode)) +
                           ", not a directory (this output is a "
                           "folder of files); refused");
  }
}

void OutputRule::write(const fs::path& path, OutputKind kind,
                       std::span<const std::uint8_t> bytes) const {
  check_file(path, kind);
  write_file_atomic(path, bytes);
}

void OutputRule::write_text(const fs::path& path, OutputKind kind, std::string_view text) const {
  write(path, kind,
        std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(text.data()),
                                      text.size()));
}

// -----------------------------------------------------------------------------------------------

AtomicFile::AtomicFile(const fs::path& path) : where_(path.string()), target_(output_target(path)) {
  const fs::path parent = target_.parent_path();
  if (!parent.empty()) {
    std::error_code ec;
    fs::create_directories(parent, ec);
    if (ec) fail(where_, "cannot create directory " + parent.string() + ": " + ec.message());
  }
  const std::string base = target_.string() + ".tmp." + std::to_string(::getpid());
  for (int n = 0; n < 100; ++n) {
    temp_ = n == 0 ? base : base + "." + std::to_string(n);
    // O_EXCL: never through a symbolic link, never over an existing file of any kind.
    const int fd =
        ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd >= 0) {
      f_ = ::fdopen(fd, "wb");
      if (f_ == nullptr) {
        ::close(fd);
        fail_and_remove(std::string("cannot open temp file ") + temp_.string() + ": " +
                        std::strerror(errno));
      }
      return;
    }
    if (errno != EEXIST) {
      fail(where_, "cannot open temp file " + temp_.string() + ": " + std::strerror(errno));
    }
  }
  fail(where_, "cannot open a temp file: " + base + " and 99 numbered ones exist");
}

AtomicFile::~AtomicFile() {
  if (f_ != nullptr) {
    std::fclose(f_);
    ::unlink(temp_.c_str());
  }
}

void AtomicFile::fail_and_remove(const std::string& what) {
  if (f_ != nullptr) std::fclose(f_);
  f_ = nullptr;
  ::unlink(temp_.c_str());
  fail(where_, what);
}

void AtomicFile::write(std::span<const std::uint8_t> bytes) {
  if (f_ == nullptr) fail(where_, "write after commit");
  if (!bytes.empty() && std::fwrite(bytes.data(), 1, bytes.size(), f_) != bytes.size()) {
    fail_and_remove("write error on " + temp_.string() + ": " + std::strerror(errno));
  }
}

void AtomicFile::commit() {
  if (f_ == nullptr) fail(where_, "commit twice");
  if (std::fflush(f_) != 0 || ::fsync(::fileno(f_)) != 0) {
    fail_and_remove("flush error on " + temp_.string() + ": " + std::strerror(errno));
  }
  const int rc = std::fclose(f_);
  f_ = nullptr;
  if (rc != 0) {
    ::unlink(temp_.c_str());
    fail(where_, "close error on " + temp_.string() + ": " + std::strerror(errno));
  }
  // The target may have changed kind since it was resolved: never rename over a non-file.
  struct stat st {};
  if (::lstat(target_.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    ::unlink(temp_.c_str());
    fail(where_, "became " + std::string(file_type_name(st.st_mode)) + " while being written; refused");
  }
  if (::rename(temp_.c_str(), target_.c_str()) != 0) {
    const std::string err = std::strerror(errno);
    ::unlink(temp_.c_str());
    fail(where_, "cannot rename " + temp_.string() + ": " + err);
  }
}

}  // namespace posenc::golden
