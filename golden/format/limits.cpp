// Input limits and safe opening of input files (see limits.hpp).
#include "golden/format/limits.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <limits>

#include "golden/format/format.hpp"
#include "reference/common/errors.hpp"
#include "reference/common/mutant.hpp"

namespace posenc::golden {
namespace {

struct LimitVariable {
  const char* name;
  std::uint64_t InputLimits::*field;
  const char* what;
};

constexpr std::array<LimitVariable, 5> kLimitVariables = {{
    {"POSENC_MAX_FILE_BYTES", &InputLimits::file_bytes, "a safetensors or .npy file"},
    {"POSENC_MAX_TENSOR_BYTES", &InputLimits::tensor_bytes, "one tensor's data"},
    {"POSENC_MAX_HEADER_BYTES", &InputLimits::header_bytes, "a safetensors or .npy header"},
    {"POSENC_MAX_JSON_BYTES", &InputLimits::json_bytes, "a manifest, catalog or config.json"},
    {"POSENC_MAX_JSON_DEPTH", &InputLimits::json_depth, "nesting depth of any JSON"},
}};

// "123", "64M", "16G": a positive count with an optional binary suffix; 0 when malformed.
std::uint64_t parse_count(std::string_view s) {
  if (s.empty()) return 0;
  std::uint64_t scale = 1;
  switch (s.back()) {
    case 'K': case 'k': scale = 1ull << 10; break;
    case 'M': case 'm': scale = 1ull << 20; break;
    case 'G': case 'g': scale = 1ull << 30; break;
    case 'T': case 't': scale = 1ull << 40; break;
    default: break;
  }
  if (scale != 1) s.remove_suffix(1);
  if (s.empty() || s.size() > 19) return 0;
  std::uint64_t v = 0;
  for (const char c : s) {
    if (c < '0' || c > '9') return 0;
    v = 10 * v + static_cast<std::uint64_t>(c - '0');
  }
  std::uint64_t out = 0;
  if (__builtin_mul_overflow(v, scale, &out)) return 0;
  return out;
}

std::string human_bytes(std::uint64_t v) {
  static constexpr std::array<std::pair<std::uint64_t, const char*>, 4> kUnits = {
      {{1ull << 40, " TiB"}, {1ull << 30, " GiB"}, {1ull << 20, " MiB"}, {1ull << 10, " KiB"}}};
  for (const auto& [unit, name] : kUnits) {
    if (v >= unit && v % unit == 0) return std::to_string(v / unit) + name;
  }
  return std::to_string(v) + " bytes";
}

[[noreturn]] void fail(const std::string& source, const std::string& what) {
  throw GoldenFileError(source + ": " + what);
}

const char* kind_of_mode(mode_t mode) {
  if (S_ISREG(mode) || POSENC_MUTANT("golden_special_file_accepted")) return "";
  return file_type_name(mode);
}

}  // namespace

InputLimits input_limits() {
  InputLimits l;
  for (const LimitVariable& v : kLimitVariables) {
    const char* env = std::getenv(v.name);
    if (env == nullptr || *env == '\0') continue;
    const std::uint64_t n = parse_count(env);
    if (n == 0) {
      throw_invalid("input_limits",
                    std::string(v.name) + " must be a positive count (bytes: 123, 64M, 16G)",
                    std::string("'") + env + "'");
    }
    l.*v.field = n;
  }
  return l;
}

JobLimits job_limits() {
  JobLimits l;
  for (auto [name, field] : {std::pair{"POSENC_MAX_OUTPUT_BYTES", &JobLimits::output_bytes},
                             std::pair{"POSENC_MAX_JOB_SECONDS", &JobLimits::seconds}}) {
    const char* env = std::getenv(name);
    if (env == nullptr || *env == '\0') continue;
    const std::uint64_t n = parse_count(env);
    if (n == 0) {
      throw_invalid("job_limits", std::string(name) + " must be a positive count (123, 64M, 16G)",
                    std::string("'") + env + "'");
    }
    l.*field = n;
  }
  return l;
}

void check_job_size(const std::string& what, std::uint64_t bytes, double seconds, const std::string& advice) {
  const JobLimits l = job_limits();
  char est[160];
  std::snprintf(est, sizeof est, "about %.2f GB and %.0f s of one core", static_cast<double>(bytes) / 1e9, seconds);
  if (bytes > l.output_bytes) {
    fail(what, std::string("the run would write ") + est + ", over the limit of " + human_bytes(l.output_bytes) +
                   " (POSENC_MAX_OUTPUT_BYTES raises it); nothing written. " + advice);
  }
  if (seconds > static_cast<double>(l.seconds)) {
    fail(what, std::string("the run would take ") + est + ", over the limit of " + std::to_string(l.seconds) +
                   " s (POSENC_MAX_JOB_SECONDS raises it); nothing written. " + advice);
  }
}

std::string input_limits_help() {
  const InputLimits defaults;
  std::string out = "Input limits (a larger input is refused, exit 2, before memory is allocated "
                    "for it; set the variable to change one: bytes with K, M, G or T suffix):\n";
  InputLimits now;
  try {
    now = input_limits();
  } catch (const InvalidArgument&) {
    now = defaults;
  }
  for (const LimitVariable& v : kLimitVariables) {
    const bool depth = v.field == &InputLimits::json_depth;
    const auto show = [&](std::uint64_t x) { return depth ? std::to_string(x) : human_bytes(x); };
    out += "  " + std::string(v.name) + std::string(26 - std::strlen(v.name), ' ') +
           show(defaults.*v.field) + "  " + v.what;
    if (now.*v.field != defaults.*v.field) out += " (now " + show(now.*v.field) + ")";
    out += "\n";
  }
  const JobLimits jd;
  JobLimits jn;
  try {
    jn = job_limits();
  } catch (const InvalidArgument&) {
    jn = jd;
  }
  out += "Job limits (generate estimates its output and time first and refuses a larger run, exit 2):\n";
  out += "  POSENC_MAX_OUTPUT_BYTES   " + human_bytes(jd.output_bytes) + "  what one run writes";
  if (jn.output_bytes != jd.output_bytes) out += " (now " + human_bytes(jn.output_bytes) + ")";
  out += "\n  POSENC_MAX_JOB_SECONDS    " + std::to_string(jd.seconds) + "  its estimated seconds of one core";
  if (jn.seconds != jd.seconds) out += " (now " + std::to_string(jn.seconds) + ")";
  return out + "\n";
}

void check_limit(const std::string& source, const std::string& what, std::uint64_t size,
                 std::uint64_t limit, const char* variable) {
  if (size <= limit || POSENC_MUTANT("golden_input_limit_unchecked")) return;
  fail(source, what + " of " + std::to_string(size) + " bytes exceeds the limit of " +
                   std::to_string(limit) + " bytes (" + human_bytes(limit) + "; " + variable +
                   " raises it)");
}

const char* file_type_name(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

std::string special_file_kind(const std::filesystem::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return "";
  return kind_of_mode(st.st_mode);
}

void require_regular_file(const std::filesystem::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    fail(path.string(), std::string("cannot open: ") + std::strerror(errno));
  }
  const std::string kind = kind_of_mode(st.st_mode);
  if (!kind.empty()) fail(path.string(), "is " + kind + ", not a regular file");
}

InputFile::InputFile(const std::filesystem::path& path) : path_(path.string()) {
  require_regular_file(path);
  // O_NONBLOCK: should the path have become a FIFO since the check, open does not wait for a
  // writer; fstat below then refuses it.
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd_ < 0) fail(path_, std::string("cannot open: ") + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd_, &st) != 0) {
    const std::string err = std::strerror(errno);
    ::close(fd_);
    fail(path_, "cannot stat: " + err);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd_);
    fail(path_, std::string("is ") + kind_of_mode(st.st_mode) + ", not a regular file");
  }
  size_ = static_cast<std::uint64_t>(st.st_size);
}

