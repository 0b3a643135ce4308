// Tests of the input-safety rules of golden/format (limits.hpp, dir_lock.hpp): every limit is
// enforced before the reader allocates, with a message naming the file, the limit and its
// variable; a FIFO, a device or a directory given as a file is named as such and never blocks;
// the streaming readers agree with the in-memory decoders; the incremental SHA-256 equals the
// one-shot one; the output folder lock refuses an incompatible second writer; the output rule
// (output_path.hpp) never writes over a special file, an input of the command or, without
// --force, a file that is not posenc's own kind of output. The mutants
// golden_input_limit_unchecked, golden_json_depth_unchecked, golden_special_file_accepted and
// golden_output_lock_ignored are killed here.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "golden/cases/catalog.hpp"
#include "golden/format/dir_lock.hpp"
#include "golden/format/format.hpp"
#include "golden/format/limits.hpp"
#include "golden/format/manifest.hpp"
#include "golden/format/output_path.hpp"
#include "golden/verify/html_report.hpp"
#include "reference/common/errors.hpp"

namespace posenc::golden {
namespace {

namespace fs = std::filesystem;

// Sets an environment variable for the scope of a test, restoring its previous value after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// The GoldenFileError message of f(), or a test failure when it does not throw one.
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const GoldenFileError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no GoldenFileError";
  return "";
}

bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

std::vector<std::uint8_t> bytes_of(std::string_view s) {
  return std::vector<std::uint8_t>(s.begin(), s.end());
}

// A safetensors file with a hand-written header followed by `data_size` bytes.
std::vector<std::uint8_t> raw_safetensors(std::string_view header, std::size_t data_size) {
  std::vector<std::uint8_t> out;
  for (int k = 0; k < 8; ++k) out.push_back(static_cast<std::uint8_t>(header.size() >> (8 * k)));
  out.insert(out.end(), header.begin(), header.end());
  out.resize(out.size() + data_size, 0);
  return out;
}

// Writes a file without write_file_atomic's fsync (many small files in a loop).
void write_plain(const fs::path& p, std::span<const std::uint8_t> b) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

std::string nested(int depth) { return std::string(depth, '[') + std::string(depth, ']'); }

class InputFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("posenc_input_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

// ---- limits ---------------------------------------------------------------------------------

TEST(InputLimits, DefaultsAndEnvironmentOverrides) {
  const InputLimits d = input_limits();
  EXPECT_EQ(d.header_bytes, 100ull << 20);
  EXPECT_EQ(d.tensor_bytes, 8ull << 30);
  EXPECT_EQ(d.file_bytes, 16ull << 30);
  EXPECT_EQ(d.json_bytes, 64ull << 20);
  EXPECT_EQ(d.json_depth, 64u);
  {
    const ScopedEnv a("POSENC_MAX_TENSOR_BYTES", "64M");
    const ScopedEnv b("POSENC_MAX_JSON_DEPTH", "9");
    const ScopedEnv c("POSENC_MAX_FILE_BYTES", "2g");
    EXPECT_EQ(input_limits().tensor_bytes, 64ull << 20);
    EXPECT_EQ(input_limits().json_depth, 9u);
    EXPECT_EQ(input_limits().file_bytes, 2ull << 30);
    EXPECT_TRUE(has(input_limits_help(), "(now 64 MiB)")) << input_limits_help();
  }
  for (const char* bad : {"0", "x", "12Q", "-5", "1.5G", "99999999999999999999", "16777216T"}) {
    const ScopedEnv e("POSENC_MAX_HEADER_BYTES", bad);
    try {
      input_limits();
      ADD_FAILURE() << bad << " accepted";
    } catch (const InvalidArgument& ex) {
      EXPECT_TRUE(has(ex.what(), "POSENC_MAX_HEADER_BYTES must be a positive count")) << ex.what();
      EXPECT_TRUE(has(ex.what(), bad)) << ex.what();
    }
  }
}

TEST(InputLimits, TensorOverTheLimitIsRefusedBeforeItsDataIsRead) {
  // 4 MiB claimed, no data at all: the limit is named, not the truncation.
  const auto b = raw_safetensors(
      R"({"q_rot":{"dtype":"F32","shape":[1024,1024],"data_offsets":[0,4194304]}})", 0);
  const ScopedEnv e("POSENC_MAX_TENSOR_BYTES", "1M");
  const std::string msg = error_of([&] { safetensors_decode(b, "big.safetensors"); });
  EXPECT_TRUE(has(msg, "big.safetensors: tensor \"q_rot\" (F32 [1024, 1024]) of 4194304 bytes "
                       "exceeds the limit of 1048576 bytes (1 MiB; POSENC_MAX_TENSOR_BYTES"))
      << msg;
  // Element counts and byte sizes that overflow 64 bits are refused as such.
  for (const char* shape : {"[4294967296,4294967296]", "[4611686018427387904]"}) {
    const std::string header = std::string(R"({"a":{"dtype":"F32","shape":)") + shape +
                               R"(,"data_offsets":[0,4]}})";
    const std::string m = error_of([&] { safetensors_decode(raw_safetensors(header, 4), "o"); });
    EXPECT_TRUE(has(m, "overflows")) << shape << " -> " << m;
  }
}

TEST(InputLimits, HeaderOverTheLimitIsRefused) {
  const auto b = raw_safetensors(R"({"__metadata__":{"k":"0123456789"}})", 0);
  EXPECT_NO_THROW(safetensors_decode(b, "h"));
  const ScopedEnv e("POSENC_MAX_HEADER_BYTES", "16");
  const std::string msg = error_of([&] { safetensors_decode(b, "h.safetensors"); });
  EXPECT_TRUE(has(msg, "h.safetensors: header length of 35 bytes exceeds the limit of 16 bytes"))
      << msg;
}

TEST(InputLimits, NpyArrayOverTheLimitIsRefusedBeforeItsDataIsRead) {
  Tensor t = tensor_from_f32("x", {4}, std::vector<float>{1, 2, 3, 4});
  std::vector<std::uint8_t> b = npy_encode(t);
  b.erase(b.end() - 16, b.end());  // the header still says (4,): 16 bytes it does not have
  const ScopedEnv e("POSENC_MAX_TENSOR_BYTES", "8");
  const std::string msg = error_of([&] { npy_decode(b, "x", "x.npy"); });
  EXPECT_TRUE(has(msg, "x.npy: the array (F32 [4]) of 16 bytes exceeds the limit of 8 bytes"))
      << msg;
}

TEST(InputLimits, JsonNestingIsLimitedBeforeParsing) {
  const std::string source = "deep.json";
  EXPECT_NO_THROW(check_json_depth(nested(64), source, 64));
  const std::string msg = error_of([&] { check_json_depth(nested(65), source, 64); });
  EXPECT_TRUE(has(msg, "deep.json: JSON nests deeper than the limit of 64")) << msg;
  // Brackets inside strings (escaped quotes included) do not count.
  EXPECT_NO_THROW(check_json_depth(R"(["[[[[\"[[[[", {"k": "{{{{"}])", source, 2));
  // A safetensors header: the same limit.
  const auto b = raw_safetensors(R"({"__metadata__":)" + nested(100) + "}", 0);
  EXPECT_TRUE(has(error_of([&] { safetensors_decode(b, "d.safetensors"); }),
                  "d.safetensors: JSON nests deeper than the limit of 64"));
}

// ---- files: limits, special files, streaming readers ----------------------------------------

TEST_F(InputFiles, JsonFilesOverTheLimitsAreRefused) {
  const fs::path deep = dir_ / "m.json";
  write_text_atomic(deep, "{\"schema\": " + nested(200) + "}");
  EXPECT_TRUE(has(error_of([&] { case_spec_read(deep); }),
                  deep.string() + ": JSON nests deeper than the limit of 64"));
  write_text_atomic(dir_ / "catalog.json", "{\"cases\": " + nested(70) + "}");
  EXPECT_TRUE(has(error_of([&] { catalog_read(dir_); }), "JSON nests deeper"));
  const fs::path big = dir_ / "big.json";
  write_text_atomic(big, "{\"k\": \"" + std::string(2000, 'x') + "\"}");
  EXPECT_NO_THROW(read_json_file(big));
  const ScopedEnv e("POSENC_MAX_JSON_BYTES", "1K");
  const std::string msg = error_of([&] { read_json_file(big); });
  EXPECT_TRUE(has(msg, big.string() + ": the JSON file of 2009 bytes exceeds the limit of 1024 "
                       "bytes (1 KiB; POSENC_MAX_JSON_BYTES raises it)"))
      << msg;
  write_text_atomic(dir_ / "bad.json", "{\"a\": ");
  EXPECT_TRUE(has(error_of([&] { read_json_file(dir_ / "bad.json"); }), "bad.json: invalid JSON"));
}

TEST_F(InputFiles, FileOverTheLimitIsRefusedByEveryReader) {
  const Tensor t = tensor_from_f32("x", {64}, std::vector<float>(64, 1.0f));
  write_file_atomic(dir_ / "x.safetensors", safetensors_encode({t}));
  write_file_atomic(dir_ / "x.npy", npy_encode(t));
  const ScopedEnv e("POSENC_MAX_FILE_BYTES", "128");
  for (const char* name : {"x.safetensors", "x.npy"}) {
    const fs::path p = dir_ / name;
    const auto expect_limit = [&](const std::string& msg) {
      EXPECT_TRUE(has(msg, p.string() + ": ") && has(msg, "exceeds the limit of 128 bytes") &&
                  has(msg, "POSENC_MAX_FILE_BYTES"))
          << msg;
    };
    expect_limit(error_of([&] { read_file(p); }));
    if (p.extension() == ".npy") {
      expect_limit(error_of([&] { npy_read(p, "x"); }));
    } else {
      expect_limit(error_of([&] { safetensors_read(p); }));
    }
  }
}

TEST_F(InputFiles, FifoDeviceAndDirectoryAreNamedNeverRead) {
  const fs::path fifo = dir_ / "out.safetensors";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::vector<std::pair<std::string, std::function<void(const fs::path&)>>> readers = {
      {"read_file", [](const fs::path& p) { read_file(p); }},
      {"safetensors_read", [](const fs::path& p) { safetensors_read(p); }},
      {"npy_read", [](const fs::path& p) { npy_read(p, "x"); }},
      {"read_json_file", [](const fs::path& p) { read_json_file(p); }},
      {"sha256_file", [](const fs::path& p) { sha256_file(p); }},
      {"case_spec_read", [](const fs::path& p) { case_spec_read(p); }},
  };
  const std::vector<std::pair<fs::path, std::string>> specials = {
      {fifo, "is a FIFO, not a regular file"},
      {"/dev/null", "is a character device, not a regular file"},
      {"/dev/zero", "is a character device, not a regular file"},
      {dir_, "is a directory, not a regular file"},
      {dir_ / "missing.json", "cannot open: No such file or directory"},
  };
  for (const auto& [path, what] : specials) {
    for (const auto& [name, read] : readers) {
      const std::string msg = error_of([&] { read(path); });
      EXPECT_EQ(msg, path.string() + ": " + what) << name << " on " << path;
    }
  }
  EXPECT_EQ(special_file_kind(fifo), "a FIFO");
  EXPECT_EQ(special_file_kind(dir_ / "missing"), "");
  // A catalog folder whose catalog.json is a FIFO.
  ASSERT_EQ(::mkfifo((dir_ / "catalog.json").c_str(), 0600), 0);
  EXPECT_TRUE(has(error_of([&] { catalog_read(dir_); }), "catalog.json: is a FIFO"));
}

TEST_F(InputFiles, StreamingReadersAgreeWithTheDecoders) {
  std::vector<Tensor> ts;
  ts.push_back(tensor_from_f32("b", {3, 5}, std::vector<float>(15, 0.5f)));
  ts.push_back(tensor_from_i64("a", {2}, std::vector<std::int64_t>{7, -7}));
  ts.push_back(tensor_from_f32("empty", {0, 4}, std::vector<float>{}));
  const std::vector<std::uint8_t> full = safetensors_encode(ts, {{"posenc_case", "x"}});
  const fs::path p = dir_ / "t.safetensors";
  write_file_atomic(p, full);
  std::map<std::string, std::string> meta;
  const std::vector<Tensor> read = safetensors_read(p, &meta);
  EXPECT_EQ(meta.at("posenc_case"), "x");
  EXPECT_EQ(safetensors_encode(read, meta), full);
  // Every truncation: the file reader and the decoder give the same message.
  for (std::size_t len = 0; len < full.size(); len += 3) {
    const std::vector<std::uint8_t> cut(full.begin(), full.begin() + static_cast<long>(len));
    write_plain(p, cut);
    const std::string from_file = error_of([&] { safetensors_read(p); });
    const std::string from_bytes = error_of([&] { safetensors_decode(cut, p.string()); });
    EXPECT_EQ(from_file, from_bytes) << "length " << len;
  }
  const Tensor t = tensor_from_f32("x", {2, 2}, std::vector<float>{1, 2, 3, 4});
  const std::vector<std::uint8_t> npy = npy_encode(t);
  const fs::path q = dir_ / "x.npy";
  for (std::size_t len = 0; len <= npy.size(); ++len) {
    const std::vector<std::uint8_t> cut(npy.begin(), npy.begin() + static_cast<long>(len));
    write_plain(q, cut);
    if (len == npy.size()) {
      EXPECT_EQ(npy_encode(npy_read(q, "x")), npy);
      continue;
    }
    EXPECT_EQ(error_of([&] { npy_read(q, "x"); }), error_of([&] { npy_decode(cut, "x", q.string()); }))
        << "length " << len;
  }
}

TEST_F(InputFiles, IncrementalSha256EqualsOneShot) {
  std::mt19937_64 rng(13);
  for (std::size_t n : {0, 1, 55, 56, 63, 64, 65, 119, 120, 128, 1000, 70000}) {
    std::vector<std::uint8_t> b(n);
    for (auto& x : b) x = static_cast<std::uint8_t>(rng());
    Sha256 h;
    for (std::size_t at = 0; at < n;) {
      const std::size_t piece = std::min<std::size_t>(n - at, rng() % 150);
      h.update(std::span(b.data() + at, piece));
      at += piece;
    }
    EXPECT_EQ(h.hex(), sha256_hex(b)) << n;
    write_file_atomic(dir_ / "f", b);
    EXPECT_EQ(sha256_file(dir_ / "f"), sha256_hex(b)) << n;
  }
  EXPECT_EQ(sha256_file(dir_ / "f").size(), 64u);
  EXPECT_EQ(sha256_hex(bytes_of("abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

// ---- the output rule (golden/format/output_path.hpp) ----------------------------------------

std::vector<std::uint8_t> text_bytes(const std::string& s) { return {s.begin(), s.end()}; }

// An engine output as `posenc engine` writes it (the mark: __metadata__ "posenc_output").
std::vector<std::uint8_t> engine_output_bytes() {
  Tensor t;
  t.name = "q_rot";
  t.dtype = DType::kF32;
  t.shape = {2};
  t.data.assign(8, 7);
  return safetensors_encode({t}, {{kEngineOutputKey, "case"}});
}

// The folder's entries other than `keep`: a refused write leaves no temp file behind.
std::vector<std::string> others(const fs::path& dir, const std::set<std::string>& keep) {
  std::vector<std::string> v;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (!keep.count(e.path().filename().string())) v.push_back(e.path().filename().string());
  }
  return v;
}

TEST_F(InputFiles, OutputRuleRefusesFifoDeviceAndDirectoryAndLeavesThemIntact) {
  const OutputRule forced(true);  // --force does not make posenc write anything but a file
  const fs::path fifo = dir_ / "report.html";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  fs::create_directories(dir_ / "folder.html");
  for (const auto& [p, kind] : {std::pair{fifo, "a FIFO"}, {dir_ / "folder.html", "a directory"}}) {
    const std::string msg = error_of([&] { forced.write_text(p, OutputKind::kReport, "x"); });
    EXPECT_TRUE(has(msg, p.string() + ": is " + kind + ", not a regular file; posenc writes "
                                                       "regular files only")) << msg;
    // The floor under every writer: write_file_atomic alone refuses them too.
    EXPECT_TRUE(has(error_of([&] { write_text_atomic(p, "x"); }), "is " + std::string(kind)));
  }
  struct stat st {};
  ASSERT_EQ(::lstat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  EXPECT_TRUE(fs::is_empty(dir_ / "folder.html"));
  // A symbolic link to the FIFO is refused as what it names.
  fs::create_symlink(fifo, dir_ / "link.html");
  EXPECT_TRUE(has(error_of([&] { forced.write_text(dir_ / "link.html", OutputKind::kReport, "x"); }),
                  "is a symbolic link to a FIFO"));
  // A private character device with /dev/full's numbers (1, 7): CI runs as root.
  const fs::path dev = dir_ / "full";
  if (::mknod(dev.c_str(), S_IFCHR | 0600, ::makedev(1, 7)) != 0) {
    GTEST_SKIP() << "mknod " << dev << " not permitted here (" << std::strerror(errno)
                 << "): the character-device half of this test needs root";
  }
  const std::string msg = error_of([&] { forced.write(dev, OutputKind::kEngineOutput, engine_output_bytes()); });
  EXPECT_TRUE(has(msg, dev.string() + ": is a character device, not a regular file")) << msg;
  EXPECT_TRUE(has(error_of([&] { write_file_atomic(dev, engine_output_bytes()); }), "character device"));
  ASSERT_EQ(::lstat(dev.c_str(), &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  EXPECT_EQ(st.st_rdev, ::makedev(1, 7));
  EXPECT_EQ(others(dir_, {"report.html", "folder.html", "link.html", "full"}), std::vector<std::string>{});
}

TEST_F(InputFiles, OutputRuleNeverWritesOverAFileTheCommandReadsNotEvenWithForce) {
  // The engine output being verified, a posenc engine output: its own kind, so only the
  // identity check (st_dev, st_ino) stands between --report and it.
  const fs::path actual = dir_ / "out.safetensors";
  const std::vector<std::uint8_t> before = engine_output_bytes();
  write_file_atomic(actual, before);
  fs::create_symlink(actual, dir_ / "link.safetensors");
  fs::create_hard_link(actual, dir_ / "hard.safetensors");
  OutputRule forced(true);
  forced.add_read(actual);
  forced.add_read(dir_ / "missing.json");  // not there: ignored
  for (const fs::path& p : {actual, dir_ / "link.safetensors", dir_ / "hard.safetensors",
                            dir_ / "." / "out.safetensors"}) {
    for (const OutputKind kind : {OutputKind::kReport, OutputKind::kEngineOutput}) {
      const std::string msg = error_of([&] { forced.write_text(p, kind, "<html>report</html>"); });
      EXPECT_TRUE(has(msg, p.string() + ": is the file " + actual.string() +
                               " that this command reads (same device and inode); refused, "
                               "--force or not")) << msg;
    }
  }
  EXPECT_EQ(read_file(actual), before);
  EXPECT_TRUE(fs::is_symlink(dir_ / "link.safetensors"));
  // The files below a folder (an --actual directory and its case folders) count too.
  OutputRule below;
  below.add_reads_below(dir_, 2);
  EXPECT_TRUE(has(error_of([&] { below.check_file(dir_ / "hard.safetensors", OutputKind::kEngineOutput); }),
                  "that this command reads"));
  EXPECT_NO_THROW(OutputRule(true).check_file(actual, OutputKind::kEngineOutput));  // not read
}

TEST_F(InputFiles, OutputRuleReplacesPosencsOwnOutputsAndForeignFilesOnlyWithForce) {
  Tensor t;
  t.name = "x";
  t.dtype = DType::kF32;
  t.shape = {1};
  t.data.assign(4, 0);
  const HtmlReport page("posenc verify", "posenc verify m.json --actual a --report r.html", "strict");
  const std::string manifest = R"({"schema": ")" + std::string(kSchemaName) + R"(", "id": "x"})";
  struct Row {
    OutputKind kind;
    std::vector<std::uint8_t> own, foreign;
  };
  const std::vector<Row> rows = {
      {OutputKind::kReport, text_bytes(page.html()), text_bytes("<!DOCTYPE html>\n<p>my page</p>\n")},
      {OutputKind::kEngineOutput, engine_output_bytes(), safetensors_encode({t})},
      {OutputKind::kGoldenTensors, safetensors_encode({t}, {{"posenc_case", "x"}}),
       safetensors_encode({t}, {{kEngineOutputKey, "x"}})},
      {OutputKind::kNpyOutput, npy_encode(t), text_bytes("notes\n")},
      {OutputKind::kGoldenManifest, text_bytes(manifest), text_bytes(R"({"schema": "other"})")},
      {OutputKind::kCatalog, text_bytes(catalog_text({})), text_bytes(manifest)},
  };
  const OutputRule rule, forced(true);
  for (std::size_t k = 0; k < rows.size(); ++k) {
    const Row& r = rows[k];
    const fs::path p = dir_ / ("out" + std::to_string(k));
    write_file_atomic(p, r.foreign);
    EXPECT_FALSE(is_own_output(p, r.kind)) << k;
    const std::string msg = error_of([&] { rule.write(p, r.kind, r.own); });
    EXPECT_TRUE(has(msg, p.string() + ": exists and is not " + output_kind_text(r.kind) +
                             "; refused to replace it (--force replaces it)")) << msg;
    EXPECT_EQ(read_file(p), r.foreign) << k;
    forced.write(p, r.kind, r.own);  // --force
    EXPECT_EQ(read_file(p), r.own) << k;
    EXPECT_TRUE(is_own_output(p, r.kind)) << k;
    rule.write(p, r.kind, r.own);  // its own previous output: no --force needed
    write_file_atomic(p, {});
    EXPECT_NO_THROW(rule.write(p, r.kind, r.own)) << k;  // an empty file holds nothing to lose
  }
  EXPECT_EQ(others(dir_, {"out0", "out1", "out2", "out3", "out4", "out5"}), std::vector<std::string>{});
}

TEST_F(InputFiles, OutputRuleWritesASymlinksTargetAndNeverCreatesThroughOne) {
  const OutputRule rule;
  const HtmlReport page("posenc verify", "cmd", "strict");
  fs::create_directories(dir_ / "reports");
  rule.write_text(dir_ / "reports" / "run1.html", OutputKind::kReport, page.html());
  fs::create_symlink("reports/run1.html", dir_ / "latest.html");
  rule.write_text(dir_ / "latest.html", OutputKind::kReport, page.html() + "<!-- 2 -->");
  EXPECT_TRUE(fs::is_symlink(dir_ / "latest.html"));  // the link is kept, its target replaced
  EXPECT_EQ(read_file(dir_ / "reports" / "run1.html"), text_bytes(page.html() + "<!-- 2 -->"));
  EXPECT_EQ(others(dir_ / "reports", {"run1.html"}), std::vector<std::string>{});
  // A link to nothing: refused, nothing created where it points.
  fs::create_symlink("reports/run2.html", dir_ / "dangling.html");
  EXPECT_TRUE(has(error_of([&] { rule.write_text(dir_ / "dangling.html", OutputKind::kReport, "x"); }),
                  "is a symbolic link to a missing file (reports/run2.html)"));
  EXPECT_FALSE(fs::exists(dir_ / "reports" / "run2.html"));
  // A temp name taken (a planted link to a victim file): the temp is created elsewhere
  // (O_EXCL), the victim and the link are left as they were.
  write_file_atomic(dir_ / "victim", text_bytes("victim"));
  const fs::path out = dir_ / "out.bin";
  for (int n = 0; n < 4; ++n) {
    fs::create_symlink(dir_ / "victim", dir_ / (".posenc." + std::to_string(::getpid()) + "." +
                                                std::to_string(n) + ".tmp"));
  }
  write_file_atomic(out, text_bytes("new"));
  EXPECT_EQ(read_file(out), text_bytes("new"));
  EXPECT_EQ(read_file(dir_ / "victim"), text_bytes("victim"));
  // A folder output must be a folder.
  EXPECT_TRUE(has(error_of([&] { rule.check_dir(dir_ / "victim"); }),
                  "victim: is a regular file, not a directory"));
  EXPECT_NO_THROW(rule.check_dir(dir_ / "new_folder"));
  EXPECT_NO_THROW(rule.check_dir(dir_ / "reports"));
}

TEST_F(InputFiles, OutputRuleResolvesOncePathsSwappedAfterTheCheckChangeNothing) {
  // The report's name is a link to a posenc page when checked, then to the engine output.
  const HtmlReport page("posenc verify", "cmd", "strict");
  const fs::path actual = dir_ / "good.safetensors";
  const std::vector<std::uint8_t> good = engine_output_bytes();
  write_file_atomic(actual, good);
  write_file_atomic(dir_ / "page.html", text_bytes(page.html()));
  fs::create_symlink("page.html", dir_ / "r.html");
  {
    OutputRule rule;
    rule.add_read(actual);
    rule.check_file(dir_ / "r.html", OutputKind::kReport);
    fs::remove(dir_ / "r.html");
    fs::create_symlink("good.safetensors", dir_ / "r.html");
    rule.write_text(dir_ / "r.html", OutputKind::kReport, page.html() + "<!-- new -->");
  }
  EXPECT_EQ(read_file(actual), good);
  EXPECT_EQ(read_file(dir_ / "page.html"), text_bytes(page.html() + "<!-- new -->"));
  // A folder on its path is a decoy when checked, then the input's folder.
  fs::create_directories(dir_ / "in");
  fs::create_directories(dir_ / "decoy");
  write_file_atomic(dir_ / "in" / "good.safetensors", good);
  fs::create_symlink("decoy", dir_ / "dl");
  {
    OutputRule rule;
    rule.add_read(dir_ / "in" / "good.safetensors");
    rule.check_file(dir_ / "dl" / "good.safetensors", OutputKind::kReport);
    fs::remove(dir_ / "dl");
    fs::create_symlink("in", dir_ / "dl");
    rule.write_text(dir_ / "dl" / "good.safetensors", OutputKind::kReport, page.html());
  }
  EXPECT_EQ(read_file(dir_ / "in" / "good.safetensors"), good);
  EXPECT_EQ(read_file(dir_ / "decoy" / "good.safetensors"), text_bytes(page.html()));
  EXPECT_EQ(others(dir_ / "decoy", {"good.safetensors"}), std::vector<std::string>{});
  EXPECT_EQ(others(dir_ / "in", {"good.safetensors"}), std::vector<std::string>{});
  // Below a folder output no link is followed: a scheme folder pointing elsewhere is refused.
  fs::create_directories(dir_ / "victim");
  write_file_atomic(dir_ / "victim" / "a.json", text_bytes("{}"));
  fs::create_directories(dir_ / "out");
  fs::create_symlink("../victim", dir_ / "out" / "learned");
  OutputRule rule;
  rule.check_dir(dir_ / "out");
  const std::string msg = error_of([&] {
    rule.check_file(dir_ / "out" / "learned" / "x.json", OutputKind::kGoldenManifest);
  });
  EXPECT_TRUE(has(msg, (dir_ / "out" / "learned").string() + ": is a symbolic link (to ../victim)"))
      << msg;
  EXPECT_EQ(others(dir_ / "victim", {"a.json"}), std::vector<std::string>{});
  // The temporary name is short whatever the target's: a 250-byte name is written.
  const std::string longname(250, 'r');
  EXPECT_NO_THROW(OutputRule().write_text(dir_ / longname, OutputKind::kReport, page.html()));
}

// ---- the output folder lock -----------------------------------------------------------------

TEST_F(InputFiles, OutputLockRefusesAnIncompatibleSecondWriter) {
  using Mode = DirectoryLock::Mode;
  const fs::path out = dir_ / "out";
  {
    const DirectoryLock first(out, Mode::kExclusive);
    EXPECT_TRUE(fs::exists(out / DirectoryLock::kFileName));
    for (const Mode m : {Mode::kExclusive, Mode::kShared}) {
      const std::string msg = error_of([&] { DirectoryLock second(out, m); });
      EXPECT_TRUE(has(msg, out.string() + ": another posenc process is writing into this folder"))
          << msg;
    }
  }
  // Released (and removed) with its holder; shared holders coexist and keep out a sole one.
  EXPECT_FALSE(fs::exists(out / DirectoryLock::kFileName));
  {
    const DirectoryLock a(out, Mode::kShared);
    const DirectoryLock b(out, Mode::kShared);
    EXPECT_TRUE(has(error_of([&] { DirectoryLock c(out, Mode::kExclusive); }), "another posenc"));
  }
  EXPECT_NO_THROW({ const DirectoryLock again(out, Mode::kExclusive); });
}

}  // namespace
}  // namespace posenc::golden
