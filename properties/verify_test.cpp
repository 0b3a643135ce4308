// Tests of golden/verify and the integrity rules of golden files: manifest validation, the
// tensors_file rule, SHA-256 over every tensor (companions included), catalog hashes and
// duplicates, NaN, MISSING and --require-all reporting, negative-control wording, the
// per-position answers, declared alternative conventions, blind-spot notes and profiles that
// do not apply, the per-scheme manifest schema and the KV trace invariants (manifest_check.hpp),
// a catalog folder's hashes whichever way its manifest is named. Each rule has a mutant switch in
// golden/ that this file's tests kill.
// VerifyReports: what the reports print (non-finite JSON numbers as null + KEY_nonfinite, the
// worst element's query and key positions, integer errors as integers, stages not written).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "golden/cases/catalog.hpp"
#include "golden/cases/registry.hpp"
#include "golden/format/format.hpp"
#include "golden/format/manifest.hpp"
#include "golden/format/profiles.hpp"
#include "golden/verify/html_report.hpp"
#include "golden/verify/manifest_check.hpp"
#include "golden/verify/verify.hpp"
#include "reference/common/errors.hpp"

namespace posenc::golden {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

const char* kRopeCase = "rope_half_d96_r24_b1e4_neox_20b_f32";
const char* kDenseCase = "rope_half_d96_r24_b1e4_neox_20b_dense512_f32";
const char* kNegativeControl = "alibi_slopes_h12_naive_invalid_f32";
const char* kMaskedRows = "attention_window16_pad_h2_d32_t70_f32";

fs::path committed(const std::string& id) {
  for (const auto& e : catalog_read(default_data_dir())) {
    if (e.id == id) return default_data_dir() / e.manifest;
  }
  throw std::runtime_error("no committed case " + id);
}

LoadedCase load(const std::string& id) { return load_case(committed(id)); }

/// A scratch copy of one case (manifest + tensors) that a test may modify.
class CaseCopy {
 public:
  explicit CaseCopy(const std::string& id) {
    static int counter = 0;
    dir_ = fs::temp_directory_path() /
           ("posenc-verify-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    fs::create_directories(dir_);
    const fs::path m = committed(id);
    manifest_ = dir_ / m.filename();
    tensors_ = dir_ / (id + ".safetensors");
    fs::copy_file(m, manifest_);
    fs::copy_file(m.parent_path() / (id + ".safetensors"), tensors_);
  }
  ~CaseCopy() { fs::remove_all(dir_); }
  const fs::path& dir() const { return dir_; }
  const fs::path& manifest() const { return manifest_; }
  const fs::path& tensors() const { return tensors_; }

  void edit_manifest(const std::function<void(Json&)>& f) const {
    const auto bytes = read_file(manifest_);
    Json m = Json::parse(bytes.begin(), bytes.end());
    f(m);
    write_text_atomic(manifest_, manifest_text(m));
  }
  void edit_tensors(const std::function<void(std::vector<Tensor>&, std::map<std::string, std::string>&)>& f) const {
    std::map<std::string, std::string> meta;
    auto ts = safetensors_read(tensors_, &meta);
    f(ts, meta);
    write_file_atomic(tensors_, safetensors_encode(ts, meta));
  }

 private:
  fs::path dir_, manifest_, tensors_;
};

/// The GoldenFileError message of load_case, or "" when it loads.
std::string load_error(const fs::path& manifest) {
  try {
    load_case(manifest);
  } catch (const GoldenFileError& e) {
    return e.what();
  }
  return "";
}

/// The engine's expected outputs: the golden tensors themselves (a perfect engine).
TensorMap perfect_output(const LoadedCase& lc) {
  TensorMap out;
  for (const auto& t : lc.spec.expected) out.emplace(t.name, lc.golden.at(t.name));
  return out;
}

void set_f32(Tensor& t, std::int64_t i, float v) { std::memcpy(t.data.data() + 4 * i, &v, 4); }

// ---- the tensors_file rule, hashes, catalog ---------------------------------------------------

TEST(VerifyIntegrity, TensorsFileMustBeAPlainNameInTheManifestsFolder) {
  for (const std::string bad : {"../x.safetensors", "/etc/passwd", "sub/x.safetensors", "..", ""}) {
    CaseCopy c(kRopeCase);
    c.edit_manifest([&](Json& m) { m["tensors_file"] = bad; });
    const std::string e = load_error(c.manifest());
    EXPECT_NE(e.find("tensors_file"), std::string::npos) << bad << ": " << e;
    EXPECT_NE(e.find("plain file name"), std::string::npos) << bad << ": " << e;
  }
}

TEST(VerifyIntegrity, SymlinkLeavingTheFolderIsRefused) {
  CaseCopy c(kRopeCase);
  const fs::path outside = c.dir() / "elsewhere";
  fs::create_directories(outside);
  fs::rename(c.tensors(), outside / c.tensors().filename());
  fs::create_symlink(outside / c.tensors().filename(), c.tensors());
  EXPECT_NE(load_error(c.manifest()).find("symbolic link"), std::string::npos);
  // A link to a file in the same folder is fine.
  fs::remove(c.tensors());
  fs::rename(outside / c.tensors().filename(), c.dir() / "real.safetensors");
  fs::create_symlink(c.dir() / "real.safetensors", c.tensors());
  EXPECT_EQ(load_error(c.manifest()), "");
}

TEST(VerifyIntegrity, HashesCoverEveryCompanion) {
  for (const std::string name : {"q_rot.exact", "q_rot.cond", "q_rot.extra.fp32", "q_rot"}) {
    CaseCopy c(kRopeCase);
    c.edit_tensors([&](std::vector<Tensor>& ts, auto&) {
      for (auto& t : ts) {
        if (t.name == name) t.data[0] ^= 1;  // one bit: a tampered budget or expected value
      }
    });
    const std::string e = load_error(c.manifest());
    EXPECT_NE(e.find("SHA-256"), std::string::npos) << name << ": " << e;
    EXPECT_NE(e.find(name), std::string::npos) << e;
  }
}

TEST(VerifyIntegrity, UnlistedTensorIsRefused) {
  CaseCopy c(kRopeCase);
  c.edit_tensors([](std::vector<Tensor>& ts, auto&) {
    ts.push_back(tensor_from_f32("q_rot.extra.lenient", {1}, std::vector<float>{1e30f}));
  });
  EXPECT_NE(load_error(c.manifest()).find("not listed"), std::string::npos);
}

TEST(VerifyIntegrity, FileOfAnotherCaseIsRefused) {
  CaseCopy c(kRopeCase);
  c.edit_tensors([](auto&, std::map<std::string, std::string>& meta) { meta["posenc_case"] = "other"; });
  EXPECT_NE(load_error(c.manifest()).find("belongs to case"), std::string::npos);
}

TEST(VerifyIntegrity, CatalogHashesAreChecked) {
  const auto entries = catalog_read(default_data_dir());
  EXPECT_NO_THROW(check_catalog_entry(default_data_dir(), entries.front()));
  CatalogEntry e = entries.front();
  e.tensors_sha256[0] = e.tensors_sha256[0] == '0' ? '1' : '0';
  try {
    check_catalog_entry(default_data_dir(), e);
    ADD_FAILURE() << "a catalog hash mismatch was accepted";
  } catch (const GoldenFileError& x) {
    EXPECT_NE(std::string(x.what()).find("catalog.json"), std::string::npos);
  }
}

TEST(VerifyIntegrity, CatalogListingACaseTwiceOrLeavingItsFolderIsRefused) {
  const fs::path dir = fs::temp_directory_path() / ("posenc-catalog-test-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  auto entries = catalog_read(default_data_dir());
  std::vector<CatalogEntry> twice = {entries[0], entries[1], entries[0]};
  write_text_atomic(dir / "catalog.json", catalog_text(twice));
  try {
    catalog_read(dir);
    ADD_FAILURE() << "a case listed twice was accepted";
  } catch (const GoldenFileError& x) {
    EXPECT_NE(std::string(x.what()).find("listed twice"), std::string::npos);
  }
  std::vector<CatalogEntry> escaping = {entries[0]};
  escaping[0].manifest = "../../etc/passwd";
  write_text_atomic(dir / "catalog.json", catalog_text(escaping));
  EXPECT_THROW(catalog_read(dir), GoldenFileError);
  fs::remove_all(dir);
}

// ---- manifest validation ---------------------------------------------------------------------

TEST(ManifestValidation, MissingRequiredFieldIsNamed) {
  for (const std::string key : {"schema", "version", "generator", "id", "scheme", "variant",
                                "result", "level", "description", "tensors_file", "inputs",
                                "expected"}) {
    CaseCopy c(kRopeCase);
    c.edit_manifest([&](Json& m) { m.erase(key); });
    const std::string e = load_error(c.manifest());
    EXPECT_NE(e.find("\"" + key + "\""), std::string::npos) << key << ": " << e;
  }
}

TEST(ManifestValidation, ResultMustBeValidAcceptableOrInvalid) {
  CaseCopy c(kRopeCase);
  c.edit_manifest([](Json& m) { m["result"] = "maybe"; });
  EXPECT_NE(load_error(c.manifest()).find("valid, acceptable or invalid"), std::string::npos);
}

TEST(ManifestValidation, BudgetsMustBePositive) {
  {
    CaseCopy c(kRopeCase);
    c.edit_manifest([](Json& m) { m["expected"][3]["check"]["profiles"]["strict"]["bound"] = -1; });
    const std::string e = load_error(c.manifest());
    EXPECT_NE(e.find("profiles.strict.bound must be >= 0"), std::string::npos) << e;
  }
  {
    CaseCopy c(kRopeCase);
    c.edit_manifest([](Json& m) {
      m["expected"][3]["check"]["profiles"]["strict"] = {{"bound", 0}};
    });
    const std::string e = load_error(c.manifest());
    EXPECT_NE(e.find("a budget needs a positive bound"), std::string::npos) << e;
  }
}

TEST(ManifestValidation, EveryProfileHasABudgetOrAReason) {
  CaseCopy c(kRopeCase);
  c.edit_manifest([](Json& m) { m["expected"][1]["check"]["profiles"].erase("fp32-recurrence"); });
  EXPECT_NE(load_error(c.manifest()).find("no entry for profile \"fp32-recurrence\""), std::string::npos);
  CaseCopy d(kRopeCase);
  d.edit_manifest([](Json& m) { m["expected"][1]["check"]["profiles"]["loose"] = {{"bound", 1e9}}; });
  EXPECT_NE(load_error(d.manifest()).find("unknown profile \"loose\""), std::string::npos);
}

TEST(ManifestValidation, OldSchemaVersionAsksForRegeneration) {
  CaseCopy c(kRopeCase);
  c.edit_manifest([](Json& m) { m["version"] = 1; });
  EXPECT_NE(load_error(c.manifest()).find("regenerate"), std::string::npos);
}

// ---- per-scheme schema (golden/verify/manifest_check.hpp) ------------------------------------

const char* kKvShiftCase = "kv_cache_rope_context_shift_f32";
const char* kScaledCase = "rope_scaling_llama_2_7b_dynamic_x2_all_f32";

/// load_error, and the message must name the file and every given fragment (the key and what
/// was expected).
void expect_refused(const CaseCopy& c, const std::vector<std::string>& fragments) {
  const std::string e = load_error(c.manifest());
  ASSERT_FALSE(e.empty()) << "accepted; expected an error naming " << fragments.front();
  EXPECT_NE(e.find(c.manifest().string()), std::string::npos) << e;
  for (const auto& f : fragments) EXPECT_NE(e.find(f), std::string::npos) << f << " not in: " << e;
}

TEST(ManifestSchema, EveryCommittedManifestFitsItsScheme) {
  int n = 0;
  for (const auto& e : catalog_read(default_data_dir())) {
    const fs::path m = default_data_dir() / e.manifest;
    EXPECT_NO_THROW(check_manifest_schema(case_spec_read(m), m.string())) << e.id;
    ++n;
  }
  EXPECT_GT(n, 100);
}

// verify refuses a scheme it has no form for, so its list is the registry's, slug for slug.
TEST(ManifestSchema, VerifyKnowsEverySchemeOfTheRegistry) {
  std::vector<std::string> registry;
  for (const auto& s : schemes()) registry.push_back(s.slug);
  std::sort(registry.begin(), registry.end());
  EXPECT_EQ(manifest_schemes(), registry);
  CaseSpec c = case_spec_read(default_data_dir() / "rope" / (std::string(kRopeCase) + ".json"));
  c.scheme = "ropee";
  try {
    check_manifest_schema(c, "m.json");
    ADD_FAILURE() << "a manifest of scheme ropee was accepted";
  } catch (const GoldenFileError& e) {
    EXPECT_NE(std::string(e.what()).find("scheme must be one of: alibi, attention"),
              std::string::npos)
        << e.what();
  }
}

TEST(ManifestSchema, MissingParamsIsRefused) {
  for (const char* id : {kRopeCase, kKvShiftCase, kMaskedRows}) {
    CaseCopy c(id);
    c.edit_manifest([](Json& m) { m.erase("params"); });
    expect_refused(c, {": params: missing"});
  }
}

TEST(ManifestSchema, ManifestRelabelledWithAnotherSchemeIsRefused) {
  {
    CaseCopy c(kRopeCase);  // RoPE params under shaw: shaw's keys are missing
    c.edit_manifest([](Json& m) { m["scheme"] = "shaw"; });
    expect_refused(c, {"params.n_heads: missing", "shaw"});
  }
  {
    CaseCopy c(kScaledCase);  // a scaled rule presented as plain RoPE: its scaling is refused
    c.edit_manifest([](Json& m) { m["scheme"] = "rope"; });
    expect_refused(c, {"params.scaling: unexpected"});
  }
  {
    CaseCopy c(kRopeCase);  // a wrong type and a value out of range are named with the expectation
    c.edit_manifest([](Json& m) { m["params"]["n_tokens"] = "many"; });
    expect_refused(c, {"params.n_tokens: expected an integer"});
    c.edit_manifest([](Json& m) { m["params"]["n_tokens"] = 0; });
    expect_refused(c, {"params.n_tokens: expected an integer in [1,"});
  }
}

TEST(ManifestSchema, ParamsMustAgreeWithTheTensorShapesAndDtype) {
  CaseCopy c(kRopeCase);
  c.edit_manifest([](Json& m) { m["params"]["n_q_heads"] = m["params"]["n_q_heads"].get<int>() + 1; });
  expect_refused(c, {"tensor \"q\" shape", "expected [n_tokens, n_q_heads, head_dim] = ["});
  c.edit_manifest([](Json& m) {
    m["params"]["n_q_heads"] = m["params"]["n_q_heads"].get<int>() - 1;
    m["params"]["dtype"] = "f64";
  });
  expect_refused(c, {"tensor \"q\" dtype", "expected params.dtype \"f64\""});
}

// ---- KV-cache traces --------------------------------------------------------------------------

/// A scratch copy of the context-shift trace with its trace steps edited.
void expect_trace_refused(const std::function<void(Json& steps)>& edit, const std::vector<std::string>& fragments) {
  CaseCopy c(kKvShiftCase);
  c.edit_manifest([&](Json& m) { edit(m["trace"]["steps"]); });
  expect_refused(c, fragments);
}

TEST(KvTraceValidation, StepsMustBeInOrderWithNoneRepeatedOrMissing) {
  expect_trace_refused([](Json& s) { s.insert(s.begin() + 2, s[1]); },  // s01 twice
                       {"trace.steps[2].index: expected 2", "repeated"});
  expect_trace_refused([](Json& s) { std::swap(s[1], s[2]); }, {"trace.steps[1].index: expected 1"});
  expect_trace_refused([](Json& s) { s.erase(s.begin() + 3); }, {"trace.steps[3].index: expected 3", "got 4"});
  expect_trace_refused([](Json& s) { s[2]["name"] = "s07"; }, {"trace.steps[2].name: expected \"s02\""});
}

TEST(KvTraceValidation, StepKindsAreKnown) {
  expect_trace_refused([](Json& s) { s[3]["kind"] = "rewind"; },
                       {"trace.steps[3].kind: expected prefill, batch, decode, verify or shift", "rewind"});
  expect_trace_refused([](Json& s) { s[0]["kind"] = "shift"; }, {"trace.steps[0].kind", "the first step appends"});
  expect_trace_refused([](Json& s) { s[2]["kind"] = "prefill"; }, {"trace.steps[2].kind", "first step only"});
}

TEST(KvTraceValidation, CountsAndShapesAreConsistent) {
  expect_trace_refused([](Json& s) { s[1]["columns"] = -1; }, {"trace.steps[1].columns: expected an integer >= 1", "-1"});
  expect_trace_refused([](Json& s) { s[1]["columns"] = 0; }, {"trace.steps[1].columns: expected an integer >= 1"});
  // s01 is a decode: one column (its tensors' shapes say so too)
  expect_trace_refused([](Json& s) { s[1]["columns"] = 2; }, {"trace.steps[1].columns: expected 1 for a decode"});
  expect_trace_refused([](Json& s) { s[0]["columns"] = 11; }, {"tensor \"s00.q\" shape", "[batch, columns, n_heads, head_dim]"});
  // the shift at s05 keeps 4 and discards 6 of 16 rows; 40 would leave the cache
  expect_trace_refused([](Json& s) { s[5]["n_discard"] = 40; }, {"trace.steps[5].n_discard", "<= cache_rows 16"});
  expect_trace_refused([](Json& s) { s[5]["n_keep"] = -1; }, {"trace.steps[5].n_keep: expected an integer >= 0"});
  // a step's tensors are its own, listed once, and every step tensor belongs to a step
  expect_trace_refused([](Json& s) { s[2]["inputs"][0] = "s01.q"; }, {"trace.steps[2].inputs", "not a tensor of step s02"});
  expect_trace_refused([](Json& s) { s[2]["expected"].erase(0); }, {"trace.steps[2].expected: missing s02.positions"});
  expect_trace_refused([](Json& s) { s.erase(s.end() - 1); }, {"tensor \"s11.", "belongs to no trace step"});
}

// An M-RoPE trace (variant "trace" of mrope): steps numbered from 0, of a known kind, for a
// listed request, naming only tensors the manifest lists.
TEST(MropeTraceValidation, StepsAreNumberedKnownAndNameListedTensors) {
  const std::string id = "mrope_qwen2_vl_7b_instruct_trace_prefix_reuse_f32";
  auto refused = [&](const std::function<void(Json& steps)>& edit, const std::vector<std::string>& fragments) {
    CaseCopy c(id);
    c.edit_manifest([&](Json& m) { edit(m["trace"]["steps"]); });
    expect_refused(c, fragments);
  };
  refused([](Json& s) { std::swap(s[1], s[2]); }, {"trace.steps[1].index: expected 1"});
  refused([](Json& s) { s[3]["kind"] = "rewind"; },
          {"trace.steps[3].kind: expected prefill, decode, draft, verify, truncate or shift"});
  refused([](Json& s) { s[4]["request"] = 2; }, {"trace.steps[4].request: expected the index of one of trace.requests"});
  refused([](Json& s) { s[2]["expected"].push_back("s09.q_rot"); },
          {"trace.steps[2].expected", "names a tensor the manifest does not list: \"s09.q_rot\""});
  CaseCopy c(id);
  c.edit_manifest([](Json& m) { m["params"]["n_tokens"] = 3; });
  expect_refused(c, {"params.n_tokens", "unexpected"});
}

TEST(KvTraceValidation, CacheRowsMatchTheCapacityOrTheColumns) {
  CaseCopy c(kKvShiftCase);
  c.edit_manifest([](Json& m) { m["params"]["cache_rows"] = 17; });
  expect_refused(c, {"params.cache_rows: expected the capacity 16"});
  CaseCopy u("kv_cache_rope_llama3_1_8b_prefill_decode_f32");  // no capacity: 12 + 3 + 3 + 2 = 20 rows
  u.edit_manifest([](Json& m) { m["trace"]["steps"][0]["columns"] = 13; });
  expect_refused(u, {"s00.", "shape"});
}

/// Changes a tensor of a scratch case and writes its new SHA-256 into the manifest (the case
/// stays self-consistent: only the trace invariants can refuse it).
void rewrite_i64(const CaseCopy& c, const std::string& name, std::int64_t i, std::int64_t v) {
  std::string sha;
  c.edit_tensors([&](std::vector<Tensor>& ts, std::map<std::string, std::string>&) {
    for (auto& t : ts) {
      if (t.name != name) continue;
      std::memcpy(t.data.data() + 8 * i, &v, 8);
      sha = sha256_hex(t.data);
    }
  });
  ASSERT_FALSE(sha.empty()) << name;
  c.edit_manifest([&](Json& m) {
    for (auto& t : m["expected"]) {
      if (t["name"] == name) t["sha256"] = sha;
    }
  });
}

std::string open_error(const fs::path& manifest);

TEST(KvTraceValidation, IntegerTensorsHoldTheGeneratorsInvariants) {
  struct Edit {
    std::string tensor;
    std::int64_t index, value;
    std::string message;
  };
  // kv_cache_rope_context_shift_f32: batch 1, 16 cache rows; s02 caches positions 0..13
  const std::vector<Edit> edits = {
      {"s01.slots", 0, 16, "tensor \"s01.slots\" [0, 0]: expected a slot in [0, cache_rows 16) (got 16)"},
      {"s01.positions", 0, -3, "tensor \"s01.positions\" [0, 0]: expected a position >= 0 (got -3)"},
      {"s02.cache_positions", 1, 0, "tensor \"s02.cache_positions\" [0, 1]: expected more than the row before, 0"},
      {"s02.cache_positions", 15, 7, "tensor \"s02.cache_positions\" [0, 15]: expected -1: the cached positions come first"}};
  for (const auto& e : edits) {
    CaseCopy c(kKvShiftCase);
    rewrite_i64(c, e.tensor, e.index, e.value);
    for (const std::string& err : {load_error(c.manifest()), open_error(c.manifest())}) {
      EXPECT_NE(err.find(e.message), std::string::npos) << e.tensor << ": " << err;
    }
  }
}

// ---- a manifest inside a catalog folder ------------------------------------------------------

/// A catalog folder <dir>/catalog.json with one committed case under <dir>/<scheme>/.
class CatalogCopy {
 public:
  explicit CatalogCopy(const std::string& id) {
    dir_ = fs::temp_directory_path() / ("posenc-catalog-copy-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    for (const auto& e : catalog_read(default_data_dir())) {
      if (e.id != id) continue;
      fs::create_directories(dir_ / e.scheme);
      fs::copy_file(default_data_dir() / e.manifest, dir_ / e.manifest);
      fs::copy_file(default_data_dir() / e.tensors, dir_ / e.tensors);
      write_text_atomic(dir_ / "catalog.json", catalog_text({e}));
      manifest_ = dir_ / e.manifest;
      tensors_ = dir_ / e.tensors;
    }
  }
  ~CatalogCopy() { fs::remove_all(dir_); }
  fs::path dir_, manifest_, tensors_;
};

std::string open_error(const fs::path& manifest) {
  try {
    open_case(manifest)->finish();
  } catch (const GoldenFileError& e) {
    return e.what();
  }
  return "";
}

TEST(CatalogMembership, EditedCaseWithRewrittenHashesIsRefusedWhenNamedByPath) {
  CatalogCopy cat(kRopeCase);
  ASSERT_FALSE(cat.manifest_.empty());
  EXPECT_EQ(load_error(cat.manifest_), "");
  EXPECT_EQ(open_error(cat.manifest_), "");
  // Edit the .cond companion of the first conditioned tensor and rewrite its hash in the
  // manifest: the manifest and its tensors agree, only the catalog can tell.
  std::string cond;
  std::map<std::string, std::string> meta;
  auto ts = safetensors_read(cat.tensors_, &meta);
  const auto b = read_file(cat.manifest_);
  Json m = Json::parse(b.begin(), b.end());
  for (auto& t : m["expected"]) {
    if (!t["companions"].contains("cond")) continue;
    cond = t["companions"]["cond"]["name"];
    for (auto& x : ts) {
      if (x.name != cond) continue;
      for (std::int64_t i = 0; i < x.numel(); ++i) set_f32(x, i, 1e6f);
      t["companions"]["cond"]["sha256"] = sha256_hex(x.data);
    }
    break;
  }
  ASSERT_FALSE(cond.empty());
  write_file_atomic(cat.tensors_, safetensors_encode(ts, meta));
  write_text_atomic(cat.manifest_, manifest_text(m));
  for (const std::string& e : {load_error(cat.manifest_), open_error(cat.manifest_)}) {
    EXPECT_NE(e.find("SHA-256 differs from catalog.json"), std::string::npos) << e;
  }
  // The same files outside a catalog folder load: the hashes inside the case agree.
  CaseCopy outside(kRopeCase);
  fs::copy_file(cat.manifest_, outside.manifest(), fs::copy_options::overwrite_existing);
  fs::copy_file(cat.tensors_, outside.tensors(), fs::copy_options::overwrite_existing);
  EXPECT_EQ(load_error(outside.manifest()), "");
}

TEST(CatalogMembership, UnlistedManifestInACatalogFolderIsRefused) {
  CatalogCopy cat(kRopeCase);
  ASSERT_FALSE(cat.manifest_.empty());
  const fs::path other = cat.manifest_.parent_path() / "copy.json";
  fs::copy_file(cat.manifest_, other);
  for (const std::string& e : {load_error(other), open_error(other)}) {
    EXPECT_NE(e.find("does not list it"), std::string::npos) << e;
    EXPECT_NE(e.find("catalog.json"), std::string::npos) << e;
  }
  // in the catalog folder itself (no <scheme>/ level) too
  fs::copy_file(cat.manifest_, cat.dir_ / "top.json");
  EXPECT_NE(load_error(cat.dir_ / "top.json").find("does not list it"), std::string::npos);
}

// ---- verdicts ----------------------------------------------------------------------------------

TEST(VerifyVerdicts, PerfectOutputPassesEveryApplicableProfile) {
  const auto lc = load(kRopeCase);
  for (const std::string profile : {"strict", "fp32", "fp32-recurrence"}) {
    VerifyOptions o;
    o.profile = profile;
    o.require_all = true;
    const auto r = verify_case(lc.spec, lc.golden, perfect_output(lc), o);
    EXPECT_EQ(r.status, Verdict::kPass) << format_case_text(r, true);
  }
}

TEST(VerifyVerdicts, NanNeverPassesNotEvenANegativeControl) {
  const auto lc = load(kRopeCase);
  auto out = perfect_output(lc);
  set_f32(out.at("q_rot"), 5, NAN);
  const auto r = verify_case(lc.spec, lc.golden, out, {});
  EXPECT_EQ(r.status, Verdict::kFail) << format_case_text(r, false);
  const auto nc = load(kNegativeControl);
  TensorMap nan_out;
  Tensor s = nc.golden.at("slopes");
  for (std::int64_t i = 0; i < s.numel(); ++i) set_f32(s, i, NAN);
  nan_out.emplace("slopes", s);
  const auto rn = verify_case(nc.spec, nc.golden, nan_out, {});
  EXPECT_EQ(rn.status, Verdict::kFail) << format_case_text(rn, false);
  EXPECT_NE(rn.message.find("NaN"), std::string::npos);
}

TEST(VerifyVerdicts, EveryNegativeControlsStoredValuesReproduceUnderEveryProfile) {
  // A known-wrong output must be recognised whatever pipeline the engine claims: each negative
  // control of the catalog, given its own stored values, reproduces the wrong convention under
  // every profile that applies to it (the budgets are those of an engine following that
  // convention, not of the correct one).
  int n = 0;
  for (const auto& e : catalog_read(default_data_dir())) {
    const auto lc = load_case(default_data_dir() / e.manifest);
    if (lc.spec.result != "invalid") continue;
    for (const auto& prof : profiles()) {
      VerifyOptions o;
      o.profile = prof.name;
      o.require_all = true;
      const auto r = verify_case(lc.spec, lc.golden, perfect_output(lc), o);
      if (r.status == Verdict::kNotApplicable || r.status == Verdict::kError) continue;
      EXPECT_EQ(r.status, Verdict::kFail) << e.id << " under " << prof.name << "\n" << format_case_text(r, true);
      ++n;
    }
  }
  EXPECT_GE(n, 16);
}

TEST(VerifyVerdicts, MissingStagesAreShownAndRequireAllNamesThem) {
  const auto lc = load(kRopeCase);
  auto out = perfect_output(lc);
  out.erase("k_rot");
  const auto r = verify_case(lc.spec, lc.golden, out, {});
  EXPECT_EQ(r.status, Verdict::kPass);
  EXPECT_NE(format_case_text(r, false).find("optional stages not written: k_rot (1 tensor)"),
            std::string::npos) << format_case_text(r, false);
  VerifyOptions all;
  all.require_all = true;
  const auto ra = verify_case(lc.spec, lc.golden, out, all);
  EXPECT_EQ(ra.status, Verdict::kError);
  EXPECT_NE(ra.message.find("k_rot"), std::string::npos) << ra.message;
  EXPECT_NE(format_case_text(ra, false).find("stages not written (--require-all): k_rot"),
            std::string::npos) << format_case_text(ra, false);
}

TEST(VerifyReports, StagesNotWrittenAreOneLineInTextAndEntriesInJson) {
  const auto lc = load(kRopeCase);
  auto out = perfect_output(lc);
  std::vector<std::string> dropped;
  for (const auto& t : lc.spec.expected) {
    if (t.stage == "q_rot" || t.name == "q_rot" || t.name == "k_rot") continue;
    dropped.push_back(t.name);
    out.erase(t.name);
  }
  ASSERT_GE(dropped.size(), 2u);
  const auto r = verify_case(lc.spec, lc.golden, out, {});
  EXPECT_EQ(r.status, Verdict::kPass);
  const std::string text = format_case_text(r, false);
  std::string names;
  for (const auto& n : dropped) names += (names.empty() ? "" : ", ") + n;
  EXPECT_NE(text.find("optional stages not written: " + names + " (" +
                      std::to_string(dropped.size()) + " tensors)\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("MISSING"), std::string::npos) << text;
  int missing = 0;
  const Json jr = case_report_json(r);
  for (const auto& t : jr["tensors"]) missing += t["status"] == "MISSING";
  EXPECT_EQ(missing, static_cast<int>(dropped.size()));
}

TEST(VerifyVerdicts, NegativeControlLinesSayDiffersOrReproduces) {
  const auto nc = load(kNegativeControl);
  const auto same = verify_case(nc.spec, nc.golden, perfect_output(nc), {});
  EXPECT_EQ(same.status, Verdict::kFail);
  const std::string t1 = format_case_text(same, false);
  EXPECT_NE(t1.find("REPRODUCES the known-wrong output"), std::string::npos) << t1;
  const auto correct = load("alibi_slopes_h12_f32");
  TensorMap out;
  out.emplace("slopes", correct.golden.at("slopes"));
  const auto differs = verify_case(nc.spec, nc.golden, out, {});
  EXPECT_EQ(differs.status, Verdict::kPass);
  const std::string t2 = format_case_text(differs, false);
  EXPECT_NE(t2.find("DIFFERS from the known-wrong output"), std::string::npos) << t2;
  EXPECT_EQ(t2.find(" FAIL"), std::string::npos) << t2;
}

// An engine that follows vLLM's `any_above` LongRoPE switch (short factors on the boundary
// call, positions 0..4096) in ggml's float32 arithmetic: under fp32 its output differs from the
// negative control's known-wrong values, within fp32-recurrence's budgets it reproduces them.
// The fp32 line says so (text, JSON, HTML); under fp32-recurrence it is a plain reproduction.
TEST(VerifyVerdicts, NegativeControlNamesTheProfilesThatReproduceIt) {
  const auto nc = load("rope_scaling_phi_3_mini_128k_instruct_boundary_vllm_any_above_f32");
  CaseSpec any_above = nc.spec;
  any_above.manifest["params"]["scaling"]["switch"] = "vllm_any_above";
  EngineOptions eo;
  eo.pipeline = "fp32-recurrence";
  const TensorMap out = scheme_by_slug("rope_scaling").run_engine(any_above, nc.golden, eo);
  VerifyOptions fp32;
  fp32.profile = "fp32";
  const auto r = verify_case(nc.spec, nc.golden, out, fp32);
  EXPECT_EQ(r.status, Verdict::kPass);
  EXPECT_EQ(r.reproduces_under, std::vector<std::string>{"fp32-recurrence"});
  const std::string text = format_case_text(r, false);
  EXPECT_NE(text.find("profile=fp32  PASS (negative control: the output differs from the known-wrong "
                      "convention under fp32; it reproduces that convention under fp32-recurrence)"),
            std::string::npos) << text;
  EXPECT_EQ(case_report_json(r)["reproduces_under"], Json::array({"fp32-recurrence"}));
  HtmlReport page("t", "c", "fp32");
  page.add_case(nc.spec, nc.golden, &out, r, nullptr, std::nullopt, "");
  EXPECT_NE(page.html().find("PASS (differs under fp32; reproduces it under fp32-recurrence)"),
            std::string::npos);
  VerifyOptions rec;
  rec.profile = "fp32-recurrence";
  const auto same = verify_case(nc.spec, nc.golden, out, rec);
  EXPECT_EQ(same.status, Verdict::kFail);
  EXPECT_TRUE(same.reproduces_under.empty());
  // The correct engine (HF's switch) differs under every profile: nothing to add.
  const TensorMap right = scheme_by_slug("rope_scaling").run_engine(nc.spec, nc.golden, eo);
  const auto ok = verify_case(nc.spec, nc.golden, right, fp32);
  EXPECT_EQ(ok.status, Verdict::kPass);
  EXPECT_TRUE(ok.reproduces_under.empty());
  EXPECT_EQ(ok.message, "negative control: the output differs from the known-wrong convention");
  EXPECT_EQ(case_report_json(ok)["reproduces_under"], Json::array());
}

// The resolution gap of 16-bit targets (docs/verifying.md): at bf16 a mistake's effect on
// `out` can stay within the eager budget while `probs` shows it. Each case's manifest says
// which stages show which engine mistake under each profile (mistake_detection, measured when
// the case is generated); verify names the mistakes the stages given cannot see at the claimed
// profile and the stages to export. Checked against the engine's own mistakes: every gap the
// manifest lists is real (out alone passes) and named, and giving probs closes it.
TEST(VerifyVerdicts, StagesThatCannotSeeAMistakeAtThisResolutionSaySo) {
  for (const auto& [id, scheme] : {std::pair{"nope_decode_h4_kv2_d64_q4_k64_bf16", "nope"},
                                   std::pair{"deberta_v3_base_h1_d64_q16_o200_k400_bf16", "deberta"},
                                   std::pair{"transformer_xl_wt103s_h4_d16_dm64_mem150_m150_q16_clamp1000_bf16",
                                             "transformer_xl"}}) {
    SCOPED_TRACE(id);
    const auto lc = load(id);
    ASSERT_TRUE(lc.spec.mistake_stages.count("bf16"));
    int gaps = 0;
    for (const auto& [mistake, stages] : lc.spec.mistake_stages.at("bf16")) {
      if (std::find(stages.begin(), stages.end(), "out") != stages.end()) continue;
      SCOPED_TRACE(mistake);
      EngineOptions eo;
      eo.mistake = mistake;
      const TensorMap run = scheme_by_slug(scheme).run_engine(lc.spec, lc.golden, eo);
      TensorMap out;
      out.emplace("out", run.at("out"));
      VerifyOptions bf16;
      bf16.profile = "bf16";
      const auto r = verify_case(lc.spec, lc.golden, out, bf16);
      EXPECT_EQ(r.status, Verdict::kPass);  // the gap itself
      const std::string text = format_case_text(r, false);
      const bool strict_sees = lc.spec.mistake_stages.count("strict") &&
                               lc.spec.mistake_stages.at("strict").count(mistake) &&
                               std::ranges::count(lc.spec.mistake_stages.at("strict").at(mistake), "out") > 0;
      if (!strict_sees) continue;  // out sees it under no profile: not a resolution gap
      ++gaps;
      std::string want = "note: at bf16's resolution the stages given (out) cannot see the " +
                         std::string(scheme) + " mistake";
      EXPECT_NE(text.find(want), std::string::npos) << text;
      EXPECT_NE(text.find("`" + mistake + "`"), std::string::npos) << text;
      std::string export_list;
      for (const auto& s : stages) export_list += (export_list.empty() ? "" : ", ") + s;
      EXPECT_NE(text.find("export one of: " + export_list), std::string::npos) << text;
      EXPECT_EQ(verify_case(lc.spec, lc.golden, out, {}).status, Verdict::kFail);  // strict sees it
      const auto strict_text = format_case_text(verify_case(lc.spec, lc.golden, out, {}), false);
      EXPECT_EQ(strict_text.find("resolution"), std::string::npos) << strict_text;
      out.emplace(stages.front(), run.at(stages.front()));
      const auto closed = verify_case(lc.spec, lc.golden, out, bf16);
      EXPECT_EQ(closed.status, Verdict::kFail);
      EXPECT_EQ(format_case_text(closed, false).find("`" + mistake + "`"), std::string::npos);
    }
    EXPECT_GE(gaps, 1);  // measured: nope 2, deberta 3, transformer_xl 1
  }
}

// mistake_detection is measured when a case is generated (generate_case, as `posenc generate`
// writes it): a fresh generation gives the committed manifest's, and a bf16 case lists mistakes.
TEST(VerifyVerdicts, MistakeDetectionIsMeasuredWhenACaseIsGenerated) {
  const std::string id = "nope_decode_h4_kv2_d64_q4_k64_bf16";
  const GoldenCase fresh = generate_case(scheme_by_slug("nope"), id);
  ASSERT_TRUE(fresh.manifest.contains("mistake_detection"));
  EXPECT_EQ(fresh.manifest["mistake_detection"], load(id).spec.manifest["mistake_detection"]);
  EXPECT_TRUE(fresh.manifest["mistake_detection"].contains("bf16"));
  EXPECT_TRUE(fresh.manifest["mistake_detection"].contains("strict"));
  EXPECT_FALSE(fresh.manifest["mistake_detection"].contains("f16"));  // f16 does not apply here
}

/// Every number of a JSON report is a number or null; the strings inf, -inf, nan only as the
/// value of a KEY_nonfinite beside a null KEY.
void expect_no_nonfinite_text(const Json& j, const std::string& path = "") {
  if (j.is_object()) {
    for (const auto& [k, v] : j.items()) {
      const std::string suffix = "_nonfinite";
      if (k.size() > suffix.size() && k.compare(k.size() - suffix.size(), suffix.size(), suffix) == 0) {
        const std::string key = k.substr(0, k.size() - suffix.size());
        EXPECT_TRUE(j.contains(key) && j[key].is_null()) << path << "/" << k;
        continue;
      }
      expect_no_nonfinite_text(v, path + "/" + k);
    }
  } else if (j.is_array()) {
    for (std::size_t i = 0; i < j.size(); ++i) expect_no_nonfinite_text(j[i], path + "/" + std::to_string(i));
  } else if (j.is_string()) {
    const auto s = j.get<std::string>();
    EXPECT_TRUE(s != "inf" && s != "-inf" && s != "nan") << path << " is the string " << s;
  }
}

TEST(VerifyReports, NonFiniteNumbersAreNullWithAFlagInJson) {
  const auto lc = load(kRopeCase);
  auto out = perfect_output(lc);
  set_f32(out.at("q_rot"), 5, NAN);
  const auto r = verify_case(lc.spec, lc.golden, out, {});
  const Json j = case_report_json(r, true);
  expect_no_nonfinite_text(j);
  bool seen = false;
  for (const auto& t : j["tensors"]) {
    if (t["name"] != "q_rot") continue;
    seen = true;
    EXPECT_TRUE(t["ratio"].is_null()) << t.dump();
    EXPECT_EQ(t["ratio_nonfinite"], "inf") << t.dump();
    EXPECT_TRUE(t["worst"]["actual"].is_null()) << t.dump();
    EXPECT_EQ(t["worst"]["actual_nonfinite"], "nan") << t.dump();
    EXPECT_TRUE(t["worst"]["exact"].is_number()) << t.dump();
    EXPECT_FALSE(t["worst"].contains("exact_nonfinite")) << t.dump();
  }
  EXPECT_TRUE(seen);
}

TEST(VerifyReports, QueryKeyTensorsNameTheWorstElementsKeyPosition) {
  const auto lc = load("alibi_paper_decode_h12_d64_q4_k40_f32");
  auto out = perfect_output(lc);
  Tensor& probs = out.at("probs");  // [head, query, key]
  const auto& shape = probs.shape;
  ASSERT_EQ(shape.size(), 3u);
  const std::int64_t query = 2, key = 5;  // a decode query attending to an early key
  const std::int64_t i = (1 * shape[1] + query) * shape[2] + key;
  set_f32(probs, i, static_cast<float>(probs.get_f64(i) + 0.25));
  const auto r = verify_case(lc.spec, lc.golden, out, {});
  ASSERT_EQ(r.status, Verdict::kFail);
  const std::int64_t qpos = lc.golden.at("query_positions").get_i64(query);
  const std::int64_t kpos = lc.golden.at("key_positions").get_i64(key);
  ASSERT_NE(qpos, kpos);
  const std::string text = format_case_text(r, false);
  const std::string words = "query_position=" + std::to_string(qpos) + " key_position=" +
                            std::to_string(kpos) + " (key - query = " + std::to_string(kpos - qpos) + ")";
  EXPECT_NE(text.find(words), std::string::npos) << text;
  bool seen = false;
  const Json jr = case_report_json(r);
  for (const auto& t : jr["tensors"]) {
    if (t["name"] != "probs") continue;
    seen = true;
    EXPECT_EQ(t["worst"]["query_position"], qpos);
    EXPECT_EQ(t["worst"]["key_position"], kpos);
    EXPECT_EQ(t["worst"]["key_minus_query"], kpos - qpos);
  }
  EXPECT_TRUE(seen);
  HtmlReport page("t", "c", "strict");
  page.add_case(lc.spec, lc.golden, &out, r, nullptr, std::nullopt, "");
  const std::string html = page.html();
  EXPECT_NE(html.find("worst element at query position " + std::to_string(qpos) + ", key position " +
                      std::to_string(kpos) + " (key - query = " + std::to_string(kpos - qpos) + ")"),
            std::string::npos);
}

TEST(VerifyReports, IntegerTensorsPrintTheirErrorAsAnInteger) {
  const auto lc = load("kv_cache_rope_window8_ring_wrap_f32");
  auto out = perfect_output(lc);
  Tensor& pos = out.at("s04.positions");
  ASSERT_EQ(pos.dtype, DType::kI64);
  const std::int64_t exact = pos.get_i64(0), given = exact - 3;
  std::memcpy(pos.data.data(), &given, 8);
  const auto r = verify_case(lc.spec, lc.golden, out, {});
  ASSERT_EQ(r.status, Verdict::kFail);
  const std::string text = format_case_text(r, false);
  const std::string words = "exact=" + std::to_string(exact) + " actual=" + std::to_string(given) + " |err|=3";
  std::string line;
  for (std::istringstream is(text); std::getline(is, line);) {
    if (line.find("s04.positions ") != std::string::npos) break;
  }
  EXPECT_NE(line.find(words), std::string::npos) << line;
  EXPECT_EQ(line.find("budget"), std::string::npos) << line;
  EXPECT_NE(text.find("first failing step: s04 (decode, step 4 of 8): s04.positions differs in "
                      "sequence 0 at position " + std::to_string(exact)), std::string::npos) << text;
  const Json jr = case_report_json(r);
  for (const auto& t : jr["tensors"]) {
    if (t["name"] == "s04.positions") {
      EXPECT_EQ(t["worst"]["abs_error"], 3) << t.dump();
    }
  }
}

TEST(VerifyVerdicts, FirstFailingPositionIsLocated) {
  const auto lc = load(kDenseCase);
  auto out = perfect_output(lc);
  const auto& positions = lc.golden.at("positions");
  const int h = lc.spec.manifest["params"]["head_dim"].get<int>();
  std::int64_t token = -1;
  for (std::int64_t t = 0; t < positions.numel(); ++t) {
    if (positions.get_i64(t) == 300) token = t;
  }
  ASSERT_GE(token, 0);
  Tensor& q = out.at("q_rot");
  set_f32(q, token * h, static_cast<float>(q.get_f64(token * h) + 0.25));
  const auto r = verify_case(lc.spec, lc.golden, out, {});
  ASSERT_EQ(r.status, Verdict::kFail);
  for (const auto& t : r.tensors) {
    if (t.name != "q_rot") continue;
    ASSERT_TRUE(t.first_fail_position.has_value());
    EXPECT_EQ(*t.first_fail_position, 300);
    ASSERT_TRUE(t.passes_up_to_position.has_value());
    EXPECT_EQ(*t.passes_up_to_position, 299);
    for (const auto& ps : t.by_position) EXPECT_EQ(ps.n_over > 0, ps.position == 300) << ps.position;
  }
  const Json j = case_report_json(r);
  EXPECT_EQ(j["tensors"][3]["first_fail_position"], 300);
  EXPECT_EQ(j["tensors"][3]["passes_up_to_position"], 299);
}

// A trace case: the first step with a failing tensor is named with the position and slot of its
// worst element, and the position the engine gave when positions are what fails.
TEST(VerifyVerdicts, TraceNamesTheFirstFailingStepWithPositionAndSlot) {
  const auto lc = load("kv_cache_rope_window8_ring_wrap_f32");
  auto out = perfect_output(lc);
  const auto pass = verify_case(lc.spec, lc.golden, out, {});
  ASSERT_TRUE(pass.trace.has_value());
  EXPECT_EQ(pass.trace->index, -1);
  EXPECT_EQ(pass.trace->n_checked, pass.trace->n_steps);
  // s05 is the 4-token verify window at positions 10..13 in ring slots 2..5: break column 1
  // (position 11, slot 3), and s06 too; the report names s05.
  for (const char* name : {"s05.out", "s06.out"}) {
    Tensor& o = out.at(name);
    const std::int64_t row = std::string(name) == "s05.out" ? 1 : 0;
    const std::int64_t per_row = o.numel() / o.shape[1];
    set_f32(o, row * per_row + 3, static_cast<float>(o.get_f64(row * per_row + 3) + 0.5));
  }
  auto r = verify_case(lc.spec, lc.golden, out, {});
  ASSERT_EQ(r.status, Verdict::kFail);
  ASSERT_TRUE(r.trace.has_value());
  EXPECT_EQ(r.trace->name, "s05");
  EXPECT_EQ(r.trace->kind, "verify");
  EXPECT_EQ(r.trace->position, std::optional<std::int64_t>(11));
  EXPECT_EQ(r.trace->slot, std::optional<std::int64_t>(3));
  EXPECT_NE(format_case_text(r, false).find("first failing step: s05 (verify, step 5 of 8)"), std::string::npos)
      << format_case_text(r, false);
  EXPECT_EQ(case_report_json(r)["trace"]["first_failing_step"], 5);
  // A wrong position in an earlier step comes first, with what the engine gave.
  Tensor& p = out.at("s04.positions");
  std::vector<std::int64_t> v = {8};
  p = tensor_from_i64("s04.positions", p.shape, v);
  r = verify_case(lc.spec, lc.golden, out, {});
  ASSERT_TRUE(r.trace.has_value());
  EXPECT_EQ(r.trace->name, "s04");
  EXPECT_EQ(r.trace->position, std::optional<std::int64_t>(9));
  EXPECT_EQ(r.trace->engine_position, std::optional<std::int64_t>(8));
}

TEST(VerifyVerdicts, MaxPositionJudgesOnlyTheContextWindow) {
  const auto lc = load(kRopeCase);
  auto out = perfect_output(lc);
  const std::int64_t last = lc.golden.at("positions").numel() - 1;  // position 2^24 + 1
  const int h = lc.spec.manifest["params"]["head_dim"].get<int>();
  Tensor& q = out.at("q_rot");
  set_f32(q, last * 2 * h, static_cast<float>(q.get_f64(last * 2 * h) + 0.5));
  EXPECT_EQ(verify_case(lc.spec, lc.golden, out, {}).status, Verdict::kFail);
  VerifyOptions o;
  o.max_position = 1 << 20;
  const auto r = verify_case(lc.spec, lc.golden, out, o);
  EXPECT_EQ(r.status, Verdict::kPass) << format_case_text(r, false);
  for (const auto& t : r.tensors) {
    if (t.name == "q_rot") {
      EXPECT_GT(t.n_skipped, 0);
    }
  }
}

TEST(VerifyVerdicts, DeclaredAlternativeForFullyMaskedRowsIsNamed) {
  const auto lc = load(kMaskedRows);
  const auto& s = scheme_by_slug("attention");
  EngineOptions eo;
  eo.pipeline = "fp32";  // PyTorch eager: masked rows come out uniform
  const auto out = s.run_engine(lc.spec, lc.golden, eo);
  VerifyOptions o;
  o.profile = "fp32";
  const auto r = verify_case(lc.spec, lc.golden, out, o);
  EXPECT_EQ(r.status, Verdict::kPass) << format_case_text(r, true);
  for (const auto& t : r.tensors) EXPECT_EQ(t.convention, "uniform_masked_rows") << t.name;
  CaseSpec without = lc.spec;
  for (auto& t : without.expected) t.alternatives.clear();
  EXPECT_EQ(verify_case(without, lc.golden, out, o).status, Verdict::kFail);
  // posenc's own kernel keeps the default (zeros).
  const auto exact = verify_case(lc.spec, lc.golden, s.run_engine(lc.spec, lc.golden, {}), {});
  EXPECT_EQ(exact.status, Verdict::kPass);
  for (const auto& t : exact.tensors) EXPECT_EQ(t.convention, "default");
}

TEST(VerifyVerdicts, OutputsThatCannotSeeABugClassSaySo) {
  const auto lc = load(kRopeCase);
  TensorMap out;
  out.emplace("scores", lc.golden.at("scores"));
  const auto r = verify_case(lc.spec, lc.golden, out, {});
  EXPECT_EQ(r.status, Verdict::kPass);
  bool noted = false;
  for (const auto& n : r.notes) noted |= n.find("PositionOffset") != std::string::npos;
  EXPECT_TRUE(noted) << format_case_text(r, false);
  const auto all = verify_case(lc.spec, lc.golden, perfect_output(lc), {});
  EXPECT_TRUE(all.notes.empty());
}

TEST(VerifyVerdicts, ProfileThatDoesNotApplySaysSo) {
  const auto lc = load(kRopeCase);
  VerifyOptions o;
  o.profile = "bf16";
  const auto r = verify_case(lc.spec, lc.golden, perfect_output(lc), o);
  EXPECT_EQ(r.status, Verdict::kNotApplicable);
  for (const auto& t : r.tensors) {
    EXPECT_EQ(t.status, Verdict::kNotApplicable);
    EXPECT_NE(t.message.find("does not apply"), std::string::npos);
  }
}

TEST(VerifyVerdicts, PositionsWhereTheBudgetAdmitsAnyAngleAreFlagged) {
  const auto lc = load(kRopeCase);
  VerifyOptions o;
  o.profile = "fp32";
  const auto r = verify_case(lc.spec, lc.golden, perfect_output(lc), o);
  const std::string text = format_case_text(r, false, true);
  EXPECT_NE(text.find("admit any angle"), std::string::npos) << text;
  double at_top = 0, at_one = 1;
  for (const auto& t : r.tensors) {
    if (t.name != "cos") continue;
    for (const auto& ps : t.by_position) {
      if (ps.position == 16777217) at_top = ps.saturated;
      if (ps.position == 1) at_one = ps.saturated;
    }
  }
  EXPECT_GT(at_top, 0.0);
  EXPECT_EQ(at_one, 0.0);
}

}  // namespace
}  // namespace posenc::golden