InputFile::InputFile(int dirfd, const std::string& name, const std::string& display)
    : path_(display) {
  fd_ = ::openat(dirfd, name.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY | O_NOFOLLOW);
  if (fd_ < 0) {
    fail(path_, errno == ELOOP ? std::string("is a symbolic link; refused")
                               : std::string("cannot open: ") + std::strerror(errno));
  }
  struct stat st {};
  if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
    const std::string what = S_ISREG(st.st_mode) ? std::string("cannot stat: ") + std::strerror(errno)
                                                 : std::string("is ") + kind_of_mode(st.st_mode) + ", not a regular file";
    ::close(fd_);
    fd_ = -1;
    fail(path_, what);
  }
  size_ = static_cast<std::uint64_t>(st.st_size);
}

InputFile::~InputFile() {
  if (fd_ >= 0) ::close(fd_);
}

void InputFile::read_at(std::uint64_t offset, std::span<std::uint8_t> out) const {
  std::size_t done = 0;
  while (done < out.size()) {
    const std::size_t chunk = std::min<std::size_t>(out.size() - done, 1u << 30);
    const ssize_t got =
        ::pread(fd_, out.data() + done, chunk, static_cast<off_t>(offset + done));
    if (got < 0) {
      if (errno == EINTR) continue;
      fail(path_, std::string("read error: ") + std::strerror(errno));
    }
    if (got == 0) {
      fail(path_, "truncated while reading: the file ended at byte " +
                      std::to_string(offset + done) + ", " + std::to_string(offset + out.size()) +
                      " expected");
    }
    done += static_cast<std::size_t>(got);
  }
}

