// The one rule for every file posenc writes (golden/format/output_path.hpp).
#include "golden/format/output_path.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>

#include "golden/format/format.hpp"
#include "golden/format/limits.hpp"
#include "golden/format/manifest.hpp"
#include "reference/common/mutant.hpp"
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
                              p.string() + " is " + std::string(file_type_name(st.st_mode)) +
                              ", not a directory");
    }
    if (p == p.parent_path()) break;
    p = p.parent_path();
  }
  fail(path.string(),
       "cannot create directory " + path.parent_path().string() + ": a parent is not a directory");
}

std::string json_schema(const nlohmann::json& j) {
  if (!j.is_object() || !j.contains("schema") || !j["schema"].is_string()) return "";
  return j["schema"].get<std::string>();
}

/// The path, absolute and lexically normal, without a trailing separator: the form in which
/// folder outputs and the files below them are compared.
fs::path abs_norm(const fs::path& p) {
  fs::path n = fs::absolute(p).lexically_normal();
  if (!n.has_filename() && n.has_parent_path() && n != n.root_path()) n = n.parent_path();
  return n;
}

/// The components of `p` below `root` when p is root or lies below it.
bool components_below(const fs::path& root, const fs::path& p, std::vector<std::string>* out) {
  auto r = root.begin(), q = p.begin();
  for (; r != root.end(); ++r, ++q) {
    if (q == p.end() || *r != *q) return false;
  }
  out->clear();
  for (; q != p.end(); ++q) {
    if (!q->empty()) out->push_back(q->string());
  }
  return true;
}

std::string link_text(int dirfd, const std::string& name) {
  char buf[4096];
  const ssize_t n = ::readlinkat(dirfd, name.c_str(), buf, sizeof buf - 1);
  return n < 0 ? std::string("?") : std::string(buf, static_cast<std::size_t>(n));
}

FolderPtr open_folder(const fs::path& p) {
  const int fd = ::open(p.empty() ? "." : p.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return nullptr;
  return std::make_shared<const Folder>(fd, p);
}

/// The deepest folder of p that exists, opened (links followed: the one resolution), and
/// the names of the folders below it that do not exist yet (*missing, outermost first).
FolderPtr open_existing_prefix(fs::path p, std::vector<std::string>* missing, const fs::path& for_path) {
  missing->clear();
  for (int depth = 0; depth < 4096; ++depth) {
    if (FolderPtr f = open_folder(p)) return f;
    const int err = errno;
    if (err == ENOTDIR) fail_parent_not_directory(for_path);
    if (err != ENOENT || p.empty() || p == p.root_path()) {
      fail(for_path.string(), "cannot open directory " + p.string() + ": " + std::strerror(err));
    }
    missing->insert(missing->begin(), p.filename().string());
    p = p.parent_path();
  }
  fail(for_path.string(), "the path nests too deep");
}

struct Identity {
  dev_t dev;
  ino_t ino;
  fs::path path;
};

const Identity* read_with(const std::vector<Identity>& reads, const struct stat& st) {
  for (const Identity& r : reads) {
    if (r.dev == st.st_dev && r.ino == st.st_ino) return &r;
  }
  return nullptr;
}

[[noreturn]] void fail_read(const std::string& where, const Identity& r) {
  fail(where, "is the file " + r.path.string() +
                  " that this command reads (same device and inode); refused, --force or not");
}

// ---- temporary files removed on a signal ----------------------------------------------------

struct PendingTemp {
  std::atomic<int> dirfd{-1};  // -1 free, -2 being filled
  bool folder = false;         // a scratch folder: its entries, then itself
  char name[128] = {};
};
PendingTemp g_pending[64];
std::atomic<unsigned> g_temp_counter{0};

int register_temp(int dirfd, const std::string& name, bool folder = false) {
  if (name.size() >= sizeof(PendingTemp::name)) return -1;
  for (int i = 0; i < 64; ++i) {
    int expected = -1;
    if (g_pending[i].dirfd.compare_exchange_strong(expected, -2)) {
      std::memcpy(g_pending[i].name, name.c_str(), name.size() + 1);
      g_pending[i].folder = folder;
      g_pending[i].dirfd.store(dirfd);
      return i;
    }
  }
  return -1;
}

void unregister_temp(int slot) {
  if (slot >= 0) g_pending[slot].dirfd.store(-1);
}

/// Empties and removes the folder `name` in dirfd with async-signal-safe calls only.
void remove_folder_in_handler(int dirfd, const char* name) {
  const int fd = ::openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd >= 0) {
    alignas(8) char buf[4096];
    for (int round = 0; round < 1024; ++round) {
      const long n = ::syscall(SYS_getdents64, fd, buf, sizeof buf);
      if (n <= 0) break;
      for (long off = 0; off < n;) {
        const char* entry = buf + off + 19;  // d_name follows ino (8), off (8), reclen (2), type (1)
        const unsigned short reclen = *reinterpret_cast<const unsigned short*>(buf + off + 16);
        if (!(entry[0] == '.' && (entry[1] == '\0' || (entry[1] == '.' && entry[2] == '\0')))) {
          ::unlinkat(fd, entry, 0);
        }
        off += reclen;
      }
      ::lseek(fd, 0, SEEK_SET);  // the entries removed, list again until none is left
    }
    ::close(fd);
  }
  ::unlinkat(dirfd, name, AT_REMOVEDIR);
}

