// One implementation judges every tensor in chunks of VerifyOptions::chunk_elements elements
// read from a TensorSource (golden/verify/tensor_source.hpp): the in-memory overloads of
// verify_case run it on views of the tensors, `posenc verify` on files (FileSource). Per chunk:
// typed conversion loops (no per-element dtype switch), then one judging loop per convention
// (the default and each declared alternative, all in the same pass: the engine is judged by
// the one with fewest elements over budget, the default on a tie), element positions from
// per-axis rank tables. The report does not depend on the chunk size or the thread count
// (with more than one thread allowed, a second thread hashes the chunk's golden bytes while
// this one judges them).
// Memory besides the chunk buffers: the per-axis position tables (8 + 4 bytes per axis
// coordinate), one PositionAcc (24 bytes) per distinct position and convention, the chunk's
// scratch (8 double arrays, one int32, one byte array: 69 bytes x 8192 elements); the HTML
// ratios (verify_case_with_ratios) keep 8 bytes per element and convention.
#include "golden/verify/verify.hpp"
#include "golden/verify/element_ratios.hpp"
#include "golden/format/profiles.hpp"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstring>
#include <exception>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <stdexcept>

#ifdef _OPENMP
#include <omp.h>
#endif
#include <set>
#include <sstream>

#include "reference/common/errors.hpp"
#include "reference/common/mutant.hpp"

namespace posenc::golden {

std::string to_string(Verdict v) {
  switch (v) {
    case Verdict::kPass: return "PASS";
    case Verdict::kFail: return "FAIL";
    case Verdict::kMissing: return "MISSING";
    case Verdict::kError: return "ERROR";
    case Verdict::kNotApplicable: return "N/A";
    case Verdict::kNoOutput: return "NO OUTPUT";
    case Verdict::kInconclusive:
      return "INCONCLUSIVE";
  }
  return "ERROR";
}

TensorMap tensor_map(std::vector<Tensor> tensors) {
  TensorMap m;
  for (auto& t : tensors) {
    std::string name = t.name;
    m.emplace(std::move(name), std::move(t));
  }
  return m;
}

namespace {

bool checked(const TensorReport& t) { return judged(t.status); }

}  // namespace

int CaseReport::n_checked() const {
  int n = 0;
  for (const auto& t : tensors) n += checked(t);
  return n;
}

double CaseReport::worst_ratio() const {
  double w = 0;
  for (const auto& t : tensors) {
    if (checked(t)) w = std::max(w, t.max_ratio);
  }
  return w;
}

namespace {

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

/// Small golden tensors (positions, labels, trace tables) loaded whole from the source once.
class SmallTensors {
 public:
  explicit SmallTensors(TensorSource& src) : src_(src) {}
  /// nullptr when the source has no such tensor.
  const Tensor* get(const std::string& name) {
    auto it = cache_.find(name);
    if (it != cache_.end()) return &it->second;
    if (!src_.contains(name)) return nullptr;
    return &cache_.emplace(name, src_.load(name)).first->second;
  }
  TensorSource& source() { return src_; }

