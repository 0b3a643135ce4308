// The streaming verifier (golden/verify/verify.cpp: chunks, typed loops, position ranks,
// file-backed sources) against the verifier it replaced, kept here unchanged as the reference:
// the per-tensor reports and HTML ratios must be identical on every committed case, for
// correct and wrong engine outputs, under every profile, for any chunk size. Then the
// file-backed path (FileSource, what `posenc verify` uses) against the in-memory one, and the
// SHA-256 of every golden tensor checked while it streams.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "golden/cases/catalog.hpp"
#include "golden/format/format.hpp"
#include "golden/format/manifest.hpp"
#include "golden/format/profiles.hpp"
#include "golden/verify/element_ratios.hpp"
#include "golden/verify/tensor_source.hpp"
#include "golden/verify/verify.hpp"
#include "reference/common/errors.hpp"

// The legacy verifier never sees a mutant: it is the fixed reference.
#define LEGACY_MUTANT(name) false

namespace posenc::golden {
namespace legacy {
namespace {

// ---- the verifier before streaming (golden/verify/verify.cpp at 31bf0c2), unchanged but for
// the rules changed since, each marked "since:": an integer tensor's ratio 2 |difference|, an
// exact check's declared alternatives judged by value, the +-Inf count and the non-finite words

std::string shape_str(const std::vector<std::int64_t>& s) {
  std::string r = "[";
  for (std::size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

std::vector<std::int64_t> coords_of(const std::vector<std::int64_t>& shape, std::int64_t index) {
  std::vector<std::int64_t> coords(shape.size());
  for (std::size_t k = shape.size(); k-- > 0;) {
    const std::int64_t dim = shape[k] > 0 ? shape[k] : 1;
    coords[k] = index % dim;
    index /= dim;
  }
  return coords;
}

std::string describe(const TensorSpec& spec, const TensorMap& golden,
                     const std::vector<std::int64_t>& coords) {
  std::ostringstream os;
  for (std::size_t k = 0; k < coords.size(); ++k) {
    if (k) os << ", ";
    const AxisSpec* ax = k < spec.axes.size() ? &spec.axes[k] : nullptr;
    os << (ax && !ax->name.empty() ? ax->name : "dim" + std::to_string(k)) << ' ' << coords[k];
    if (!ax) continue;
    if (!ax->positions.empty()) {
      auto it = golden.find(ax->positions);
      if (it != golden.end() && coords[k] < it->second.numel()) {
        os << " (position " << it->second.get_i64(coords[k]) << ')';
      }
    }
    for (const auto& label : ax->labels) {
      auto it = golden.find(label);
      if (it != golden.end() && coords[k] < it->second.numel()) {
        os << " (" << label << ' ' << it->second.get_i64(coords[k]) << ')';
      }
    }
    if (!ax->pair_map.empty() && ax->name != "pair" &&
        coords[k] < static_cast<std::int64_t>(ax->pair_map.size())) {
      const int pair = ax->pair_map[coords[k]];
      if (pair < 0) {
        os << " (tail)";
      } else {
        os << " (pair " << pair << ')';
      }
    }
  }
  return os.str();
}

/// Position of every element: the largest of its coordinates' positions (a score between
/// positions 5 and 4095 is judged at 4095). Empty when no axis carries positions.
std::vector<std::int64_t> element_positions(const TensorSpec& spec, const TensorMap& golden) {
  std::vector<std::vector<std::int64_t>> axis_pos(spec.shape.size());
  bool any = false;
  for (std::size_t k = 0; k < spec.axes.size() && k < spec.shape.size(); ++k) {
    if (spec.axes[k].positions.empty()) continue;
    auto it = golden.find(spec.axes[k].positions);
    if (it == golden.end() || it->second.numel() != spec.shape[k]) continue;
    for (std::int64_t i = 0; i < spec.shape[k]; ++i) axis_pos[k].push_back(it->second.get_i64(i));
    any = true;
  }
  if (!any) return {};
  std::int64_t n = 1;
  for (auto d : spec.shape) n *= d;
  std::vector<std::int64_t> pos(static_cast<std::size_t>(n), std::numeric_limits<std::int64_t>::min());
  std::vector<std::int64_t> c(spec.shape.size(), 0);
  for (std::int64_t j = 0; j < n; ++j) {
    std::int64_t p = std::numeric_limits<std::int64_t>::min();
    for (std::size_t k = 0; k < c.size(); ++k) {
      if (!axis_pos[k].empty()) p = std::max(p, axis_pos[k][c[k]]);
    }
    pos[j] = p;
    for (std::size_t k = c.size(); k-- > 0;) {  // odometer
      if (++c[k] < spec.shape[k]) break;
      c[k] = 0;
    }
  }
  return pos;
}

struct Judged {
  std::vector<double> ratio;  // per element; NaN output -> +inf
  std::vector<double> diff, budget;
  std::int64_t n_over = 0, n_nan = 0, n_inf = 0;
};

/// |y - y*| / budget for every element against one convention's exact and cond values.
Judged judge(const TensorSpec& spec, const Tensor& act, const Tensor& want, const Tensor* exact,
             const Tensor* cond, const Tensor* extra, const ProfileBudget& b) {
  const std::int64_t n = act.numel();
  Judged r;
  r.ratio.resize(static_cast<std::size_t>(n));
  r.diff.resize(static_cast<std::size_t>(n));
  r.budget.resize(static_cast<std::size_t>(n));
  const double eps = dtype_eps(spec.dtype);
  const bool is_float = dtype_is_float(act.dtype);
  double bound = b.bound;
  if (LEGACY_MUTANT("golden_verify_lenient")) bound = bound * 1e12 + 1e12;  // passes anything
  for (std::int64_t j = 0; j < n; ++j) {
    double ratio, diff = 0, budget = 0;
    const double a = act.get_f64(j);
    r.n_inf += is_float && std::isinf(a);  // since: the +-Inf count
    if (is_float && std::isnan(a)) {
      ratio = LEGACY_MUTANT("golden_verify_nan_passes") ? 0.0 : INFINITY;
      diff = NAN;
      ++r.n_nan;
    } else if (spec.check.kind == CheckKind::kExact) {
      // since: an alternative (exact != nullptr) by value; an integer's ratio 2 |difference|
      const double w = exact ? exact->get_f64(j) : want.get_f64(j);
      const bool same = exact ? a == w : act.get_bits(j) == want.get_bits(j);
      diff = std::fabs(a - w);
      ratio = same ? 0.0 : (!is_float && diff > 0 ? 2 * diff : INFINITY);
      if (!is_float) budget = 0.5;
      if (LEGACY_MUTANT("golden_verify_lenient")) ratio = 0.0;
    } else {
      const double x = exact->get_f64(j);
      if (spec.check.kind == CheckKind::kUlp) {
        budget = bound * dtype_ulp(spec.dtype, x);
      } else {
        const double c = cond->get_f64(j);
        const double ulps = LEGACY_MUTANT("golden_verify_ulps_ignored") ? 0.0 : b.ulps;
        budget = c > 0 ? bound * eps * c + ulps * dtype_ulp(spec.dtype, x) : 0.0;
      }
      if (extra) budget += extra->get_f64(j);
      diff = std::fabs(a - x);
      if (diff == 0.0) {
        ratio = 0.0;
      } else if (!std::isfinite(diff) || !(budget > 0.0)) {
        ratio = INFINITY;
      } else {
        ratio = diff / budget;
      }
    }
    if (ratio > 1.0) ++r.n_over;
    r.ratio[j] = ratio;
    r.diff[j] = diff;
    r.budget[j] = budget;
  }
  return r;
}

TensorReport check_tensor(const TensorSpec& spec, const TensorMap& golden, const Tensor& act,
                          const VerifyOptions& opt, std::vector<double>* keep_ratios = nullptr) {
  TensorReport r;
  r.name = spec.name;
  r.stage = spec.stage;
  r.kind = spec.check.kind;
  const ProfileBudget& b = spec.check.profile(
      LEGACY_MUTANT("golden_verify_na_uses_strict") && !spec.check.profile(opt.profile).applies
          ? std::string("strict") : opt.profile);
  r.bound = b.bound;
  r.has_extra = !b.extra.empty();
  if (!b.applies) {
    r.status = Verdict::kNotApplicable;
    r.message = "profile " + opt.profile + " does not apply: " + b.not_applicable;
    return r;
  }
  if (act.dtype != spec.dtype) {
    r.status = Verdict::kError;
    r.message = "dtype is " + std::string(dtype_short(act.dtype)) + ", the case expects " +
                std::string(dtype_short(spec.dtype));
    return r;
  }
  if (act.shape != spec.shape) {
    r.status = Verdict::kError;
    r.message = "shape is " + shape_str(act.shape) + ", the case expects " + shape_str(spec.shape);
    return r;
  }
  const Tensor& want = golden.at(spec.name);
  const Tensor* extra = b.extra.empty() ? nullptr : &golden.at(b.extra);
  auto find = [&](const std::string& n) { return n.empty() ? nullptr : &golden.at(n); };
  // The default convention, then each declared alternative; the engine is judged by the one
  // it follows (fewest elements over budget, the default on a tie).
  const bool exact_kind = spec.check.kind == CheckKind::kExact;
  Judged best =
      judge(spec, act, want, exact_kind ? nullptr : find(spec.exact), find(spec.cond), extra, b);
  for (const auto& alt : spec.alternatives) {
    if (LEGACY_MUTANT("golden_verify_alternatives_ignored")) break;
    Judged j = judge(spec, act, want, find(alt.exact), find(alt.cond), extra, b);
    if (j.n_over < best.n_over) {
      best = std::move(j);
      r.convention = alt.name;
    }
  }
  const std::vector<std::int64_t> pos = element_positions(spec, golden);
  r.has_positions = !pos.empty();
  const std::int64_t n = act.numel();
  std::int64_t worst = -1;
  double worst_ratio = -1;
  std::map<std::int64_t, PositionStat> per_pos;
  for (std::int64_t j = 0; j < n; ++j) {
    if (r.has_positions && opt.max_position && pos[j] > *opt.max_position &&
        !LEGACY_MUTANT("golden_verify_max_position_ignored")) {
      ++r.n_skipped;
      continue;
    }
    ++r.n;
    const double q = best.ratio[j];
    const bool over = q > 1.0;
    r.n_over += over;
    if (q > worst_ratio) {
      worst_ratio = q;
      worst = j;
    }
    if (r.has_positions) {
      PositionStat& ps = per_pos[pos[j]];
      ps.position = pos[j];
      ps.worst_ratio = std::max(ps.worst_ratio, q);
      ++ps.n;
      ps.n_over += over;
    }
  }
  if (keep_ratios) {
    *keep_ratios = best.ratio;
    if (r.has_positions && opt.max_position) {
      for (std::int64_t j = 0; j < n; ++j) {
        if (pos[j] > *opt.max_position) (*keep_ratios)[j] = std::nan("");
      }
    }
  }
  r.n_nan = best.n_nan;
  r.n_inf = best.n_inf;
  r.max_ratio = worst_ratio < 0 ? 0 : worst_ratio;
  // since: non-finite values fail the tensor wherever they are (beyond --max-position too)
  r.status = r.n_over == 0 && r.n_nan == 0 && r.n_inf == 0 ? Verdict::kPass : Verdict::kFail;
  if (r.n_nan > 0 || r.n_inf > 0) {  // since: the non-finite words
    r.message = "non-finite output: ";
    if (r.n_nan > 0) r.message += std::to_string(r.n_nan) + " NaN";
    if (r.n_inf > 0)
      r.message += std::string(r.n_nan > 0 ? ", " : "") + std::to_string(r.n_inf) + " +-Inf";
    r.message += " element(s): non-finite values never pass";
  }
  if (r.convention != "default") {
    for (const auto& alt : spec.alternatives) {
      if (alt.name == r.convention) {
        r.message += (r.message.empty() ? "" : "; ") + std::string("follows the declared "
                     "alternative \"") + alt.name + "\": " + alt.description;
      }
    }
  }
  for (auto& [p, ps] : per_pos) {
    auto it = b.saturated.find(p);
    if (it != b.saturated.end() && !LEGACY_MUTANT("golden_verify_saturation_dropped")) ps.saturated = it->second;
    r.by_position.push_back(ps);
  }
  if (r.has_positions) {
    for (const auto& ps : r.by_position) {
      if (ps.n_over > 0) {
        r.first_fail_position = ps.position;
        if (!LEGACY_MUTANT("golden_verify_first_fail_wrong")) break;
        continue;
      }
      r.passes_up_to_position = ps.position;
    }
  }
  if (worst >= 0) {
    r.worst.index = worst;
    r.worst.ratio = worst_ratio;
    r.worst.actual = dtype_is_float(act.dtype) ? act.get_f64(worst) : static_cast<double>(act.get_i64(worst));
    r.worst.expected = dtype_is_float(want.dtype) ? want.get_f64(worst) : static_cast<double>(want.get_i64(worst));
    r.worst.exact = spec.exact.empty() ? r.worst.expected : golden.at(spec.exact).get_f64(worst);
    r.worst.abs_error = best.diff[worst];
    r.worst.budget = best.budget[worst];
    r.worst.coords = coords_of(spec.shape, worst);
    r.worst.where = describe(spec, golden, r.worst.coords);
  }
  return r;
}

}  // namespace
}  // namespace legacy

namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

/// The report's JSON without what the report adds for reading and the legacy verifier lacks:
/// the worst element's query and key positions, an integer tensor's |error| (legacy: 0).
Json tensor_json(const TensorReport& t) {
  CaseReport r;
  r.tensors = {t};
  r.tensors[0].worst.query_position.reset();
  r.tensors[0].worst.key_position.reset();
  Json j = case_report_json(r, true).at("tensors").at(0);
  j.erase("max_difference");  // since: an integer tensor's worst abs_error, compared as above
  return j;
}

bool same_ratios(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t j = 0; j < a.size(); ++j) {
    if (std::isnan(a[j]) ? !std::isnan(b[j]) : std::bit_cast<std::uint64_t>(a[j]) !=
                                                    std::bit_cast<std::uint64_t>(b[j])) {
      return false;
    }
  }
  return true;
}

std::uint64_t mix(std::uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/// Engine outputs: the expected tensors themselves, or wrong in one of three ways.
enum class Engine { kExact, kNoisy, kAlternative, kCoarse };

void put_bits(Tensor& t, std::int64_t j, std::uint64_t bits) {
  const int size = dtype_size(t.dtype);
  std::memcpy(t.data.data() + j * size, &bits, static_cast<std::size_t>(size));
}

std::uint64_t nan_bits(DType d) {
  switch (d) {
    case DType::kF64: return 0x7ff8000000000000ull;
    case DType::kF32: return 0x7fc00000u;
    case DType::kBF16: return 0x7fc0u;
    case DType::kF16: return 0x7e00u;
    default: return 0;
  }
}

std::uint64_t encode(DType d, double x) {
  switch (d) {
    case DType::kF64: return std::bit_cast<std::uint64_t>(x);
    case DType::kF32: return std::bit_cast<std::uint32_t>(static_cast<float>(x));
    case DType::kBF16: return float_to_bf16(static_cast<float>(x));
    case DType::kF16: return double_to_f16(x);
    default: return static_cast<std::uint64_t>(static_cast<std::int64_t>(x));
  }
}

/// The engine's output for one expected tensor.
Tensor engine_output(const TensorSpec& spec, const TensorMap& golden, Engine e, std::uint64_t seed) {
  Tensor t = golden.at(spec.name);
  const std::int64_t n = t.numel();
  const bool is_float = dtype_is_float(t.dtype);
  if (e == Engine::kAlternative && !spec.alternatives.empty()) {
    const Tensor& alt = golden.at(spec.alternatives.front().exact);
    for (std::int64_t j = 0; j < n; ++j) put_bits(t, j, encode(t.dtype, alt.get_f64(j)));
    return t;
  }
  for (std::int64_t j = 0; j < n; ++j) {
    const std::uint64_t h = mix(seed * 1000003u + static_cast<std::uint64_t>(j));
    if (e == Engine::kExact) break;
    if (e == Engine::kCoarse || e == Engine::kAlternative) {
      if (is_float) put_bits(t, j, encode(t.dtype, t.get_f64(j) * (1 + 0x1p-10)));
      continue;
    }
    if (h % 97 == 0 && is_float) {
      put_bits(t, j, nan_bits(t.dtype));
    } else if (h % 7 == 0) {
      put_bits(t, j, t.get_bits(j) + 1 + (h >> 8) % 5);  // 1 to 5 ulps (integers: + 1 to 5)
    }
  }
  return t;
}

/// The middle one of the distinct positions of the first expected tensor with positions.
std::optional<std::int64_t> middle_position(const CaseSpec& spec, const TensorMap& golden) {
  for (const auto& t : spec.expected) {
    for (const auto& ax : t.axes) {
      if (ax.positions.empty() || !golden.count(ax.positions)) continue;
      std::set<std::int64_t> v;
      const Tensor& p = golden.at(ax.positions);
      for (std::int64_t i = 0; i < p.numel(); ++i) v.insert(p.get_i64(i));
      if (v.size() < 2) continue;
      return *std::next(v.begin(), static_cast<std::ptrdiff_t>(v.size() / 2));
    }
  }
  return std::nullopt;
}

/// Compares every tensor report (and its HTML ratios) of the streaming verifier, at two chunk
/// sizes, with the legacy verifier's.
void expect_same_as_legacy(const CaseSpec& spec, const TensorMap& golden, const TensorMap& actual,
                           VerifyOptions opt, const std::string& what) {
  std::map<std::string, TensorReport> old;
  std::map<std::string, std::vector<double>> old_ratios;
  for (const auto& t : spec.expected) {
    auto it = actual.find(t.name);
    if (it == actual.end()) continue;
    old[t.name] = legacy::check_tensor(t, golden, it->second, opt, &old_ratios[t.name]);
  }
  for (std::int64_t chunk : {kVerifyChunkElements, std::int64_t{1021}, std::int64_t{1}}) {
    if (chunk == 1 && golden.size() > 40) continue;  // element by element: small cases only
    opt.chunk_elements = chunk;
    ElementRatios ratios;
    const CaseReport r = verify_case_with_ratios(spec, golden, actual, opt, ratios);
    for (const auto& t : r.tensors) {
      if (!old.count(t.name)) continue;
      const TensorReport& o = old.at(t.name);
      EXPECT_EQ(tensor_json(t).dump(), tensor_json(o).dump())
          << what << " tensor " << t.name << " chunk " << chunk;
      if (o.status == Verdict::kPass || o.status == Verdict::kFail) {
        EXPECT_TRUE(same_ratios(ratios[t.name], old_ratios.at(t.name)))
            << what << " tensor " << t.name << " chunk " << chunk;
      }
    }
  }
}

TEST(VerifyStream, SameReportsAsTheLegacyVerifierOnTheCommittedCatalog) {
  const auto entries = catalog_read(default_data_dir());
  ASSERT_GT(entries.size(), 100u);
  const auto& profs = profiles();
  int compared = 0, failing = 0, alternatives = 0, skipping = 0;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const LoadedCase lc = load_case(default_data_dir() / entries[i].manifest);
    // Cases with declared alternatives get an engine that follows one every other time.
    const bool has_alt = std::any_of(lc.spec.expected.begin(), lc.spec.expected.end(),
                                     [](const TensorSpec& t) { return !t.alternatives.empty(); });
    const Engine e = has_alt && i % 2 == 0 ? Engine::kAlternative : static_cast<Engine>(i % 4);
    TensorMap actual;
    for (const auto& t : lc.spec.expected) {
      actual.emplace(t.name, engine_output(t, lc.golden, e, i));
      alternatives += e == Engine::kAlternative && !t.alternatives.empty();
    }
    VerifyOptions opt;
    opt.profile = profs[(i / 4) % profs.size()].name;
    if (e == Engine::kNoisy && (i / 4) % 2 == 0) {
      opt.max_position = middle_position(lc.spec, lc.golden);
      skipping += opt.max_position.has_value();
    }
    expect_same_as_legacy(lc.spec, lc.golden, actual, opt, entries[i].id + " " + opt.profile);
    const CaseReport r = verify_case(lc.spec, lc.golden, actual, opt);
    failing += r.status == Verdict::kFail;
    ++compared;
  }
  // The catalog exercises what the comparison is for.
  EXPECT_EQ(compared, static_cast<int>(entries.size()));
  EXPECT_GT(failing, 20);
  EXPECT_GT(alternatives, 0);
  EXPECT_GT(skipping, 3);
}

/// A folder removed at scope exit.
class TempDir {
 public:
  TempDir() {
    static int counter = 0;
    path_ = fs::temp_directory_path() / ("posenc-stream-test-" + std::to_string(::getpid()) +
                                         "-" + std::to_string(counter++));
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

fs::path tensors_file(const fs::path& manifest, const CaseSpec& spec) {
  return manifest.parent_path() / spec.tensors_file;
}

/// verify_case from files (what `posenc verify` runs), with the golden tensors hashed while
/// they stream.
CaseReport verify_files(const fs::path& manifest, const fs::path& actual, VerifyOptions opt,
                        std::uint64_t* peak = nullptr) {
  const CaseSpec spec = case_spec_read(manifest);
  FileSource golden, out;
  const fs::path tensors = tensors_file(manifest, spec);
  golden.add_safetensors(tensors);
  golden.start_golden_check(spec, tensors.string());
  out.add_safetensors(actual);
  const CaseReport r = verify_case(spec, golden, out, opt);
  golden.finish_golden_check(spec, tensors.string());
  if (peak) *peak = golden.peak_buffer_bytes() + out.peak_buffer_bytes();
  return r;
}

TEST(VerifyStream, FilesGiveTheInMemoryReportOnTheCommittedCatalog) {
  TempDir tmp;
  const auto entries = catalog_read(default_data_dir());
  for (std::size_t i = 0; i < entries.size(); i += 3) {  // every third case: ~50 cases
    const fs::path manifest = default_data_dir() / entries[i].manifest;
    const LoadedCase lc = load_case(manifest);
    std::vector<Tensor> out;
    for (const auto& t : lc.spec.expected) out.push_back(engine_output(t, lc.golden, Engine::kNoisy, i));
    const fs::path actual = tmp.path() / (entries[i].id + ".safetensors");
    write_file_atomic(actual, safetensors_encode(out));
    VerifyOptions opt;
    opt.profile = profiles()[i % profiles().size()].name;
    opt.chunk_elements = 5000;  // >= 4096: the golden bytes hashed on a second thread
    const CaseReport want = verify_case(lc.spec, lc.golden, tensor_map(std::move(out)), opt);
    const CaseReport got = verify_files(manifest, actual, opt);
    EXPECT_EQ(case_report_json(got, true).dump(), case_report_json(want, true).dump())
        << entries[i].id;
    fs::remove(actual);
  }
}

/// Where a tensor's bytes lie in a safetensors file.
std::map<std::string, TensorEntry> layout(const fs::path& p) {
  const InputFile f(p);
  std::map<std::string, TensorEntry> m;
  for (auto& e : safetensors_index(f).entries) m[e.name] = e;
  return m;
}

/// The manifest of a committed case, or an empty path when the catalog has no such id.
fs::path committed_manifest(const std::string& id) {
  for (const auto& e : catalog_read(default_data_dir())) {
    if (e.id == id) return default_data_dir() / e.manifest;
  }
  return {};
}

TEST(VerifyStream, AGoldenTensorWithAFlippedByteIsRefusedWhileStreaming) {
  // Every tensor of the file: the expected tensors and companions verify reads chunk by chunk,
  // the inputs and the other profiles' companions it never judges (hashed at the end).
  const fs::path manifest = committed_manifest("rope_half_d96_r24_b1e4_neox_20b_f32");
  ASSERT_FALSE(manifest.empty());
  const LoadedCase lc = load_case(manifest);
  TempDir tmp;
  std::vector<Tensor> out;
  for (const auto& t : lc.spec.expected) out.push_back(lc.golden.at(t.name));
  const fs::path actual = tmp.path() / "out.safetensors";
  write_file_atomic(actual, safetensors_encode(out));
  VerifyOptions opt;
  opt.chunk_elements = 64;
  EXPECT_EQ(verify_files(manifest, actual, opt).status, Verdict::kPass);
  const fs::path original = tensors_file(manifest, lc.spec);
  int refused = 0;
  for (const auto& [name, e] : layout(original)) {
    if (e.bytes == 0) continue;
    const fs::path dir = tmp.path() / ("flip-" + name);
    fs::create_directories(dir);
    fs::copy_file(manifest, dir / manifest.filename());
    std::vector<std::uint8_t> bytes = read_file(original);
    bytes[e.offset + e.bytes / 2] ^= 0x10;
    write_file_atomic(dir / lc.spec.tensors_file, bytes);
    try {
      verify_files(dir / manifest.filename(), actual, opt);
      ADD_FAILURE() << "a flipped byte in " << name << " was accepted";
    } catch (const GoldenFileError& err) {
      EXPECT_NE(std::string(err.what()).find("\"" + name + "\" does not match its SHA-256"),
                std::string::npos) << err.what();
      ++refused;
    }
  }
  EXPECT_GT(refused, 10);
}

TEST(VerifyStream, MemoryIsChunksNotTensors) {
  // A tensor of 64 chunks: the buffers held at once are one chunk of each tensor in play
  // (actual, exact, cond, an extra; for the worst element one element more), far below the
  // tensors' size.
  const fs::path manifest = committed_manifest("rope_half_d96_r24_b1e4_neox_20b_dense512_f32");
  ASSERT_FALSE(manifest.empty());
  const LoadedCase lc = load_case(manifest);
  TempDir tmp;
  std::vector<Tensor> out;
  std::uint64_t largest = 0, in_play = 0;
  for (const auto& t : lc.spec.expected) {
    out.push_back(engine_output(t, lc.golden, Engine::kNoisy, 7));
    const std::uint64_t bytes = out.back().data.size();
    largest = std::max(largest, bytes);
  }
  const fs::path actual = tmp.path() / "out.safetensors";
  write_file_atomic(actual, safetensors_encode(out));
  VerifyOptions opt;
  opt.profile = "fp32";
  opt.chunk_elements = static_cast<std::int64_t>(largest / 4 / 64);
  std::uint64_t peak = 0;
  const CaseReport r = verify_files(manifest, actual, opt, &peak);
  EXPECT_EQ(r.status, Verdict::kFail);
  // Bound: chunk x (4 + 8 + 4 + 4 bytes: actual f32, exact f64, cond f32, extra f32; 12 more
  // for a declared alternative's exact and cond) plus the small tensors loaded whole
  // (positions: 8 bytes per token).
  for (const auto& t : lc.spec.inputs) {
    if (t.shape.size() == 1) in_play += 8 * static_cast<std::uint64_t>(t.shape[0]);
  }
  const std::uint64_t bound = static_cast<std::uint64_t>(opt.chunk_elements) * 32 + in_play;
  EXPECT_LE(peak, bound);
  EXPECT_LT(peak, largest);
  EXPECT_GT(largest, 100000u);
}

}  // namespace
}  // namespace posenc::golden