extern "C" void remove_temps_and_reraise(int sig) {
  for (PendingTemp& p : g_pending) {
    const int fd = p.dirfd.load();
    if (fd < 0) continue;
    if (p.folder) {
      remove_folder_in_handler(fd, p.name);
    } else {
      ::unlinkat(fd, p.name, 0);
    }
  }
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

/// ".posenc.<pid>.<n>.tmp": the pid, or 0 when name is not of that form.
pid_t temp_owner(const std::string& name) {
  static constexpr std::string_view kPrefix = ".posenc.", kSuffix = ".tmp";
  if (name.size() <= kPrefix.size() + kSuffix.size() || !name.starts_with(kPrefix) ||
      !name.ends_with(kSuffix)) {
    return 0;
  }
  const std::string mid = name.substr(kPrefix.size(), name.size() - kPrefix.size() - kSuffix.size());
  const auto dot = mid.find('.');
  if (dot == std::string::npos || dot == 0 || dot + 1 == mid.size() || dot > 9) return 0;
  for (std::size_t k = 0; k < mid.size(); ++k) {
    if (k != dot && (mid[k] < '0' || mid[k] > '9')) return 0;
  }
  return static_cast<pid_t>(std::stol(mid.substr(0, dot)));
}

}  // namespace

// ---- what posenc writes ---------------------------------------------------------------------

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

bool is_own_output(const InputFile& f, OutputKind kind) {
  try {
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
        return json_schema(read_json_file(f)) == kSchemaName;
      case OutputKind::kCatalog:
        return json_schema(read_json_file(f)) == "posenc-catalog";
      case OutputKind::kShardRecord:
        return json_schema(read_json_file(f)) == "posenc-shard";
      case OutputKind::kPlanManifest:
        return json_schema(read_json_file(f)) == "posenc-plan";
    }
  } catch (const std::exception&) {
    return false;
  }
  return false;
}

bool is_own_output(const fs::path& path, OutputKind kind) {
  try {
    const InputFile f(path);
    return is_own_output(f, kind);
  } catch (const std::exception&) {
    return false;
  }
}

fs::path output_target(const fs::path& path) {
  const std::string where = path.string();
  struct stat lst {};
  if (::lstat(path.c_str(), &lst) != 0) {
    if (errno == ENOTDIR) fail_parent_not_directory(path);
    if (errno == ENOENT) return path;
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
      fail(where, "is a symbolic link to " + std::string(file_type_name(st.st_mode)) + " (" +
                      to.string() + "), not a regular file; posenc writes regular files only");
    }
    return fs::canonical(path);
  }
  if (!S_ISREG(lst.st_mode)) {
    fail(where, "is " + std::string(file_type_name(lst.st_mode)) +
                    ", not a regular file; posenc writes regular files only");
  }
  return path;
}

// ---- folders --------------------------------------------------------------------------------