void check_json_depth(std::string_view text, const std::string& source, std::uint64_t limit) {
  std::uint64_t depth = 0;
  bool in_string = false, escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > limit && !POSENC_MUTANT("golden_json_depth_unchecked")) {
        fail(source, "JSON nests deeper than the limit of " + std::to_string(limit) +
                         " arrays and objects (POSENC_MAX_JSON_DEPTH raises it)");
      }
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
}

std::string read_json_text(const std::filesystem::path& path) {
  const InputLimits limits = input_limits();
  const InputFile f(path);
  check_limit(path.string(), "the JSON file", f.size(), limits.json_bytes,
              "POSENC_MAX_JSON_BYTES");
  std::string text(f.size(), '\0');
  f.read_at(0, std::span(reinterpret_cast<std::uint8_t*>(text.data()), text.size()));
  return text;
}

namespace {

nlohmann::json parse_json_text(const std::string& text, const std::string& source) {
  check_json_depth(text, source, input_limits().json_depth);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {  // parse_error, or out_of_range: 1e999
    fail(source, std::string("invalid JSON: ") + e.what());
  }
}

}  // namespace

nlohmann::json read_json_file(const std::filesystem::path& path) {
  return parse_json_text(read_json_text(path), path.string());
}

nlohmann::json read_json_file(const InputFile& f) {
  check_limit(f.path(), "the JSON file", f.size(), input_limits().json_bytes, "POSENC_MAX_JSON_BYTES");
  std::string text(f.size(), '\0');
  f.read_at(0, std::span(reinterpret_cast<std::uint8_t*>(text.data()), text.size()));
  return parse_json_text(text, f.path());
}

std::string sha256_file(const std::filesystem::path& path) { return sha256_file(InputFile(path)); }

std::string sha256_file(const InputFile& f) {
  Sha256 h;
  std::vector<std::uint8_t> buffer(std::min<std::uint64_t>(f.size(), 4u << 20));
  for (std::uint64_t at = 0; at < f.size(); at += buffer.size()) {
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(buffer.size(),
                                                                           f.size() - at));
    f.read_at(at, std::span(buffer.data(), n));
    h.update(std::span<const std::uint8_t>(buffer.data(), n));
  }
  return h.hex();
}

}  // namespace posenc::golden