 private:
  TensorSource& src_;
  std::map<std::string, Tensor> cache_;
};

std::string describe(const TensorSpec& spec, SmallTensors& golden,
                     const std::vector<std::int64_t>& coords) {
  std::ostringstream os;
  for (std::size_t k = 0; k < coords.size(); ++k) {
    if (k) os << ", ";
    const AxisSpec* ax = k < spec.axes.size() ? &spec.axes[k] : nullptr;
    os << (ax && !ax->name.empty() ? ax->name : "dim" + std::to_string(k)) << ' ' << coords[k];
    if (!ax) continue;
    if (!ax->positions.empty()) {
      const Tensor* t = golden.get(ax->positions);
      if (t && coords[k] < t->numel()) os << " (position " << t->get_i64(coords[k]) << ')';
    }
    for (const auto& label : ax->labels) {
      const Tensor* t = golden.get(label);
      if (t && coords[k] < t->numel()) os << " (" << label << ' ' << t->get_i64(coords[k]) << ')';
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

/// The position of the coordinate on the axis called `name` that carries positions, if any.
std::optional<std::int64_t> axis_position(const TensorSpec& spec, SmallTensors& golden,
                                          const std::vector<std::int64_t>& coords,
                                          const std::string& name) {
  for (std::size_t k = 0; k < spec.axes.size() && k < coords.size(); ++k) {
    if (spec.axes[k].name != name || spec.axes[k].positions.empty()) continue;
    const Tensor* t = golden.get(spec.axes[k].positions);
    if (t && coords[k] < t->numel()) return t->get_i64(coords[k]);
  }
  return std::nullopt;
}

std::int64_t numel_of(const std::vector<std::int64_t>& shape) {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

/// The golden tensor's entry; std::out_of_range when absent (as TensorMap::at).
const TensorEntry& need(TensorSource& src, const std::string& name) {
  const TensorEntry* e = src.find(name);
  if (e == nullptr) throw std::out_of_range("golden tensor \"" + name + "\" is missing");
  return *e;
}

/// The positions of a tensor's elements, as tables per axis: an element's position is the
/// largest of its coordinates' positions (a score between positions 5 and 4095 is judged at
/// 4095). Positions are numbered by their rank among the distinct positions of the tensor's
/// axes, so that the largest position is the largest rank. `any` is false when no axis
/// carries positions.
struct PositionTables {
  bool any = false;
  std::vector<std::int64_t> values;               // distinct positions, ascending
  std::vector<std::vector<std::int32_t>> rank;    // per axis: rank of each coordinate's position
};

PositionTables position_tables(const TensorSpec& spec, SmallTensors& golden) {
  PositionTables p;
  p.rank.resize(spec.shape.size());
  std::vector<std::vector<std::int64_t>> axis_pos(spec.shape.size());
  for (std::size_t k = 0; k < spec.axes.size() && k < spec.shape.size(); ++k) {
    if (spec.axes[k].positions.empty()) continue;
    const TensorEntry* e = golden.source().find(spec.axes[k].positions);
    if (e == nullptr || numel_of(e->shape) != spec.shape[k]) continue;
    const Tensor* t = golden.get(spec.axes[k].positions);
    for (std::int64_t i = 0; i < spec.shape[k]; ++i) axis_pos[k].push_back(t->get_i64(i));
    p.values.insert(p.values.end(), axis_pos[k].begin(), axis_pos[k].end());
    p.any = true;
  }
  std::sort(p.values.begin(), p.values.end());
  p.values.erase(std::unique(p.values.begin(), p.values.end()), p.values.end());
  for (std::size_t k = 0; k < axis_pos.size(); ++k) {
    for (std::int64_t v : axis_pos[k]) {
      p.rank[k].push_back(static_cast<std::int32_t>(
          std::lower_bound(p.values.begin(), p.values.end(), v) - p.values.begin()));
    }
  }
  return p;
}

/// Position ranks of the elements [b, e) of a tensor of `shape` (row-major), into out[0, e - b):
/// one pass over runs of the last axis.
void chunk_position_ranks(const PositionTables& p, const std::vector<std::int64_t>& shape,
                          std::int64_t b, std::int64_t e, std::int32_t* out) {
  std::vector<std::int64_t> c = coords_of(shape, b);
  const std::size_t last = shape.size() - 1;
  const std::int64_t inner = shape[last];
  for (std::int64_t j = b; j < e;) {
    std::int32_t base = -1;
    for (std::size_t k = 0; k < last; ++k) {
      if (!p.rank[k].empty()) base = std::max(base, p.rank[k][c[k]]);
    }
    const std::int64_t run = std::min(inner - c[last], e - j);
    std::int32_t* o = out + (j - b);
    if (!p.rank[last].empty()) {
      const std::int32_t* r = p.rank[last].data() + c[last];
      for (std::int64_t i = 0; i < run; ++i) o[i] = std::max(base, r[i]);
    } else {
      std::fill(o, o + run, base);
    }
    j += run;
    c[last] += run;
    if (c[last] == inner) {
      c[last] = 0;
      for (std::size_t k = last; k-- > 0;) {  // odometer
        if (++c[k] < shape[k]) break;
        c[k] = 0;
      }
    }
  }
}

/// Elements [0, n) of raw little-endian bytes of `dtype` as doubles (exact for float dtypes,
/// as Tensor::get_f64): one typed loop per dtype.
void to_f64(DType dtype, std::span<const std::uint8_t> bytes, std::int64_t n, double* out) {
  const std::uint8_t* p = bytes.data();
  auto loop = [&](auto zero, auto convert) {
    using T = decltype(zero);
    for (std::int64_t j = 0; j < n; ++j) {
      T v;
      std::memcpy(&v, p + j * sizeof(T), sizeof(T));
      out[j] = convert(v);
    }
  };
  switch (dtype) {
    case DType::kF64: std::memcpy(out, p, static_cast<std::size_t>(n) * 8); break;
    case DType::kF32: loop(0.0f, [](float v) { return static_cast<double>(v); }); break;
    case DType::kBF16:
      loop(std::uint16_t{0}, [](std::uint16_t v) { return static_cast<double>(bf16_to_float(v)); });
      break;
    case DType::kF16: loop(std::uint16_t{0}, [](std::uint16_t v) { return f16_to_double(v); }); break;
    case DType::kI64: loop(std::int64_t{0}, [](std::int64_t v) { return static_cast<double>(v); }); break;
    case DType::kI32: loop(std::int32_t{0}, [](std::int32_t v) { return static_cast<double>(v); }); break;
  }
}

/// eq[j] = elements j of a and b have the same bit pattern (size: the dtype's bytes).
void bits_equal(int size, const std::uint8_t* a, const std::uint8_t* b, std::int64_t n,
                std::uint8_t* eq) {
  auto loop = [&](auto zero) {
    using T = decltype(zero);
    for (std::int64_t j = 0; j < n; ++j) {
      T x, y;
      std::memcpy(&x, a + j * sizeof(T), sizeof(T));
      std::memcpy(&y, b + j * sizeof(T), sizeof(T));
      eq[j] = x == y;
    }
  };
  if (size == 8) loop(std::uint64_t{0});
  if (size == 4) loop(std::uint32_t{0});
  if (size == 2) loop(std::uint16_t{0});
}

/// dtype_ulp(t, x) on the bits of x (the same value; ilogb and ldexp only off the fast path).
inline double ulp_of(int digits, int min_exponent, double x) {
  const std::uint64_t bits = std::bit_cast<std::uint64_t>(x);
  const int biased = static_cast<int>((bits >> 52) & 0x7ff);
  int e = min_exponent;
  if (biased != 0x7ff && x != 0.0) {
    e = std::max(biased == 0 ? std::ilogb(x) : biased - 1023, min_exponent);
  }
  const int k = e - digits + 1;
  if (k >= -1022) return std::bit_cast<double>(static_cast<std::uint64_t>(k + 1023) << 52);
  return std::ldexp(1.0, k);
}

/// Element at p of `dtype` as a double (Tensor::get_f64 of a one-element tensor).
double element_f64(DType dtype, std::span<const std::uint8_t> bytes) {
  double v = 0;
  to_f64(dtype, bytes, 1, &v);
  return v;
}

/// One convention's running account of a tensor, over the chunks seen so far.
struct PositionAcc {
  double worst_ratio = 0;
  std::int64_t n = 0, n_over = 0;
};
struct ConventionAcc {
  std::string exact, cond;                      // its companions ("" for none)
  std::int64_t n_over_all = 0, n_nan = 0, n_inf = 0;  // every element, skipped ones included
  std::int64_t n = 0, n_over = 0, n_skipped = 0;  // judged elements
  double worst_ratio = -1;
  std::int64_t worst = -1;
  double worst_diff = 0, worst_budget = 0;
  std::vector<PositionAcc> by_position;  // per position rank
  std::vector<double> ratios;            // every element, when asked for
};

/// What stays fixed while a tensor's chunks are judged.
struct JudgeSetup {
  DType dtype;
  CheckKind kind;
  bool is_float;
  double bound, ulps, eps;
  int digits, min_exponent;
  bool nan_passes, lenient;
};

/// Elements judged per pass: the scratch arrays of a block stay in the core's cache.
constexpr std::int64_t kJudgeBlock = 8192;

/// The second thread of a tensor's verification: run(fn) hands it fn (hashing a chunk's golden
/// bytes), wait() returns when fn is done and rethrows what it threw. One thread for all of a
/// tensor's chunks, not an OpenMP region (OpenMP's waiting threads spin between chunks: 40 % of
/// the cycles in libgomp on a loaded machine) nor a thread per chunk (std::async per chunk:
/// 0.73-0.99 GB/s on the bench's 1 GB case, 1.15-1.19 GB/s with this one thread).
class HashWorker {
 public:
  HashWorker() : thread_([this] { loop(); }) {}
  ~HashWorker() {
    {
      std::lock_guard<std::mutex> lock(m_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  HashWorker(const HashWorker&) = delete;
  HashWorker& operator=(const HashWorker&) = delete;

  void run(std::function<void()> fn) {
    {
      std::lock_guard<std::mutex> lock(m_);
      fn_ = std::move(fn);
      busy_ = true;
    }
    cv_.notify_all();
  }
  void wait() {
    std::unique_lock<std::mutex> lock(m_);
    cv_.wait(lock, [this] { return !busy_; });
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  }

 private:
  void loop() {
    std::unique_lock<std::mutex> lock(m_);
    for (;;) {
      cv_.wait(lock, [this] { return stop_ || busy_; });
      if (!busy_) return;  // stop, nothing pending
      std::function<void()> fn = std::move(fn_);
      lock.unlock();
      std::exception_ptr error;
      try {
        fn();
      } catch (...) {
        error = std::current_exception();
      }
      lock.lock();
      error_ = error;
      busy_ = false;
      cv_.notify_all();
    }
  }

  std::mutex m_;
  std::condition_variable cv_;
  std::function<void()> fn_;
  bool busy_ = false, stop_ = false;
  std::exception_ptr error_;
  std::thread thread_;  // last: started once the members above exist
};

/// "non-finite output: 2 NaN, 1 +-Inf element(s): non-finite values never pass".
std::string nonfinite_words(std::int64_t n_nan, std::int64_t n_inf) {
  std::string s = "non-finite output: ";
  if (n_nan > 0) s += std::to_string(n_nan) + " NaN";
  if (n_inf > 0) s += std::string(n_nan > 0 ? ", " : "") + std::to_string(n_inf) + " +-Inf";
  return s + " element(s): non-finite values never pass";
}

/// Scratch arrays of one block.
struct ChunkScratch {
  std::vector<double> a, w, x, c, extra, ratio, diff, budget;
  std::vector<std::int32_t> pos;
  std::vector<std::uint8_t> eq;
  void resize(std::size_t m) {
    for (auto* v : {&a, &w, &x, &c, &extra, &ratio, &diff, &budget}) v->resize(m);
    pos.resize(m);
    eq.resize(m);
  }
};

/// |y - y*| / budget (ratio), |y - y*| (diff) and the budget of the chunk's m elements against
/// one convention (s.x: its exact values, s.c: its cond values) as the verifier defines them
/// (golden/format/manifest.hpp); returns the NaN count and adds the +-Inf count to *n_inf.
std::int64_t judge_chunk(const JudgeSetup& js, ChunkScratch& s, std::int64_t m, bool has_extra,
                         std::int64_t* n_inf) {
  std::int64_t n_nan = 0;
  if (js.is_float && !POSENC_MUTANT("golden_verify_inf_uncounted")) {
    for (std::int64_t j = 0; j < m; ++j) *n_inf += std::isinf(s.a[j]);
  }
  const double* a = s.a.data();
  double* ratio = s.ratio.data();
  double* diff = s.diff.data();
  double* budget = s.budget.data();
  if (js.kind == CheckKind::kExact) {
    // Bits must match. An integer tensor's ratio is 2 |difference| (as against a budget of 1/2,
    // which only equal integers meet), so a report ranks and prints how far it is off.
    const bool integer_ratio =
        !js.is_float && !POSENC_MUTANT("golden_verify_integer_ratio_infinite");
    for (std::int64_t j = 0; j < m; ++j) {
      double q, d = 0;
      if (js.is_float && std::isnan(a[j])) {
        q = js.nan_passes ? 0.0 : INFINITY;
        d = NAN;
        ++n_nan;
      } else {
        d = std::fabs(a[j] - s.w[j]);
        q = s.eq[j] ? 0.0 : (integer_ratio && d > 0 ? 2 * d : INFINITY);
        if (js.lenient) q = 0.0;
      }
      ratio[j] = q;
      diff[j] = d;
      budget[j] = integer_ratio ? 0.5 : 0.0;
    }
    return n_nan;
  }
  const bool ulp_kind = js.kind == CheckKind::kUlp;
  const double* x = s.x.data();
  const double* c = s.c.data();
  const double* extra = s.extra.data();
  for (std::int64_t j = 0; j < m; ++j) {
    double q, d, bud = 0;
    if (std::isnan(a[j])) {
      q = js.nan_passes ? 0.0 : INFINITY;
      d = NAN;
      ++n_nan;
    } else {
      const double xj = x[j];
      if (ulp_kind) {
        bud = js.bound * ulp_of(js.digits, js.min_exponent, xj);
      } else {
        const double cj = c[j];
        bud = cj > 0 ? js.bound * js.eps * cj + js.ulps * ulp_of(js.digits, js.min_exponent, xj)
                     : 0.0;
      }
      if (has_extra) bud += extra[j];
      d = std::fabs(a[j] - xj);
      if (d == 0.0) {
        q = 0.0;
      } else if (!std::isfinite(d) || !(bud > 0.0)) {
        q = INFINITY;
      } else {
        q = d / bud;
      }
    }
    ratio[j] = q;
    diff[j] = d;
    budget[j] = bud;
  }
  return n_nan;
}

/// Adds the chunk's judged elements [cb, cb + m) (ratios in s.ratio) to one convention's
/// account: counts, worst element, per-position stats; skip / skip_count per position rank.
/// Elements come in runs of one position rank (a row of the last axis): each run is counted in
/// registers and added once (a counter in memory incremented per element made every element
/// wait for the previous one's store: 38 % of the verify loop's time).
void accumulate(ConventionAcc& acc, const ChunkScratch& s, std::int64_t cb, std::int64_t m,
                bool has_positions, const std::vector<std::uint8_t>& skip,
                const std::vector<std::uint8_t>& skip_count, bool keep_ratios) {
  const double* ratio = s.ratio.data();
  for (std::int64_t j = 0; j < m;) {
    const std::int32_t p = has_positions ? s.pos[j] : 0;
    std::int64_t e = j + 1;
    if (has_positions) {
      while (e < m && s.pos[e] == p) ++e;
    } else {
      e = m;
    }
    // The run [j, e): one position rank.
    std::int64_t n_over = 0;
    for (std::int64_t i = j; i < e; ++i) n_over += ratio[i] > 1.0;
    acc.n_over_all += n_over;
    if (keep_ratios) {
      const bool nan = has_positions && skip[p];
      for (std::int64_t i = j; i < e; ++i) acc.ratios[cb + i] = nan ? std::nan("") : ratio[i];
    }
    if (has_positions && skip_count[p]) {
      acc.n_skipped += e - j;
      j = e;
      continue;
    }
    acc.n += e - j;
    acc.n_over += n_over;
    double worst = acc.worst_ratio, run_max = 0;
    std::int64_t at = -1;
    for (std::int64_t i = j; i < e; ++i) {
      const double q = ratio[i];
      run_max = std::max(run_max, q);
      if (q > worst) {  // strict: the first of equal ratios stays the worst
        worst = q;
        at = i;
      }
    }
    if (at >= 0) {
      acc.worst_ratio = worst;
      acc.worst = cb + at;
      acc.worst_diff = s.diff[at];
      acc.worst_budget = s.budget[at];
    }
    if (has_positions) {
      PositionAcc& ps = acc.by_position[p];
      ps.worst_ratio = std::max(ps.worst_ratio, run_max);
      ps.n += e - j;
      ps.n_over += n_over;
    }
    j = e;
  }
}

/// Stage 1: the report's fields known before any element is read; N/A (the profile does not
/// apply) or ERROR (dtype, shape) ends the tensor's judgement here (returns false).
bool check_header(const TensorSpec& spec, const ProfileBudget& b, const TensorEntry& act,
                  const VerifyOptions& opt, TensorReport& r) {
  r.name = spec.name;
  r.stage = spec.stage;
  r.kind = spec.check.kind;
  r.integer = !dtype_is_float(spec.dtype);
  r.bound = b.bound;
  r.has_extra = !b.extra.empty();
  if (!b.applies) {
    r.status = Verdict::kNotApplicable;
    r.message = "profile " + opt.profile + " does not apply: " + b.not_applicable;
    return false;
  }
  if (act.dtype != spec.dtype) {
    r.status = Verdict::kError;
    r.message = "dtype is " + std::string(dtype_short(act.dtype)) + ", the case expects " +
                std::string(dtype_short(spec.dtype));
    return false;
  }
  if (act.shape != spec.shape) {
    r.status = Verdict::kError;
    r.message = "shape is " + shape_str(act.shape) + ", the case expects " + shape_str(spec.shape);
    return false;
  }
  return true;
}

/// Stage 2: the constants of the per-element judgement (the mutants that loosen it included).
JudgeSetup judge_setup(const TensorSpec& spec, const ProfileBudget& b) {
  JudgeSetup js;
  js.dtype = spec.dtype;
  js.kind = spec.check.kind;
  js.is_float = dtype_is_float(spec.dtype);
  js.bound = b.bound;
  js.lenient = POSENC_MUTANT("golden_verify_lenient");
  if (js.lenient) js.bound = js.bound * 1e12 + 1e12;  // passes anything
  js.ulps = POSENC_MUTANT("golden_verify_ulps_ignored") ? 0.0 : b.ulps;
  js.eps = dtype_eps(spec.dtype);
  js.digits = dtype_digits(spec.dtype);
  js.min_exponent = dtype_min_exponent(spec.dtype);
  js.nan_passes = POSENC_MUTANT("golden_verify_nan_passes");
  return js;
}

/// What the stages of one tensor's judgement share (check_tensor builds it).
struct TensorJudge {
  const TensorSpec& spec;
  SmallTensors& golden;
  TensorSource& actual;
  const std::string& actual_name;
  const TensorEntry& act;
  JudgeSetup js;
  const std::string* extra = nullptr;  // the profile's extra-budget companion, if any
  std::int64_t n = 0;                  // elements
  PositionTables pt;
  // Per position rank: beyond --max-position (skip) and as counted (skip_count: the mutant
  // golden_verify_max_position_ignored counts them as judged).
  std::vector<std::uint8_t> skip, skip_count;
  // The default convention, then each declared alternative; the engine is judged by the one
  // it follows (fewest elements over budget, the default on a tie).
  std::vector<ConventionAcc> conv;
};

/// Stage 3: the conventions' accounts, the position tables and the --max-position skips.
void start_accounts(TensorJudge& tj, const VerifyOptions& opt, bool keep_ratios) {
  const TensorSpec& spec = tj.spec;
  tj.conv.resize(1);
  tj.conv[0].exact = spec.exact;
  tj.conv[0].cond = spec.cond;
  for (const auto& alt : spec.alternatives) {
    if (POSENC_MUTANT("golden_verify_alternatives_ignored")) break;
    tj.conv.emplace_back();
    tj.conv.back().exact = alt.exact;
    tj.conv.back().cond = alt.cond;
  }
  tj.n = numel_of(tj.act.shape);
  if (tj.n > 0) tj.pt = position_tables(spec, tj.golden);
  const PositionTables& pt = tj.pt;
  tj.skip.assign(pt.values.size(), 0);
  tj.skip_count.assign(pt.values.size(), 0);
  for (std::size_t p = 0; p < pt.values.size(); ++p) {
    tj.skip[p] = opt.max_position && pt.values[p] > *opt.max_position;
    tj.skip_count[p] = tj.skip[p] && !POSENC_MUTANT("golden_verify_max_position_ignored");
  }
  for (auto& acc : tj.conv) {
    acc.by_position.resize(pt.values.size());
    if (keep_ratios) acc.ratios.resize(static_cast<std::size_t>(tj.n));
  }
}

/// Stage 4: reads every chunk of the tensor and its companions and judges it against every
/// convention, block by block (the golden bytes hashed on a second thread meanwhile).
void judge_chunks(TensorJudge& tj, const VerifyOptions& opt, bool keep_ratios) {
  const TensorSpec& spec = tj.spec;
  const TensorEntry& act = tj.act;
  const JudgeSetup& js = tj.js;
  const std::string* extra = tj.extra;
  const PositionTables& pt = tj.pt;
  std::vector<ConventionAcc>& conv = tj.conv;
  TensorSource& gold = tj.golden.source();
  const std::int64_t n = tj.n;
  const std::int64_t chunk = opt.chunk_elements;
  if (chunk < 1) throw_invalid("verify_case", "VerifyOptions::chunk_elements must be >= 1", chunk);
  ChunkScratch s;
  s.resize(static_cast<std::size_t>(std::min({n, chunk, kJudgeBlock})));
  const bool exact_kind = js.kind == CheckKind::kExact;
  // Only a file source has deferred work (hashing) for a second thread.
  const bool hashes = dynamic_cast<FileSource*>(&gold) != nullptr;
  int threads = 1;
#ifdef _OPENMP
  threads = omp_get_max_threads();
#endif
  // Conventions' companions and their dtypes.
  // (An exact check's alternatives: their f64 exact companion, judged by value.)
  std::vector<DType> x_dtype, c_dtype;
  for (std::size_t i = 0; i < conv.size(); ++i) {
    if (exact_kind) {
      x_dtype.push_back(i == 0 ? spec.dtype : need(gold, conv[i].exact).dtype);
      continue;
    }
    x_dtype.push_back(need(gold, conv[i].exact).dtype);
    if (js.kind == CheckKind::kConditioned) c_dtype.push_back(need(gold, conv[i].cond).dtype);
  }
  const DType extra_dtype = extra ? need(gold, *extra).dtype : DType::kF64;
  if (exact_kind) need(gold, spec.name);
  std::vector<std::span<const std::uint8_t>> xb(conv.size()), cbytes(conv.size());
  std::optional<HashWorker> worker;  // started at the first chunk worth a second thread
  for (std::int64_t cb = 0; cb < n; cb += chunk) {
    const std::int64_t ce = std::min(n, cb + chunk);
    const std::int64_t m = ce - cb;
    // Every range this chunk needs, read first; then the golden bytes are hashed (flush) on a
    // second thread while this one judges them.
    const std::span<const std::uint8_t> abytes = tj.actual.read(tj.actual_name, cb, ce);
    const std::span<const std::uint8_t> wbytes =
        exact_kind ? gold.read(spec.name, cb, ce) : std::span<const std::uint8_t>();
    const std::span<const std::uint8_t> ebytes =
        extra ? gold.read(*extra, cb, ce) : std::span<const std::uint8_t>();
    for (std::size_t i = 0; i < conv.size(); ++i) {
      if (exact_kind) {
        if (i > 0) xb[i] = gold.read(conv[i].exact, cb, ce);
        continue;
      }
      xb[i] = gold.read(conv[i].exact, cb, ce);
      if (js.kind == CheckKind::kConditioned) cbytes[i] = gold.read(conv[i].cond, cb, ce);
    }
    // Judged in blocks of kJudgeBlock elements, every pass of a block while it is in cache.
    auto judge_all = [&] {
      for (std::int64_t sb = 0; sb < m; sb += kJudgeBlock) {
        const std::int64_t mb = std::min(kJudgeBlock, m - sb);
        auto part = [&](std::span<const std::uint8_t> bytes, DType t) {
          const std::size_t size = static_cast<std::size_t>(dtype_size(t));
          return bytes.subspan(static_cast<std::size_t>(sb) * size, static_cast<std::size_t>(mb) * size);
        };
        if (js.is_float || exact_kind) to_f64(act.dtype, part(abytes, act.dtype), mb, s.a.data());
        if (extra) to_f64(extra_dtype, part(ebytes, extra_dtype), mb, s.extra.data());
        if (pt.any) chunk_position_ranks(pt, spec.shape, cb + sb, cb + sb + mb, s.pos.data());
        for (std::size_t i = 0; i < conv.size(); ++i) {
          ConventionAcc& acc = conv[i];
          if (exact_kind && i == 0) {  // the expected bits
            bits_equal(dtype_size(act.dtype), part(abytes, act.dtype).data(),
                       part(wbytes, act.dtype).data(), mb, s.eq.data());
            to_f64(spec.dtype, part(wbytes, spec.dtype), mb, s.w.data());
          } else if (exact_kind) {  // an alternative's values
            to_f64(x_dtype[i], part(xb[i], x_dtype[i]), mb, s.w.data());
            for (std::int64_t j = 0; j < mb; ++j) s.eq[j] = s.a[j] == s.w[j];
          }
          if (!exact_kind) {
            to_f64(x_dtype[i], part(xb[i], x_dtype[i]), mb, s.x.data());
            if (js.kind == CheckKind::kConditioned) to_f64(c_dtype[i], part(cbytes[i], c_dtype[i]), mb, s.c.data());
          }
          acc.n_nan += judge_chunk(js, s, mb, extra != nullptr, &acc.n_inf);
          accumulate(acc, s, cb + sb, mb, pt.any, tj.skip, tj.skip_count, keep_ratios);
        }
      }
    };
    if (hashes && threads > 1 && m >= 4096) {
      if (!worker) worker.emplace();
      worker->run([&gold] { gold.flush(); });
      try {
        judge_all();
      } catch (...) {
        try {
          worker->wait();
        } catch (...) {
        }
        throw;
      }
      worker->wait();
    } else {
      judge_all();
    }
  }
}

/// Stage 5: the convention the engine follows, and the report's counts, status, message and
/// per-position answer from its account. Returns that account.
ConventionAcc& report_counts(TensorJudge& tj, const ProfileBudget& b, TensorReport& r) {
  const TensorSpec& spec = tj.spec;
  std::vector<ConventionAcc>& conv = tj.conv;
  std::size_t best = 0;
  for (std::size_t i = 1; i < conv.size(); ++i) {
    if (conv[i].n_over_all < conv[best].n_over_all) best = i;
  }
  ConventionAcc& acc = conv[best];
  if (best > 0) r.convention = spec.alternatives[best - 1].name;
  r.n = acc.n;
  r.n_over = acc.n_over;
  r.n_skipped = acc.n_skipped;
  r.n_nan = acc.n_nan;
  r.n_inf = acc.n_inf;
  r.max_ratio = acc.worst_ratio < 0 ? 0 : acc.worst_ratio;
  // Non-finite values never pass, not even at positions the run does not judge (beyond
  // --max-position): there the ratio skips them, so the counts decide.
  const bool nonfinite =
      r.n_inf > 0 || (r.n_nan > 0 && !POSENC_MUTANT("golden_verify_nan_passes"));
  r.status = r.n_over == 0 && !nonfinite ? Verdict::kPass : Verdict::kFail;
  if (r.n_nan > 0 || r.n_inf > 0) {
    r.message = nonfinite_words(r.n_nan, r.n_inf);
  }
  if (r.convention != "default") {
    for (const auto& alt : spec.alternatives) {
      if (alt.name == r.convention) {
        r.message += (r.message.empty() ? "" : "; ") + std::string("follows the declared "
                     "alternative \"") + alt.name + "\": " + alt.description;
      }
    }
  }
  for (std::size_t p = 0; p < tj.pt.values.size(); ++p) {
    const PositionAcc& pa = acc.by_position[p];
    if (pa.n == 0) continue;
    PositionStat ps;
    ps.position = tj.pt.values[p];
    ps.worst_ratio = pa.worst_ratio;
    ps.n = pa.n;
    ps.n_over = pa.n_over;
    auto it = b.saturated.find(ps.position);
    if (it != b.saturated.end() && !POSENC_MUTANT("golden_verify_saturation_dropped")) ps.saturated = it->second;
    r.by_position.push_back(ps);
  }
  if (r.has_positions) {
    for (const auto& ps : r.by_position) {
      if (ps.n_over > 0) {
        r.first_fail_position = ps.position;
        if (!POSENC_MUTANT("golden_verify_first_fail_wrong")) break;
        continue;
      }
      r.passes_up_to_position = ps.position;
    }
  }
  return acc;
}

/// Stage 6: the worst element of the account: its values (read back), coordinates, where it
/// lies and, on a query-key tensor, its query and key positions.
void report_worst(TensorJudge& tj, const ConventionAcc& acc, TensorReport& r) {
  if (acc.worst < 0) return;
  const TensorSpec& spec = tj.spec;
  TensorSource& gold = tj.golden.source();
  const std::int64_t w = acc.worst;
  r.worst.index = w;
  r.worst.ratio = acc.worst_ratio;
  r.worst.actual = element_f64(tj.act.dtype, tj.actual.read(tj.actual_name, w, w + 1));
  r.worst.expected = element_f64(need(gold, spec.name).dtype, gold.read(spec.name, w, w + 1));
  r.worst.exact = spec.exact.empty()
                      ? r.worst.expected
                      : element_f64(need(gold, spec.exact).dtype, gold.read(spec.exact, w, w + 1));
  r.worst.abs_error = r.integer ? std::fabs(r.worst.actual - r.worst.exact) : acc.worst_diff;
  r.worst.budget = acc.worst_budget;
  r.worst.coords = coords_of(spec.shape, w);
  r.worst.where = describe(spec, tj.golden, r.worst.coords);
  const auto q = axis_position(spec, tj.golden, r.worst.coords, "query");
  const auto k = axis_position(spec, tj.golden, r.worst.coords, "key");
  if (q && k) {
    r.worst.query_position = q;
    r.worst.key_position = k;
  }
}

/// One expected tensor judged against the engine's (stages above, in order).
TensorReport check_tensor(const TensorSpec& spec, SmallTensors& golden, TensorSource& actual,
                          const std::string& actual_name, const VerifyOptions& opt,
                          std::vector<double>* keep_ratios = nullptr) {
  TensorReport r;
  const ProfileBudget& b = spec.check.profile(
      POSENC_MUTANT("golden_verify_na_uses_strict") && !spec.check.profile(opt.profile).applies
          ? std::string("strict") : opt.profile);
  const TensorEntry& act = *actual.find(actual_name);
  if (!check_header(spec, b, act, opt, r)) return r;
  TensorJudge tj{spec, golden, actual, actual_name, act, judge_setup(spec, b)};
  tj.extra = b.extra.empty() ? nullptr : &b.extra;
  start_accounts(tj, opt, keep_ratios != nullptr);
  r.has_positions = tj.pt.any;
  judge_chunks(tj, opt, keep_ratios != nullptr);
  ConventionAcc& acc = report_counts(tj, b, r);
  if (keep_ratios) *keep_ratios = std::move(acc.ratios);
  report_worst(tj, acc, r);
  return r;
}

}  // namespace

std::string describe_element(const TensorSpec& spec, const TensorMap& golden, std::int64_t index) {
  MapSource src(golden);
  SmallTensors small(src);
  return describe(spec, small, coords_of(spec.shape, index));
}

void check_golden_tensors(const CaseSpec& spec, const TensorMap& golden,
                          const std::string& source) {
  std::set<std::string> listed;
  auto check = [&](const std::string& name, DType dtype, const std::vector<std::int64_t>& shape,
                   const std::string& sha) {
    listed.insert(name);
    auto it = golden.find(name);
    if (it == golden.end()) {
      throw GoldenFileError(source + ": golden tensor \"" + name + "\" named in the manifest is missing");
    }
    if (it->second.dtype != dtype) {
      throw GoldenFileError(source + ": golden tensor \"" + name + "\" has dtype " +
                            std::string(dtype_short(it->second.dtype)) + ", the manifest says " +
                            std::string(dtype_short(dtype)));
    }
    if (it->second.shape != shape) {
      throw GoldenFileError(source + ": golden tensor \"" + name + "\" has the wrong shape");
    }
    if (sha256_hex(it->second.data) != sha && !POSENC_MUTANT("golden_companion_hash_unchecked")) {
      throw GoldenFileError(source + ": golden tensor \"" + name +
                            "\" does not match its SHA-256 in the manifest (corrupted or tampered file?)");
    }
  };
  for (const auto& t : spec.inputs) check(t.name, t.dtype, t.shape, t.sha256);
  for (const auto& t : spec.expected) {
    check(t.name, t.dtype, t.shape, t.sha256);
    for (const auto& c : t.companions) check(c.name, c.dtype, t.shape, c.sha256);
  }
  for (const auto& [name, t] : golden) {
    if (!listed.count(name) && !POSENC_MUTANT("golden_unlisted_tensor_allowed")) {
      throw GoldenFileError(source + ": golden tensor \"" + name + "\" is not listed in the manifest");
    }
  }
}

namespace {

/// The first trace step with a failing tensor: its worst failing tensor, and the position and
/// slot of that tensor's worst element (from the step's positions / slots / cache_positions).
TraceStepReport trace_step_report(const CaseSpec& spec, SmallTensors& golden, const CaseReport& rep) {
  TraceStepReport tr;
  const auto& steps = spec.manifest.at("trace").at("steps");
  tr.n_steps = static_cast<int>(steps.size());
  auto lookup = [&](const std::string& name, std::int64_t b, std::int64_t i) -> std::optional<std::int64_t> {
    const TensorEntry* e = golden.source().find(name);
    if (e == nullptr || e->shape.size() != 2) return std::nullopt;
    const std::int64_t idx = b * e->shape[1] + i;
    if (b < 0 || i < 0 || i >= e->shape[1] || idx >= numel_of(e->shape)) return std::nullopt;
    return golden.get(name)->get_i64(idx);
  };
  for (const auto& js : steps) {
    const TensorReport* worst = nullptr;
    bool checked_any = false;
    for (const auto& name : js.at("expected")) {
      for (const auto& t : rep.tensors) {
        if (t.name != name.get<std::string>()) continue;
        checked_any |= checked(t);
        const bool bad = t.status == Verdict::kFail && !POSENC_MUTANT("golden_trace_step_report_blind");
        // An integer tensor (positions, slots) that differs explains the step: it ranks first.
        auto rank = [](const TensorReport& x) { return x.integer ? INFINITY : x.max_ratio; };
        if (bad && (!worst || rank(t) > rank(*worst))) worst = &t;
      }
    }
    tr.n_checked += checked_any;
    if (!worst) continue;
    tr.index = js.at("index").get<int>();
    tr.name = js.at("name").get<std::string>();
    tr.kind = js.at("kind").get<std::string>();
    tr.tensor = worst->name;
    tr.where = worst->worst.where;
    tr.ratio = worst->max_ratio;
    tr.integer = worst->integer;
    const auto& c = worst->worst.coords;
    if (c.size() >= 2) {
      tr.sequence = c[0];
      if (worst->stage == "cache") {
        tr.position = lookup(tr.name + ".cache_positions", c[0], c[1]);
      } else {
        tr.position = lookup(tr.name + ".positions", c[0], c[1]);
        if (!POSENC_MUTANT("golden_trace_slot_dropped")) tr.slot = lookup(tr.name + ".slots", c[0], c[1]);
        if (worst->stage == "positions" && std::isfinite(worst->worst.actual)) {
          tr.engine_position = static_cast<std::int64_t>(worst->worst.actual);
        }
      }
    }
    break;
  }
  return tr;
}

/// verify_case, also keeping every judged element's ratio per tensor when `ratios` is given.
CaseReport verify_case_impl(const CaseSpec& spec, TensorSource& golden, TensorSource& actual,
                            const VerifyOptions& opt, ElementRatios* ratios);

}  // namespace

CaseReport verify_case(const CaseSpec& spec, const TensorMap& golden, const TensorMap& actual,
                       const VerifyOptions& opt) {
  MapSource g(golden), a(actual);
  return verify_case_impl(spec, g, a, opt, nullptr);
}

CaseReport verify_case(const CaseSpec& spec, TensorSource& golden, TensorSource& actual,
                       const VerifyOptions& opt) {
  return verify_case_impl(spec, golden, actual, opt, nullptr);
}

CaseReport verify_case_with_ratios(const CaseSpec& spec, const TensorMap& golden,
                                   const TensorMap& actual, const VerifyOptions& opt,
                                   ElementRatios& ratios) {
  ratios.clear();
  MapSource g(golden), a(actual);
  return verify_case_impl(spec, g, a, opt, &ratios);
}

namespace {

CaseReport verify_case_one(const CaseSpec& spec, TensorSource& golden, TensorSource& actual,
                           const VerifyOptions& opt, ElementRatios* ratios);

std::string join(const std::vector<std::string>& v, const char* sep = ", ") {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : sep) + x;
  return s;
}

/// The resolution gap (manifest "mistake_detection", measured at generation): the mistakes
/// that the stages given show under some other profile but not under `profile`, where other
/// stages do show them (at a 16-bit target the effect of a mask or scale mistake on `out` can
/// stay within the eager budget while `probs` shows it). One note per set of stages to export.
void add_resolution_notes(const CaseSpec& spec, const std::string& profile,
                          const std::set<std::string>& given, std::vector<std::string>& notes) {
  auto it = spec.mistake_stages.find(profile);
  if (it == spec.mistake_stages.end() || POSENC_MUTANT("golden_verify_resolution_notes_dropped")) return;
  auto shows = [&](const std::vector<std::string>& stages) {
    return std::any_of(stages.begin(), stages.end(), [&](const std::string& s) { return given.count(s) > 0; });
  };
  std::map<std::vector<std::string>, std::vector<std::string>> by_stages;  // stages -> mistakes
  std::map<std::vector<std::string>, std::vector<std::string>> elsewhere;  // stages -> profiles
  for (const auto& [mistake, stages] : it->second) {
    if (shows(stages)) continue;
    std::vector<std::string> where;
    for (const auto& p : profiles()) {  // profile order
      auto o = spec.mistake_stages.find(p.name);
      if (p.name == profile || o == spec.mistake_stages.end()) continue;
      auto m = o->second.find(mistake);
      if (m != o->second.end() && shows(m->second)) where.push_back(p.name);
    }
    if (where.empty()) continue;  // no profile sees it in these stages: not a resolution gap
    by_stages[stages].push_back("`" + mistake + "`");
    auto& e = elsewhere[stages];
    for (const auto& w : where) {
      if (std::find(e.begin(), e.end(), w) == e.end()) e.push_back(w);
    }
  }
  const std::vector<std::string> given_v(given.begin(), given.end());
  for (const auto& [stages, mistakes] : by_stages) {
    const auto& w = elsewhere[stages];
    notes.push_back("at " + profile + "'s resolution the stages given (" + join(given_v) +
                    ") cannot see the " + spec.scheme + " mistake" + (mistakes.size() > 1 ? "s " : " ") +
                    join(mistakes) + " (measured when the case was generated: the effect stays within the " +
                    profile + " budget of those stages; under " +
                    join(w) + " they show it); export one of: " +
                    join(stages));
  }
}

/// A negative control's verdict can depend on the profile: an engine may differ from the
/// known-wrong values under the claimed profile and reproduce them within another profile's
/// budgets (a float32 engine with the wrong convention, judged by a tighter pipeline). When the
/// case differs under the claimed profile, it is judged again under every other profile that
/// applies; those under which the output reproduces the known-wrong convention are named in
/// the report (CaseReport::reproduces_under) and in its message.
CaseReport verify_case_impl(const CaseSpec& spec, TensorSource& golden, TensorSource& actual,
                            const VerifyOptions& opt, ElementRatios* ratios) {
  CaseReport rep = verify_case_one(spec, golden, actual, opt, ratios);
  if (spec.result != "invalid" || rep.status != Verdict::kPass || !rep.control_differs ||
      POSENC_MUTANT("golden_verify_negative_other_profiles_ignored")) {
    return rep;
  }
  for (const auto& p : profiles()) {
    if (p.name == opt.profile) continue;
    VerifyOptions other = opt;
    other.profile = p.name;
    if (verify_case_one(spec, golden, actual, other, nullptr).status == Verdict::kFail) {
      rep.reproduces_under.push_back(p.name);
    }
  }
  if (!rep.reproduces_under.empty()) {
    std::string names;
    for (const auto& n : rep.reproduces_under) names += (names.empty() ? "" : ", ") + n;
    rep.message = "negative control: the output differs from the known-wrong convention under " +
                  opt.profile + "; it reproduces that convention under " + names;
  }
  return rep;
}

/// Tensor names, a trace's "sNN.x" grouped by x: "s03.scores, s04.scores, cos" ->
/// "cos, scores (s03, s04)".
std::string stage_list_text(const std::vector<std::string>& names) {
  std::vector<std::string> order;
  std::map<std::string, std::vector<std::string>> steps;  // x -> the steps that have it
  for (const auto& n : names) {
    const auto dot = n.find('.');
    const bool step = dot != std::string::npos && n.size() > 1 && n[0] == 's' &&
                      std::all_of(n.begin() + 1, n.begin() + static_cast<std::ptrdiff_t>(dot),
                                  [](char c) { return c >= '0' && c <= '9'; });
    const std::string x = step ? n.substr(dot + 1) : n;
    if (!steps.count(x)) order.push_back(x);
    if (step)
      steps[x].push_back(n.substr(0, dot));
    else
      steps[x];
  }
  std::vector<std::string> parts;
  for (const auto& x : order) {
    const auto& st = steps.at(x);
    parts.push_back(st.empty() ? x
                               : x + " (" +
                                     (st.size() > 6 ? st.front() + " .. " + st.back() + ", " +
                                                          std::to_string(st.size()) + " steps"
                                                    : join(st)) +
                                     ")");
  }
  return join(parts);
}

/// Whether a negative control's judged stages are all ones that cannot tell its right
/// convention from the known-wrong one under `profile` (manifest "control_detection"); if so,
/// sets the report's message and telling_stages.
bool control_inconclusive(const CaseSpec& spec, const std::string& profile, CaseReport& rep) {
  const auto it = spec.control_stages.find(profile);
  if (it == spec.control_stages.end() || POSENC_MUTANT("golden_verify_inconclusive_ignored"))
    return false;
  rep.telling_stages = it->second;
  std::vector<std::string> given;
  for (const auto& t : rep.tensors) {
    if (!checked(t)) continue;
    if (std::find(it->second.begin(), it->second.end(), t.name) != it->second.end()) return false;
    given.push_back(t.name);
  }
  std::string m = "the stages given (" + stage_list_text(given) +
                  ") are the same under the right and the known-wrong convention at " + profile +
                  "'s resolution (the two lie within two budgets of each other): they cannot "
                  "show whether the engine follows it; ";
  if (it->second.empty()) {
    std::vector<std::string> other;
    for (const auto& [p, st] : spec.control_stages) {
      if (!st.empty()) other.push_back(p);
    }
    m += "no stage of this case tells them apart under " + profile +
         (other.empty() ? std::string() : "; it does under " + join(other));
  } else {
    m += "give one of: " + stage_list_text(it->second);
  }
  rep.message = m;
  return true;
}

CaseReport verify_case_one(const CaseSpec& spec, TensorSource& golden, TensorSource& actual,
                           const VerifyOptions& opt, ElementRatios* ratios) {
  SmallTensors small(golden);
  CaseReport rep;
  rep.id = spec.id;
  rep.scheme = spec.scheme;
  rep.result = spec.result;
  rep.profile = opt.profile;
  rep.require_all = opt.require_all;
  bool any_error = false, any_fail = false;
  std::int64_t n_nan = 0, n_inf = 0;
  std::vector<std::string> missing;
  for (const auto& spec_t : spec.expected) {
    auto rn = opt.rename.find(spec_t.name);
    const std::string actual_name = rn == opt.rename.end() ? spec_t.name : rn->second;
    if (!actual.contains(actual_name)) {
      TensorReport t;
      t.name = spec_t.name;
      t.stage = spec_t.stage;
      t.kind = spec_t.check.kind;
      t.status = Verdict::kMissing;
      t.message = "the engine output has no tensor \"" + actual_name + "\"";
      missing.push_back(spec_t.name);
      rep.tensors.push_back(t);
      continue;
    }
    TensorReport t = check_tensor(spec_t, small, actual, actual_name, opt,
                                  ratios ? &(*ratios)[spec_t.name] : nullptr);
    golden.release();
    actual.release();
    any_error |= t.status == Verdict::kError;
    any_fail |= t.status == Verdict::kFail;
    n_nan += t.n_nan;
    n_inf += t.n_inf;
    rep.tensors.push_back(std::move(t));
  }
  int n_na = 0;
  for (const auto& t : rep.tensors) n_na += t.status == Verdict::kNotApplicable;
  if (any_error) {
    rep.status = Verdict::kError;
  } else if (opt.require_all && !missing.empty() && !POSENC_MUTANT("golden_verify_require_all_ignored")) {
    rep.status = Verdict::kError;
    std::string m;
    for (const auto& s : missing) m += (m.empty() ? "" : ", ") + s;
    rep.message = "--require-all: the engine output lacks stage(s) " + m;
  } else if (rep.n_checked() == 0) {
    if (n_na > 0) {
      rep.status = Verdict::kNotApplicable;
      rep.message = "profile " + opt.profile + " applies to none of the given stages";
    } else {
      rep.status = Verdict::kError;
      rep.message = "the engine output contains none of the expected tensors";
    }
  } else {
    rep.status = any_fail ? Verdict::kFail : Verdict::kPass;
  }
  // A negative control passes verification when the engine does NOT reproduce it; a
  // non-finite output (NaN, +-Inf) never passes, not even a negative control; given only stages
  // that cannot tell the right convention from the wrong one, it is INCONCLUSIVE.
  if (spec.result == "invalid" && judged(rep.status)) {
    if (n_nan + n_inf > 0 && !POSENC_MUTANT("golden_verify_negative_nonfinite_passes")) {
      rep.status = Verdict::kFail;
      rep.message = nonfinite_words(n_nan, n_inf);
    } else if (control_inconclusive(spec, opt.profile, rep)) {
      // On stages where the right and the known-wrong convention lie within two budgets of each
      // other, an output more than kWrongEitherWay budgets from the stored (known-wrong) values
      // is more than kWrongEitherWay - 2 from the right ones too: wrong under either convention.
      constexpr double kWrongEitherWay = 8.0;
      const double worst = rep.worst_ratio();
      if (rep.status == Verdict::kFail && worst > kWrongEitherWay &&
          !POSENC_MUTANT("golden_verify_inconclusive_hides_wrong")) {
        char w[32];
        std::snprintf(w, sizeof w, "%.3g", worst);
        rep.status = Verdict::kFail;
        rep.message = std::string("the stages given differ from the expected values by ") + w +
                      " budgets where the right and the known-wrong convention agree (within "
                      "two budgets): the output is wrong under either convention (" +
                      rep.message + ")";
      } else {
        rep.status = Verdict::kInconclusive;
      }
    } else {
      rep.status = rep.status == Verdict::kPass ? Verdict::kFail : Verdict::kPass;
      rep.control_differs = rep.status == Verdict::kPass;
      rep.message = rep.status == Verdict::kFail
                        ? "the output reproduces a known-wrong convention"
                        : "negative control: the output differs from the known-wrong convention";
    }
  }
  if (spec.manifest.contains("trace")) rep.trace = trace_step_report(spec, small, rep);
  if (rep.n_checked() > 0 && !POSENC_MUTANT("golden_verify_detection_notes_dropped")) {
    std::set<std::string> given;
    for (const auto& t : rep.tensors) {
      if (checked(t)) given.insert(t.name);
    }
    for (const auto& d : spec.detection) {
      const bool seen = std::any_of(d.stages.begin(), d.stages.end(),
                                    [&](const std::string& s) { return given.count(s) > 0; });
      if (seen) continue;
      std::string stages;
      for (const auto& s : d.stages) stages += (stages.empty() ? "" : ", ") + s;
      rep.notes.push_back("the stages given cannot detect " + d.flag +
                          (d.blind.empty() ? "" : " (" + d.blind + ")") + "; give one of: " + stages);
    }
    add_resolution_notes(spec, opt.profile, given, rep.notes);
  }
  return rep;
}

std::string pos_text(const std::optional<std::int64_t>& p) {
  return p ? std::to_string(*p) : std::string("-");
}

}  // namespace

std::string trace_text(const TraceStepReport& t, bool negative) {
  std::ostringstream os;
  if (t.index < 0) {
    os << (negative ? "every checked step reproduces the known-wrong output ("
                    : "every checked step passes (")
       << t.n_checked << " of " << t.n_steps << " steps checked)";
    return os.str();
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3g", t.ratio);
  os << (negative ? "first step that differs from the known-wrong output: " : "first failing step: ")
     << t.name << " (" << t.kind << ", step " << t.index << " of " << t.n_steps << "): " << t.tensor
     << (t.integer ? std::string(" differs") : std::string(" worst ") + buf + " of budget");
  if (t.sequence) os << " in sequence " << *t.sequence;
  if (t.position) os << " at position " << *t.position;
  if (t.slot) os << ", slot " << *t.slot;
  if (t.engine_position) os << " (the engine gave position " << *t.engine_position << ")";
  os << " [" << t.where << "]";
  if (t.index > 0) os << "; steps before it " << (negative ? "reproduce it" : "pass");
  return os.str();
}

std::string format_case_text(const CaseReport& r, bool verbose, bool by_position) {
  std::ostringstream os;
  char buf[768];
  const bool negative = r.result == "invalid";
  std::string missing;  // the stages not written, one line after the others
  std::size_t n_missing = 0;
  for (const auto& t : r.tensors) {
    if (t.status == Verdict::kMissing) {
      missing += (missing.empty() ? "" : ", ") + t.name;
      ++n_missing;
      continue;
    }
    if (t.status == Verdict::kError || t.status == Verdict::kNotApplicable) {
      os << r.id << "  " << t.name << "  " << to_string(t.status) << ": " << t.message << '\n';
      continue;
    }
    if (t.integer) {  // no budget: integers match exactly or not
      std::snprintf(buf, sizeof buf, "%s  %-8s %-9s integers, exact match required: over=%lld/%lld",
                    r.id.c_str(), t.name.c_str(), t.stage.c_str(), static_cast<long long>(t.n_over),
                    static_cast<long long>(t.n));
    } else {
      std::snprintf(buf, sizeof buf, "%s  %-8s %-9s worst %.3g of budget (bound %g%s) over=%lld/%lld",
                    r.id.c_str(), t.name.c_str(), t.stage.c_str(), t.max_ratio, t.bound,
                    t.has_extra ? " + extra" : "", static_cast<long long>(t.n_over),
                    static_cast<long long>(t.n));
    }
    os << buf;
    if (t.n_skipped > 0) os << " skipped=" << t.n_skipped << " (beyond --max-position)";
    if (t.has_positions) {
      os << " first_fail_position=" << pos_text(t.first_fail_position)
         << " passes_up_to_position=" << pos_text(t.passes_up_to_position);
    }
    if ((t.status == Verdict::kFail && !negative) || verbose) {
      os << " worst=[" << t.worst.where << ']';
      if (t.worst.query_position && t.worst.key_position) {
        os << " query_position=" << *t.worst.query_position << " key_position="
           << *t.worst.key_position << " (key - query = "
           << *t.worst.key_position - *t.worst.query_position << ')';
      }
      if (t.integer) {
        std::snprintf(buf, sizeof buf, " exact=%lld actual=%lld |err|=%lld",
                      static_cast<long long>(t.worst.exact), static_cast<long long>(t.worst.actual),
                      static_cast<long long>(t.worst.abs_error));
      } else {
        std::snprintf(buf, sizeof buf, " exact=%.9g actual=%.9g |err|=%.3g budget=%.3g",
                      t.worst.exact, t.worst.actual, t.worst.abs_error, t.worst.budget);
      }
      os << buf;
    }
    if (r.status == Verdict::kInconclusive) {
      os << "  CANNOT TELL (the right and the known-wrong convention agree here)";
    } else if (negative && !POSENC_MUTANT("golden_verify_negative_lines_as_fail")) {
      os << "  " << (t.status == Verdict::kFail ? "DIFFERS from the known-wrong output" : "REPRODUCES the known-wrong output");
    } else {
      os << "  " << to_string(t.status);
    }
    if (!t.message.empty()) os << " (" << t.message << ")";
    os << '\n';
    if (by_position && t.has_positions) {
      for (const auto& ps : t.by_position) {
        std::snprintf(buf, sizeof buf, "    position %-10lld worst %-10.3g over=%lld/%lld",
                      static_cast<long long>(ps.position), ps.worst_ratio,
                      static_cast<long long>(ps.n_over), static_cast<long long>(ps.n));
        os << buf;
        if (ps.saturated >= 1.0) {
          os << "  UNCHECKED: the budget admits any angle for every element here";
        } else if (ps.saturated > 0) {
          std::snprintf(buf, sizeof buf, "  partly unchecked: %.0f%% of elements admit any angle",
                        100 * ps.saturated);
          os << buf;
        }
        os << '\n';
      }
    }
  }
  if (n_missing > 0 && !POSENC_MUTANT("golden_verify_hides_missing")) {
    const char* what = r.require_all                    ? "stages not written (--require-all): "
                       : n_missing == r.tensors.size() ? "no stage written; expected: "
                                                       : "optional stages not written: ";
    os << r.id << "  " << what << missing << " (" << n_missing << (n_missing == 1 ? " tensor" : " tensors") << ")\n";
  }
  for (const auto& n : r.notes) os << r.id << "  note: " << n << '\n';
  if (r.trace && r.status != Verdict::kInconclusive)
    os << r.id << "  trace: " << trace_text(*r.trace, negative) << '\n';
  os << r.id << "  profile=" << r.profile << "  " << to_string(r.status);
  if (!r.message.empty()) os << " (" << r.message << ")";
  os << '\n';
  return os.str();
}

nlohmann::json case_report_json(const CaseReport& r, bool by_position) {
  nlohmann::json j = {{"id", r.id},         {"scheme", r.scheme},   {"result", r.result},
                      {"profile", r.profile}, {"status", to_string(r.status)}, {"message", r.message},
                      {"notes", r.notes}};
  if (r.result == "invalid") {
    j["reproduces_under"] = r.reproduces_under;
    j["telling_stages"] = r.telling_stages;
  }
  nlohmann::json ts = nlohmann::json::array();
  // A number; a non-finite one is null with KEY_nonfinite "inf", "-inf" or "nan" beside it.
  auto num = [](nlohmann::json& o, const std::string& key, double v) {
    if (std::isfinite(v)) {
      o[key] = v;
      return;
    }
    o[key] = nullptr;
    o[key + "_nonfinite"] = std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf");
  };
  auto opt_pos = [](const std::optional<std::int64_t>& p) -> nlohmann::json {
    return p ? nlohmann::json(*p) : nlohmann::json(nullptr);
  };
  for (const auto& t : r.tensors) {
    nlohmann::json jt = {{"name", t.name},
                         {"stage", t.stage},
                         {"kind", to_string(t.kind)},
                         {"status", to_string(t.status)},
                         {"message", t.message},
                         {"bound", t.bound},
                         {"has_extra", t.has_extra},
                         {"n", t.n},
                         {"n_over", t.n_over},
                         {"n_skipped", t.n_skipped},
                         {"n_nan", t.n_nan},
                         {"n_inf", t.n_inf},
                         {"convention", t.convention}};
    num(jt, "ratio", t.max_ratio);
    if (t.integer && judged(t.status))
      jt["max_difference"] = t.worst.index >= 0 ? t.worst.abs_error : 0.0;
    if (t.has_positions) {
      jt["first_fail_position"] = opt_pos(t.first_fail_position);
      jt["passes_up_to_position"] = opt_pos(t.passes_up_to_position);
    }
    if (t.worst.index >= 0) {
      nlohmann::json w = {{"index", t.worst.index}, {"coords", t.worst.coords},
                          {"where", t.worst.where}};
      num(w, "exact", t.worst.exact);
      num(w, "expected", t.worst.expected);
      num(w, "actual", t.worst.actual);
      num(w, "abs_error", t.worst.abs_error);
      num(w, "budget", t.worst.budget);
      num(w, "ratio", t.worst.ratio);
      if (t.worst.query_position && t.worst.key_position) {
        w["query_position"] = *t.worst.query_position;
        w["key_position"] = *t.worst.key_position;
        w["key_minus_query"] = *t.worst.key_position - *t.worst.query_position;
      }
      jt["worst"] = std::move(w);
    }
    if (by_position && t.has_positions) {
      nlohmann::json bp = nlohmann::json::array();
      for (const auto& ps : t.by_position) {
        nlohmann::json p = {{"position", ps.position}, {"n", ps.n}, {"n_over", ps.n_over},
                            {"saturated", ps.saturated}};
        num(p, "worst_ratio", ps.worst_ratio);
        bp.push_back(std::move(p));
      }
      jt["by_position"] = bp;
    }
    ts.push_back(jt);
  }
  j["tensors"] = ts;
  if (r.trace) {
    const auto& t = *r.trace;
    auto o = [](const std::optional<std::int64_t>& p) { return p ? nlohmann::json(*p) : nlohmann::json(nullptr); };
    j["trace"] = {{"n_steps", t.n_steps}, {"n_checked", t.n_checked},
                  {"first_failing_step", t.index < 0 ? nlohmann::json(nullptr) : nlohmann::json(t.index)},
                  {"step", t.name}, {"kind", t.kind}, {"tensor", t.tensor}, {"where", t.where},
                  {"sequence", o(t.sequence)}, {"position", o(t.position)},
                  {"slot", o(t.slot)}, {"engine_position", o(t.engine_position)}};
    num(j["trace"], "ratio", t.ratio);
  }
  return j;
}

}  // namespace posenc::golden