Folder::~Folder() {
  if (fd_ >= 0) ::close(fd_);
}

std::vector<std::string> Folder::names() const {
  std::vector<std::string> out;
  const int fd = ::dup(fd_);
  if (fd < 0) fail(path_.string(), std::string("cannot list: ") + std::strerror(errno));
  DIR* d = ::fdopendir(fd);
  if (d == nullptr) {
    ::close(fd);
    fail(path_.string(), std::string("cannot list: ") + std::strerror(errno));
  }
  ::rewinddir(d);  // the duplicate shares the handle's offset
  while (const dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    if (n != "." && n != "..") out.push_back(n);
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

bool Folder::entry_stat(const std::string& name, struct ::stat* st) const {
  return ::fstatat(fd_, name.c_str(), st, AT_SYMLINK_NOFOLLOW) == 0;
}

FolderPtr folder_open_below(const FolderPtr& parent, const std::string& name) {
  const fs::path where = parent->path() / name;
  const int fd = ::openat(parent->fd(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd >= 0) return std::make_shared<const Folder>(fd, where);
  const int err = errno;
  struct stat st {};
  if (err == ENOENT && !parent->entry_stat(name, &st)) return nullptr;
  if (parent->entry_stat(name, &st)) {
    if (S_ISLNK(st.st_mode)) {
      fail(where.string(), "is a symbolic link (to " + link_text(parent->fd(), name) +
                               "); posenc never writes into or cleans a folder through a link "
                               "(it could lie outside the output folder); refused");
    }
    if (!S_ISDIR(st.st_mode)) {
      fail(where.string(), "is " + std::string(file_type_name(st.st_mode)) +
                               ", not a directory (posenc writes its files into a folder there); "
                               "refused");
    }
  }
  fail(where.string(), std::string("cannot open directory: ") + std::strerror(err));
}

int sweep_dead_temps(const Folder& folder) {
  int n = 0;
  for (const std::string& name : folder.names()) {
    const pid_t pid = temp_owner(name);
    if (pid <= 0 || pid == ::getpid()) continue;
    if (::kill(pid, 0) == 0 || errno != ESRCH) continue;  // its process still runs
    struct stat st {};
    if (folder.entry_stat(name, &st) && S_ISREG(st.st_mode) && ::unlinkat(folder.fd(), name.c_str(), 0) == 0) ++n;
  }
  return n;
}

void install_interrupt_cleanup() {
  static std::atomic<bool> done{false};
  if (done.exchange(true)) return;
  for (const int sig : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction sa {};
    sa.sa_handler = remove_temps_and_reraise;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESETHAND;
    ::sigaction(sig, &sa, nullptr);
  }
}

ScratchFolder::ScratchFolder(const std::string& prefix) {
  std::string tmpl = (fs::temp_directory_path() / (prefix + "-XXXXXX")).string();
  if (::mkdtemp(tmpl.data()) == nullptr) {
    fail(tmpl, std::string("cannot create a temporary folder: ") + std::strerror(errno));
  }
  path_ = tmpl;
  std::vector<std::string> missing;
  parent_ = open_existing_prefix(path_.parent_path(), &missing, path_);
  slot_ = register_temp(parent_->fd(), path_.filename().string(), true);
}

ScratchFolder::~ScratchFolder() {
  unregister_temp(slot_);
  std::error_code ec;
  fs::remove_all(path_, ec);
}

// ---- resolving an output once ---------------------------------------------------------------

struct AtomicFile::Target {
  FolderPtr base;                   // opened when the path was checked
  std::vector<std::string> create;  // folders to create below base (never through a link)
  std::string name;                 // the file's name in its folder
  std::string where;                // the path as given (messages)
  fs::path target;                  // the file replaced
  OutputKind kind = OutputKind::kReport;
  bool check_kind = false, force = true;
  bool existed = false;  // a regular file at check time, with this identity
  dev_t dev = 0;
  ino_t ino = 0;
  std::vector<Identity> reads;
};

struct OutputRule::State {
  std::vector<Identity> reads;
  struct Root {
    fs::path path;  // abs_norm
    FolderPtr base;
    std::vector<std::string> create;
  };
  std::vector<Root> roots;
  std::map<std::pair<std::string, int>, std::shared_ptr<const AtomicFile::Target>> resolved;
  /// Folders opened below the roots, each once (a run checks thousands of files in a few).
  std::map<std::string, FolderPtr> opened;
  FolderPtr below(const FolderPtr& parent, const std::string& name) {
    const std::string key = abs_norm(parent->path() / name).string();
    if (auto it = opened.find(key); it != opened.end()) return it->second;
    FolderPtr f = folder_open_below(parent, name);
    if (f) opened.emplace(key, f);
    return f;
  }
};

namespace {

using Target = AtomicFile::Target;
using State = OutputRule::State;

/// Follows a symbolic link given as a file output (not inside a folder output) to the regular
/// file it names: t's folder and name become that file's.
void follow_file_link(Target& t, const FolderPtr& folder) {
  struct stat st {};
  const std::string to = link_text(folder->fd(), t.name);
  if (::fstatat(folder->fd(), t.name.c_str(), &st, 0) != 0) {
    fail(t.where, "is a symbolic link to a missing file (" + to +
                      "); refused: posenc does not create files through a link");
  }
  if (!S_ISREG(st.st_mode)) {
    fail(t.where, "is a symbolic link to " + std::string(file_type_name(st.st_mode)) + " (" + to +
                      "), not a regular file; posenc writes regular files only");
  }
  std::error_code ec;
  const fs::path real = fs::canonical(folder->path() / t.name, ec);
  if (ec) fail(t.where, "cannot resolve the symbolic link (" + to + "): " + ec.message());
  std::vector<std::string> missing;
  t.base = open_existing_prefix(real.parent_path(), &missing, real);
  if (!missing.empty()) fail(t.where, "the file the link names (" + real.string() + ") vanished");
  t.name = real.filename().string();
  t.target = real;
}

/// The folder, the name and the identity of the file a write to `path` replaces, each looked
/// up once; rules 1-4.
std::shared_ptr<const Target> resolve_output(const fs::path& path, OutputKind kind, bool check_kind,
                                             bool force, State& state) {
  auto t = std::make_shared<Target>();
  t->where = path.string();
  t->kind = kind;
  t->check_kind = check_kind;
  t->force = force;
  t->reads = state.reads;
  t->target = path;
  const fs::path p = abs_norm(path);
  t->name = p.filename().string();
  if (t->name.empty() || t->name == "." || t->name == "..") {
    fail(t->where, "is a directory, not a regular file; posenc writes regular files only");
  }
  // The folder: below a folder output, walked from its handle without following links.
  const State::Root* root = nullptr;
  std::vector<std::string> rest;
  for (const State::Root& r : state.roots) {
    if (components_below(r.path, p.parent_path(), &rest)) {
      root = &r;
      break;
    }
  }
  FolderPtr folder;
  if (root != nullptr) {
    folder = root->base;
    t->create = root->create;
    for (const std::string& c : rest) {
      if (!t->create.empty()) {
        t->create.push_back(c);
      } else if (FolderPtr sub = state.below(folder, c)) {
        folder = sub;
      } else {
        t->create.push_back(c);
      }
    }
  } else {
    folder = open_existing_prefix(path.parent_path().lexically_normal(), &t->create, path);
  }
  t->base = folder;
  if (!t->create.empty()) return t;  // a new file in a folder to be created
  struct stat st {};
  if (!folder->entry_stat(t->name, &st)) {
    if (errno != ENOENT) fail(t->where, std::string("cannot stat: ") + std::strerror(errno));
    return t;  // a new file
  }
  if (S_ISLNK(st.st_mode)) {
    if (root != nullptr) {
      fail(t->where, "is a symbolic link (to " + link_text(folder->fd(), t->name) +
                         ") inside an output folder; posenc does not write through links there; "
                         "refused");
    }
    follow_file_link(*t, folder);
    if (!t->base->entry_stat(t->name, &st) || !S_ISREG(st.st_mode)) {
      fail(t->where, "the file the link names changed while being checked; refused");
    }
  }
  if (!S_ISREG(st.st_mode)) {
    fail(t->where, "is " + std::string(file_type_name(st.st_mode)) +
                       ", not a regular file; posenc writes regular files only");
  }
  t->existed = true;
  t->dev = st.st_dev;
  t->ino = st.st_ino;
  if (const Identity* r = read_with(state.reads, st)) fail_read(t->where, *r);
  if (check_kind && !force) {
    const InputFile f(t->base->fd(), t->name, t->where);
    if (!is_own_output(f, kind)) {
      fail(t->where, "exists and is not " + output_kind_text(kind) +
                         "; refused to replace it (--force replaces it)");
    }
  }
  return t;
}

}  // namespace

// ---- the rule -------------------------------------------------------------------------------

OutputRule::OutputRule(bool force) : state_(std::make_shared<State>()), force_(force) {}

void OutputRule::add_read(const fs::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return;
  state_->reads.push_back({st.st_dev, st.st_ino, path});
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
  const auto key = std::make_pair(path.string(), static_cast<int>(kind));
  if (state_->resolved.count(key)) return;
  state_->resolved[key] = resolve_output(path, kind, true, force_, *state_);
}

void OutputRule::check_dir(const fs::path& dir) const {
  const fs::path p = abs_norm(dir);
  for (const State::Root& r : state_->roots) {
    if (r.path == p) return;
  }
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) {
    if (errno == ENOTDIR) fail_parent_not_directory(dir);
  } else if (!S_ISDIR(st.st_mode)) {
    fail(dir.string(), "is " + std::string(file_type_name(st.st_mode)) +
                           ", not a directory (this output is a folder of files); refused");
  }
  State::Root r;
  r.path = p;
  r.base = open_existing_prefix(dir.lexically_normal(), &r.create, dir);
  state_->roots.push_back(std::move(r));
}

std::unique_ptr<AtomicFile> OutputRule::open(const fs::path& path, OutputKind kind) const {
  if (POSENC_MUTANT("golden_output_resolved_twice")) {  // the path looked up again, unchecked
    State none;
    return std::make_unique<AtomicFile>(resolve_output(path, kind, false, true, none));
  }
  check_file(path, kind);
  const auto key = std::make_pair(path.string(), static_cast<int>(kind));
  auto t = state_->resolved.at(key);
  state_->resolved.erase(key);  // a second write of the same path resolves it again
  return std::make_unique<AtomicFile>(std::move(t));
}

void OutputRule::write(const fs::path& path, OutputKind kind,
                       std::span<const std::uint8_t> bytes) const {
  const std::unique_ptr<AtomicFile> f = open(path, kind);
  f->write(bytes);
  f->commit();
}

void OutputRule::write_text(const fs::path& path, OutputKind kind, std::string_view text) const {
  write(path, kind,
        std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(text.data()),
                                      text.size()));
}

FolderPtr OutputRule::folder(const fs::path& dir) const {
  const fs::path p = abs_norm(dir);
  std::vector<std::string> rest;
  for (const State::Root& r : state_->roots) {
    if (!components_below(r.path, p, &rest)) continue;
    rest.insert(rest.begin(), r.create.begin(), r.create.end());  // created since, perhaps
    FolderPtr f = r.base;
    for (const std::string& c : rest) {
      f = folder_open_below(f, c);
      if (!f) return nullptr;
    }
    return f;
  }
  fail(dir.string(), "OutputRule::folder: not at or below a checked output folder");
}

// ---- the file -------------------------------------------------------------------------------

AtomicFile::AtomicFile(const fs::path& path) {
  State none;
  t_ = resolve_output(path, OutputKind::kReport, false, true, none);
  create();
}

AtomicFile::AtomicFile(std::shared_ptr<const Target> t) : t_(std::move(t)) { create(); }

void AtomicFile::create() {
  where_ = t_->where;
  target_ = t_->target;
  folder_ = t_->base;
  for (const std::string& c : t_->create) {
    if (::mkdirat(folder_->fd(), c.c_str(), 0777) != 0 && errno != EEXIST) {
      fail(where_, "cannot create directory " + (folder_->path() / c).string() + ": " + std::strerror(errno));
    }
    FolderPtr sub = folder_open_below(folder_, c);
    if (!sub) fail(where_, "the directory " + (folder_->path() / c).string() + " vanished while being created");
    folder_ = sub;
  }
  for (int attempt = 0; attempt < 100; ++attempt) {
    temp_ = ".posenc." + std::to_string(::getpid()) + "." + std::to_string(g_temp_counter++) + ".tmp";
    // O_EXCL: never through a symbolic link, never over an existing file of any kind.
    const int fd = ::openat(folder_->fd(), temp_.c_str(),
                            O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd >= 0) {
      slot_ = register_temp(folder_->fd(), temp_);
      f_ = ::fdopen(fd, "wb");
      if (f_ == nullptr) {
        ::close(fd);
        fail_and_remove(std::string("cannot open a temp file in ") + folder_->path().string() +
                        ": " + std::strerror(errno));
      }
      return;
    }
    if (errno != EEXIST) {
      fail(where_, "cannot create a temp file in " + folder_->path().string() + ": " + std::strerror(errno));
    }
  }
  fail(where_, "cannot create a temp file in " + folder_->path().string() + ": 100 names taken");
}

AtomicFile::~AtomicFile() {
  if (f_ != nullptr) {
    std::fclose(f_);
    ::unlinkat(folder_->fd(), temp_.c_str(), 0);
  }
  unregister_temp(slot_);
}

void AtomicFile::fail_and_remove(const std::string& what) {
  if (f_ != nullptr) std::fclose(f_);
  f_ = nullptr;
  ::unlinkat(folder_->fd(), temp_.c_str(), 0);
  unregister_temp(slot_);
  slot_ = -1;
  fail(where_, what);
}

void AtomicFile::write(std::span<const std::uint8_t> bytes) {
  if (f_ == nullptr) fail(where_, "write after commit");
  if (!bytes.empty() && std::fwrite(bytes.data(), 1, bytes.size(), f_) != bytes.size()) {
    fail_and_remove("write error on a temp file in " + folder_->path().string() + ": " + std::strerror(errno));
  }
}

void AtomicFile::commit() {
  if (f_ == nullptr) fail(where_, "commit twice");
  if (std::fflush(f_) != 0 || ::fsync(::fileno(f_)) != 0) {
    fail_and_remove("flush error on a temp file in " + folder_->path().string() + ": " + std::strerror(errno));
  }
  struct stat st {};
  if (::fstat(::fileno(f_), &st) == 0) {  // a new file cannot be an input; checked all the same
    if (const Identity* r = read_with(t_->reads, st)) fail_and_remove("the temp file is " + r->path.string());
  }
  const int rc = std::fclose(f_);
  f_ = nullptr;
  if (rc != 0) fail_and_remove("close error on a temp file: " + std::string(std::strerror(errno)));
  // The final name, through the handle, as it is now: a link or another kind swapped in since
  // the check is refused; rename replaces the name, never writes through it.
  const std::string& name = t_->name;
  if (folder_->entry_stat(name, &st)) {
    if (!S_ISREG(st.st_mode)) {
      fail_and_remove("became " + std::string(S_ISLNK(st.st_mode) ? "a symbolic link" : file_type_name(st.st_mode)) +
                      " while being written; refused");
    }
    if (const Identity* r = read_with(t_->reads, st)) {
      fail_and_remove("is the file " + r->path.string() +
                      " that this command reads (same device and inode); refused, --force or not");
    }
    const bool same = t_->existed && st.st_dev == t_->dev && st.st_ino == t_->ino;
    if (t_->check_kind && !t_->force && !same) {
      const InputFile now(folder_->fd(), name, where_);
      if (!is_own_output(now, t_->kind)) {
        fail_and_remove("was replaced while being written by a file that is not " +
                        output_kind_text(t_->kind) + "; refused to replace it");
      }
    }
  }
  if (::renameat(folder_->fd(), temp_.c_str(), folder_->fd(), name.c_str()) != 0) {
    fail_and_remove("cannot rename the temp file into place: " + std::string(std::strerror(errno)));
  }
  unregister_temp(slot_);
  slot_ = -1;
}

}  // namespace posenc::golden
