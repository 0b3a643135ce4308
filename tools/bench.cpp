// `posenc bench`: speed of the optimized kernels as ratios to ceilings measured in the same run,
// at each thread count of --threads. Every ratio is the median over repetitions in which the
// kernel and its ceiling run alternately (a, b, a, b, ...), so a load change on this shared
// machine hits both sides of a ratio alike; the load average is printed beside.
//
// Ceilings (STREAM-style, float arrays of kStreamBytes each, 64-byte aligned, first touched
// by the same OpenMP threads and static schedule that then use them, so every page is mapped
// before timing; arrays 4x the 32 MiB last-level cache of this machine kind):
//   copy    b[i] = a[i]              counts 8 bytes/element (read a, write b)
//   triad   a[i] = b[i] + s c[i]     counts 12 bytes/element
//   update  a[i] = s a[i]            counts 8 bytes/element (read and write the same array)
//   gemm    Eigen fp32, per head S = Q K^T, O = S V (the FLOPs of attention), heads over threads
// As in STREAM, the write-allocate read of a written line is not counted. An out-of-place
// kernel pays it as copy does, so it is judged against copy; an in-place kernel writes lines
// it has just read and pays none, so it is judged against update (against copy it would move
// 2/3 of copy's real traffic per counted byte and look up to 1.5x faster than the ceiling).
// A RoPE row's ceiling runs on the kernel's own buffers (copy q -> q_out and k -> k_out, or
// update q and k in place): the same bytes, pages and streams as the kernel, so that a kernel
// that reads and writes those bytes cannot beat it (against the 128 MiB STREAM arrays the
// prebuilt-table rows came out 1-7 % above copy).
// A ratio above 1 means the ceiling is wrong, and is printed as "ceiling broken".
#define EIGEN_DONT_PARALLELIZE  // threads over heads, as the attention kernel (one OpenMP level)
#include "tools/bench.hpp"

#include <omp.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <utility>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "golden/cases/fast_rope.hpp"
#include "golden/cases/hf_config.hpp"
#include "optimized/alibi.hpp"
#include "optimized/attention.hpp"
#include "optimized/deberta.hpp"
#include "optimized/rope.hpp"
#include "optimized/shaw.hpp"
#include "optimized/t5_bias.hpp"
#include "optimized/transformer_xl.hpp"
#include "reference/common/eigen.hpp"
#include "reference/common/scalar.hpp"
#include "reference/rope.hpp"
#include "tools/synthetic_case.hpp"

namespace posenc::tools {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr std::size_t kStreamBytes = std::size_t{128} << 20;  // per array: 4x the 32 MiB L3
constexpr std::size_t kSmokeStreamBytes = std::size_t{4} << 20;

const std::vector<std::string> kGroups = {"rope", "attention", "oracle", "generate", "verify"};

// ---- buffers and timing ----------------------------------------------------------------------

/// A 64-byte aligned float array, first touched by `omp parallel for schedule(static)` with
/// the current thread count (pages mapped where the kernels' threads will use them).
class Buffer {
 public:
  explicit Buffer(std::size_t n) : n_(n) {
    const std::size_t bytes = (n * sizeof(float) + 63) / 64 * 64;
    p_ = static_cast<float*>(std::aligned_alloc(64, bytes == 0 ? 64 : bytes));
    if (p_ == nullptr) throw std::bad_alloc();
    const std::int64_t m = static_cast<std::int64_t>(n);
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < m; ++i) {
      p_[i] =
          static_cast<float>((static_cast<std::uint64_t>(i) * 2654435761u) % 2001) / 1000.0f - 1.0f;
    }
  }
  ~Buffer() { std::free(p_); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  float* data() { return p_; }
  std::size_t size() const { return n_; }
  span<float> s() { return {p_, n_}; }
  span<const float> cs() const { return {p_, n_}; }

 private:
  float* p_ = nullptr;
  std::size_t n_ = 0;
};

double seconds(const std::function<void()>& fn) {
  const auto t0 = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct Measured {
  double rate = 0, ceiling_rate = 0, ratio = 0;  // medians
};

/// Kernel a (work_a units per call) against ceiling b (work_b), alternated `reps` times after
/// one untimed call of each; medians of the rates and of the per-pair ratios.
Measured interleaved(int reps, const std::function<void()>& a, double work_a,
                     const std::function<void()>& b, double work_b) {
  a();
  b();
  std::vector<double> ra, rb, rr;
  for (int i = 0; i < reps; ++i) {
    const double ta = seconds(a);
    const double tb = seconds(b);
    ra.push_back(work_a / ta);
    rb.push_back(work_b / tb);
    rr.push_back(ra.back() / rb.back());
  }
  return {median(ra), median(rb), median(rr)};
}

std::string load_average() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  if (!(f >> a >> b >> c)) return "unknown";
  return a + " " + b + " " + c;
}

// ---- rows ------------------------------------------------------------------------------------

struct Row {
  std::string group, name, unit, ceiling, counts;
  int threads = 1;
  double value = 0, ceiling_value = 0, ratio = 0;
  bool has_ratio = false;
  std::string target;  // e.g. ">= 0.9"; empty: none
  double target_value = 0;
};

bool broken(const Row& r) { return r.has_ratio && r.ratio > 1.0; }

std::string ratio_text(const Row& r) {
  if (!r.has_ratio) return "-";
  if (broken(r)) return "ceiling broken";
  char b[32];
  std::snprintf(b, sizeof b, "%.2f", r.ratio);
  return b;
}

std::string num(double v) {
  char b[32];
  if (v >= 1e5) {
    std::snprintf(b, sizeof b, "%.3g", v);
  } else if (v >= 100) {
    std::snprintf(b, sizeof b, "%.0f", v);
  } else {
    std::snprintf(b, sizeof b, "%.3g", v);
  }
  return b;
}

struct PlotPoint {
  int threads;
  std::int64_t bytes;
  double gbs;
};

struct Context {
  const BenchOptions& o;
  int reps = 5;
  std::vector<Row> rows;
  std::vector<PlotPoint> plot;         // RoPE GB/s against size
  std::map<int, double> copy_ceiling;  // GB/s per thread count (for the plot)
  bool wants(const std::string& g) const {
    return o.kernels.empty() || std::find(o.kernels.begin(), o.kernels.end(), g) != o.kernels.end();
  }
};

// ---- ceilings --------------------------------------------------------------------------------

struct Stream {
  Buffer a, b, c;
  float s = 1.0f;
  explicit Stream(std::size_t n) : a(n), b(n), c(n) {
    volatile float one = 1.0f;  // unknown to the compiler: the loops cannot be folded
    s = one;
  }
  void copy() {
    const std::int64_t n = static_cast<std::int64_t>(a.size());
    float* __restrict x = a.data();
    float* __restrict y = b.data();
#pragma omp parallel for simd schedule(static)
    for (std::int64_t i = 0; i < n; ++i) y[i] = x[i];
  }
  void triad() {
    const std::int64_t n = static_cast<std::int64_t>(a.size());
    float* __restrict x = a.data();
    const float* __restrict y = b.data();
    const float* __restrict z = c.data();
    const float k = s;
#pragma omp parallel for simd schedule(static)
    for (std::int64_t i = 0; i < n; ++i) x[i] = y[i] + k * z[i];
  }
  void update() {
    const std::int64_t n = static_cast<std::int64_t>(c.size());
    float* __restrict x = c.data();
    const float k = s;
#pragma omp parallel for simd schedule(static)
    for (std::int64_t i = 0; i < n; ++i) x[i] = k * x[i];
  }
  double bytes(int per_element) const { return static_cast<double>(a.size()) * per_element; }
};

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

/// S = Q K^T, O = S V per head, heads over the OpenMP threads (4 T^2 d FLOPs per head).
struct Gemm {
  int heads;
  std::int64_t t;
  int d;
  std::vector<RowMatrix> q, k, v;
  Gemm(int h, std::int64_t tt, int dd) : heads(h), t(tt), d(dd) {
    for (int i = 0; i < std::min(heads, 2); ++i) {
      q.push_back(RowMatrix::Random(t, d));
      k.push_back(RowMatrix::Random(t, d));
      v.push_back(RowMatrix::Random(t, d));
    }
  }
  void run() {
#pragma omp parallel
    {
      RowMatrix s(t, t), o(t, d);
#pragma omp for schedule(static)
      for (int h = 0; h < heads; ++h) {
        const std::size_t i = static_cast<std::size_t>(h) % q.size();
        s.noalias() = q[i] * k[i].transpose();
        o.noalias() = s * v[i];
      }
    }
  }
  double flops() const { return 4.0 * heads * static_cast<double>(t) * t * d; }
};

// ---- RoPE ------------------------------------------------------------------------------------

/// The copy ceiling on a kernel's own buffers: y = x for each (x, y) pair, as Stream::copy.
void copy_buffers(std::initializer_list<std::pair<const Buffer*, Buffer*>> pairs) {
  for (const auto& [from, to] : pairs) {
    const std::int64_t n = static_cast<std::int64_t>(from->size());
    const float* __restrict x = from->cs().data();
    float* __restrict y = to->data();
#pragma omp parallel for simd schedule(static)
    for (std::int64_t i = 0; i < n; ++i) y[i] = x[i];
  }
}

/// The update ceiling on a kernel's own buffers: x = s x in place, as Stream::update.
void update_buffers(std::initializer_list<Buffer*> buffers, float s) {
  for (Buffer* b : buffers) {
    const std::int64_t n = static_cast<std::int64_t>(b->size());
    float* __restrict x = b->data();
#pragma omp parallel for simd schedule(static)
    for (std::int64_t i = 0; i < n; ++i) x[i] = s * x[i];
  }
}

void bench_rope(Context& cx, int threads, Stream& st) {
  struct Shape {
    std::int64_t tokens;
    int heads;
  };
  const int dim = 128;
  const std::vector<Shape> shapes =
      cx.o.smoke ? std::vector<Shape>{{256, 4}} : std::vector<Shape>{{4096, 32}, {32768, 8}};
  const reference::RopeParams p{dim, dim, 500000.0, reference::RopeLayout::kHalfSplit, 1.0};
  for (const Shape& sh : shapes) {
    std::vector<std::int64_t> pos(static_cast<std::size_t>(sh.tokens));
    for (std::int64_t t = 0; t < sh.tokens; ++t) pos[static_cast<std::size_t>(t)] = t;
    const auto cache = optimized::rope_cache_init(p, pos);
    const std::size_t n = static_cast<std::size_t>(sh.tokens) * sh.heads * dim;
    Buffer q(n), k(n), qo(n), ko(n);
    const double moved = 2.0 * 2.0 * static_cast<double>(n) * sizeof(float);  // q, k read + written
    const double table = static_cast<double>(sh.tokens) * (dim / 2) * 2 * sizeof(float);
    const double positions = static_cast<double>(sh.tokens) * sizeof(std::int64_t);
    for (auto layout : {optimized::RopeTensorLayout::kTokensHeadsDim,
                        optimized::RopeTensorLayout::kHeadsTokensDim}) {
      const optimized::RopeShape s{sh.tokens, sh.heads, layout};
      const std::string shape =
          "[" + std::to_string(sh.tokens) + "," + std::to_string(sh.heads) + ",128] " +
          (layout == optimized::RopeTensorLayout::kTokensHeadsDim ? "THD" : "HTD");
      for (bool in_place : {false, true}) {
        for (bool in_call : {false, true}) {
          float* qd = in_place ? q.data() : qo.data();
          float* kd = in_place ? k.data() : ko.data();
          std::function<void()> kernel;
          if (in_call) {
            kernel = [&, qd, kd] {
              optimized::rope_apply_qk_positions(p, pos, {}, 0.0, s, q.cs(), {qd, n}, s, k.cs(),
                                                 {kd, n});
            };
          } else {
            kernel = [&, qd, kd] {
              optimized::rope_apply_qk(p, cache, s, q.cs(), {qd, n}, s, k.cs(), {kd, n});
            };
          }
          const double bytes = moved + (in_call ? positions : table);
          const Measured m =
              in_place ? interleaved(
                             cx.reps, kernel, bytes, [&] { update_buffers({&q, &k}, st.s); },
                             moved)
                       : interleaved(
                             cx.reps, kernel, bytes, [&] { copy_buffers({{&q, &qo}, {&k, &ko}}); },
                             moved);
          Row r;
          r.group = "rope";
          r.name = "rope q+k " + shape + (in_place ? " in place" : " out of place") +
                   (in_call ? ", table in call" : ", prebuilt table");
          r.unit = "GB/s";
          r.threads = threads;
          r.value = m.rate / 1e9;
          r.ceiling = in_place ? "update" : "copy";
          r.ceiling_value = m.ceiling_rate / 1e9;
          r.ratio = m.ratio;
          r.has_ratio = true;
          r.counts = in_call ? "q,k read+written, positions 8 B/token"
                             : "q,k read+written, cos+sin table 512 B/token";
          if (threads == 2) {
            r.target = in_call ? ">= 0.9" : ">= 0.95";
            r.target_value = in_call ? 0.9 : 0.95;
          }
          cx.rows.push_back(r);
        }
      }
    }
  }
}

/// RoPE GB/s (out of place, table in call, [T, 8, 128] THD) from in-cache to out-of-cache.
void bench_rope_sizes(Context& cx, int threads) {
  const std::vector<std::int64_t> tokens =
      cx.o.smoke ? std::vector<std::int64_t>{16, 256}
                 : std::vector<std::int64_t>{16, 64, 256, 1024, 4096, 16384, 65536};
  const reference::RopeParams p{128, 128, 500000.0, reference::RopeLayout::kHalfSplit, 1.0};
  for (std::int64_t t : tokens) {
    std::vector<std::int64_t> pos(static_cast<std::size_t>(t));
    for (std::int64_t i = 0; i < t; ++i) pos[static_cast<std::size_t>(i)] = i;
    const std::size_t n = static_cast<std::size_t>(t) * 8 * 128;
    Buffer q(n), k(n), qo(n), ko(n);
    const optimized::RopeShape s{t, 8, optimized::RopeTensorLayout::kTokensHeadsDim};
    const double bytes =
        4.0 * static_cast<double>(n) * sizeof(float) + 8.0 * static_cast<double>(t);
    // Enough calls per timing to last about 20 ms at 30 GB/s.
    const int calls = static_cast<int>(std::max(1.0, 6e8 / bytes));
    auto kernel = [&] {
      for (int c = 0; c < calls; ++c) {
        optimized::rope_apply_qk_positions(p, pos, {}, 0.0, s, q.cs(), qo.s(), s, k.cs(), ko.s());
      }
    };
    kernel();
    std::vector<double> rates;
    for (int i = 0; i < cx.reps; ++i) rates.push_back(bytes * calls / seconds(kernel));
    cx.plot.push_back({threads, static_cast<std::int64_t>(bytes), median(rates) / 1e9});
  }
}

// ---- attention -------------------------------------------------------------------------------

void bench_attention(Context& cx, int threads) {
  const int heads = cx.o.smoke ? 2 : 8;
  const std::int64_t t = cx.o.smoke ? 128 : 2048;
  const int d = 128;
  const std::size_t n = static_cast<std::size_t>(t) * heads * d;
  Buffer q(n), k(n), v(n), out(n);
  // Scores of order 1: q and k scaled so that q.k/sqrt(d) stays within a few units.
  for (std::size_t i = 0; i < n; ++i) {
    q.data()[i] *= 0.5f;
    k.data()[i] *= 0.5f;
  }
  Gemm gemm(heads, t, d);
  const reference::AttentionParams ap{
      heads, heads, d, d, reference::AttentionScale::kInvSqrtHeadDim, 1.0, false, 0, 0};
  const double full = 4.0 * heads * static_cast<double>(t) * t * d;

  std::vector<float> t5_table(32 * static_cast<std::size_t>(heads));
  for (std::size_t i = 0; i < t5_table.size(); ++i)
    t5_table[i] = 0.01f * static_cast<float>(i % 17);
  const reference::ShawParams shaw{16};
  std::vector<float> rel_k(static_cast<std::size_t>(2 * 16 + 1) * d, 0.01f), rel_v = rel_k;
  reference::TransformerXlParams txl;
  txl.n_heads = heads;
  txl.d_head = d;
  txl.d_model = 512;
  std::vector<float> rwb(static_cast<std::size_t>(heads) * d, 0.01f), rrb = rwb;
  std::vector<float> r_net(static_cast<std::size_t>(heads) * d * txl.d_model);
  for (std::size_t i = 0; i < r_net.size(); ++i) r_net[i] = 0.001f * static_cast<float>(i % 13);
  reference::DebertaParams db;
  db.n_heads = heads;
  db.head_dim = d;
  db.position_buckets = 256;
  db.max_relative_positions = 512;
  optimized::DebertaWeightsF32 w;
  w.hidden = static_cast<std::int64_t>(heads) * d;
  const std::size_t hd = static_cast<std::size_t>(heads) * d;
  w.rel_embeddings.assign(2 * 256 * static_cast<std::size_t>(w.hidden), 0.01f);
  w.key_w.assign(hd * static_cast<std::size_t>(w.hidden), 0.001f);
  w.key_b.assign(hd, 0.0f);
  w.query_w = w.key_w;
  w.query_b = w.key_b;

  // Transformer-XL runs causal (its FLOPs: the causal half); both build their per-call tables
  // (BD, c2p / p2c) with GEMMs inside the timed call.
  const double causal = 4.0 * heads * static_cast<double>(t) * (t + 1) / 2 * d;
  struct Kernel {
    std::string name;
    std::function<void()> fn;
    double flops;
    std::int64_t t;
  };
  const std::vector<Kernel> kernels = {
      {"attention plain (NoPE)",
       [&] { optimized::attention_forward(ap, {}, t, t, q.cs(), k.cs(), v.cs(), out.s()); }, full,
       t},
      {"attention + ALiBi",
       [&] {
         optimized::alibi_attention_forward({heads, reference::AlibiForm::kPaper}, ap, {}, t, t,
                                            q.cs(), k.cs(), v.cs(), out.s());
       },
       full, t},
      {"attention + T5 bias",
       [&] {
         optimized::t5_bias_forward({32, 128, true, heads}, ap, t, t, t5_table, q.cs(), k.cs(),
                                    v.cs(), out.s());
       },
       full, t},
      {"attention + Shaw (K 16)",
       [&] {
         optimized::shaw_forward(shaw, ap, {}, t, t, rel_k, rel_v, q.cs(), k.cs(), v.cs(), out.s());
       },
       full, t},
      {"attention + Transformer-XL (causal)",
       [&] {
         optimized::transformer_xl_forward(txl, t, t, q.cs(), k.cs(), v.cs(), rwb, rrb, r_net,
                                           out.s());
       },
       causal, t},
      {"attention + DeBERTa (c2p+p2c)",
       [&] { optimized::deberta_forward(db, ap, {}, t, t, w, q.cs(), k.cs(), v.cs(), out.s()); },
       full, t},
  };
  for (const Kernel& kr : kernels) {
    const Measured m = interleaved(
        cx.reps, kr.fn, kr.flops, [&] { gemm.run(); }, gemm.flops());
    Row r;
    r.group = "attention";
    r.name = kr.name + " T=" + std::to_string(kr.t) + " H=" + std::to_string(heads) + " d=128";
    r.unit = "GFLOP/s";
    r.threads = threads;
    r.value = m.rate / 1e9;
    r.ceiling = "gemm";
    r.ceiling_value = m.ceiling_rate / 1e9;
    r.ratio = m.ratio;
    r.has_ratio = true;
    r.counts = kr.flops == causal ? "4 H T(T+1)/2 d (causal half of QK^T and PV)"
                                  : "4 H T^2 d (QK^T and PV)";
    r.target = ">= 0.6";
    r.target_value = 0.6;
    cx.rows.push_back(r);
  }
}

// ---- oracle, generate, verify ------------------------------------------------------------------

void bench_oracle(Context& cx) {
  const reference::RopeParams p{128, 128, 500000.0, reference::RopeLayout::kHalfSplit, 1.0};
  const auto tables = reference::rope_tables<mp50>(p);
  std::vector<mp50> x(128);
  for (int i = 0; i < 128; ++i) x[static_cast<std::size_t>(i)] = mp50(i % 7) / 7;
  const int rows = cx.o.smoke ? 4 : 200;
  std::int64_t values = 0;
  const double s = seconds([&] {
    for (int r = 0; r < rows; ++r) {
      const auto y = reference::rope_apply(p, tables, (std::int64_t{1} << 20) + r * 977, x);
      values += static_cast<std::int64_t>(y.size());
    }
  });
  Row r;
  r.group = "oracle";
  r.name = "oracle mp50 RoPE rows (head_dim 128), 1 thread";
  r.unit = "values/s";
  r.threads = 1;
  r.value = static_cast<double>(values) / s;
  r.counts = "rotated values (one cos and sin per pair)";
  cx.rows.push_back(r);
  // The fast table oracle (golden/cases/fast_rope.hpp) on the same frequencies: a cos and a sin
  // per pair, correctly rounded to f32 and to double (mp50 only near a rounding boundary).
  const golden::FastRopeTables fast(tables.inv_freq, tables.attention_factor);
  const int positions = cx.o.smoke ? 64 : 40000;
  std::int64_t fast_values = 0;
  double sink = 0;
  const double fs_s = seconds([&] {
    for (int m = 0; m < positions; ++m) {
      for (int i = 0; i < fast.pairs(); ++i) {
        golden::FastRopeTables::Value c, sn;
        fast.eval((std::int64_t{1} << 20) + m * 977, i, DType::kF32, &c, &sn);
        sink += c.target + sn.exact;
        fast_values += 2;
      }
    }
  });
  Row f = r;
  f.name = "fast table oracle (cos, sin to f32 and f64), 1 thread";
  f.value = static_cast<double>(fast_values) / fs_s;
  f.counts = "table values (a cos, a sin) correctly rounded, bit-identical to mp50's" + std::string(sink == 0 ? " " : "");
  f.target = ">= 1e6 values/s";
  cx.rows.push_back(f);
}

struct ChildRun {
  int status = -1;
  double seconds = 0;
  long max_rss_kib = 0;
};

/// VmHWM (peak resident set, KiB) of process `pid` once it runs `arg1` as its first argument,
/// else 0. Not wait4's ru_maxrss: that also counts the pages a forked child shares with this
/// (large) process until it calls exec, which made a 16 MiB verify read as 72 MiB.
long vm_hwm_kib(pid_t pid, const std::string& arg1) {
  const std::string dir = "/proc/" + std::to_string(pid);
  std::ifstream cmd(dir + "/cmdline", std::ios::binary);
  std::string argv0, argv1;
  if (!std::getline(cmd, argv0, '\0') || !std::getline(cmd, argv1, '\0') || argv1 != arg1) {
    return 0;
  }
  std::ifstream status(dir + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::strtol(line.c_str() + 6, nullptr, 10);
  }
  return 0;
}

/// Runs this program with `args` (output to /dev/null), timing it; peak RSS sampled from the
/// child's VmHWM every 2 ms after its exec (a lower bound that VmHWM, being monotonic, makes
/// exact unless the peak comes in the child's last 2 ms).
ChildRun run_self(const std::vector<std::string>& args) {
  ChildRun out;
  const auto t0 = std::chrono::steady_clock::now();
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("bench: fork failed");
  if (pid == 0) {
    std::vector<char*> argv;
    std::string self = "posenc";
    argv.push_back(self.data());
    std::vector<std::string> copy = args;
    for (auto& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    if (std::freopen("/dev/null", "w", stdout) == nullptr) _exit(127);
    if (std::freopen("/dev/null", "w", stderr) == nullptr) _exit(127);
    execv("/proc/self/exe", argv.data());
    _exit(127);
  }
  int status = 0;
  struct rusage ru {};
  for (;;) {
    const pid_t done = wait4(pid, &status, WNOHANG, &ru);
    if (done == pid || done < 0) break;
    out.max_rss_kib = std::max(out.max_rss_kib, vm_hwm_kib(pid, args.empty() ? "" : args[0]));
    usleep(2000);
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  out.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

/// A temporary directory removed on scope exit.
struct TempDir {
  fs::path path;
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "posenc-bench-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("bench: mkdtemp failed");
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

void bench_generate(Context& cx) {
  TempDir dir;
  std::vector<std::string> args = {"generate", "--out", dir.path.string()};
  if (cx.o.smoke) args.insert(args.end(), {"--scheme", "nope"});
  const ChildRun run = run_self(args);
  if (run.status != 0) {
    throw std::runtime_error("bench: `posenc generate` exited with " + std::to_string(run.status));
  }
  Row r;
  r.group = "generate";
  r.name = cx.o.smoke ? "generate --scheme nope (smoke)" : "generate: level-1 catalog, all schemes";
  r.unit = "s";
  r.threads = omp_get_num_procs();
  r.value = run.seconds;
  r.counts = "wall time of `posenc generate --out TMP` (target < 60 s on 2 cores)";
  r.target = "< 60 s";
  cx.rows.push_back(r);
  // Level 2: the dense table sweep of Llama 3.1 8B (head_dim 128) to its context, 131072
  // positions (smoke: Llama 2 7B's 4096), every chunk written to disk.
  TempDir dir2;
  const bool smoke = cx.o.smoke;
  const std::string preset = (golden::default_presets_dir() / (smoke ? "llama-2-7b.json" : "llama-3.1-8b.json")).string();
  const ChildRun l2 = run_self({"generate", "--level", "2", "--config", preset, "--case", "_l2_sweep_", "--no-catalog",
                                "--out", dir2.path.string()});
  if (l2.status != 0) throw std::runtime_error("bench: `posenc generate --level 2` exited with " + std::to_string(l2.status));
  const double values = (smoke ? 4096.0 : 131072.0) * 64 * 2;
  Row g = r;
  g.name = smoke ? "generate --level 2: Llama 2 7B sweep, 4096 positions (smoke)"
                 : "generate --level 2: Llama 3.1 8B table sweep, 131072 positions";
  g.unit = "values/s";
  g.value = values / l2.seconds;
  g.counts = "cos and sin values (64 pairs per position) per second of wall time, written with their "
             "budgets; peak RSS " + std::to_string(l2.max_rss_kib / 1024) + " MiB, " + num(l2.seconds) + " s";
  g.target = ">= 2.8e5 values/s (131072 positions in < 60 s)";
  cx.rows.push_back(g);
}

void bench_verify(Context& cx) {
  TempDir dir;
  // A synthetic RoPE-shaped case (tools/synthetic_case.hpp: exact values from a double
  // evaluation, not the mp oracle, which would take most of an hour for 1 GB) of about 1 GB
  // golden + actual: q [T, 32, 128] f32 and q_rot with its f64 exact and f32 cond companions
  // (20 bytes per element), the output q_rot (4 bytes).
  const std::int64_t tokens = cx.o.smoke ? 8 : 10240;
  const auto t0 = std::chrono::steady_clock::now();
  const SyntheticCase sc = write_synthetic_rope_case(dir.path / "data", tokens, 32, 128);
  const double write_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const ChildRun ver = run_self({"verify", sc.manifest.string(), "--actual", sc.actual.string()});
  if (ver.status != 0)
    throw std::runtime_error("bench: verify exited with " + std::to_string(ver.status));
  const double bytes = static_cast<double>(sc.golden_bytes + sc.actual_bytes);
  Row r;
  r.group = "verify";
  r.name = "verify 1 synthetic case [" + std::to_string(tokens) + ",32,128], " +
           num(bytes / 1e6) + " MB golden+actual";
  r.unit = "GB/s";
  r.threads = omp_get_num_procs();
  r.value = bytes / ver.seconds / 1e9;
  r.counts = "bytes of golden + actual safetensors / wall time of `posenc verify` (values from "
             "a double evaluation, not the oracle; written in " + num(write_s) +
             " s); peak RSS " + num(static_cast<double>(ver.max_rss_kib) / 1024.0) + " MiB";
  r.target = ">= 1 GB/s";
  cx.rows.push_back(r);
}

// ---- output ----------------------------------------------------------------------------------

std::vector<int> parse_threads(const std::string& s) {
  std::vector<int> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    char* end = nullptr;
    const long v = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v < 1 || v > 256) {
      throw std::invalid_argument(
          "bench: --threads must be a comma list of counts in 1..256 (got \"" + s + "\")");
    }
    out.push_back(static_cast<int>(v));
  }
  if (out.empty()) throw std::invalid_argument("bench: --threads is empty");
  return out;
}

void print_text(const Context& cx, const std::vector<int>& threads, const std::string& load0,
                const std::string& load1, double total) {
  std::printf(
      "posenc bench: median of %d interleaved repetitions (kernel, ceiling, kernel, ...)%s\n",
      cx.reps, cx.o.smoke ? ", SMOKE sizes (not representative)" : "");
  std::printf("load average (/proc/loadavg) at start: %s, at end: %s; %d cores\n", load0.c_str(),
              load1.c_str(), omp_get_num_procs());
  std::printf(
      "ceilings: copy b=a 8 B/elem, triad a=b+s*c 12 B/elem, update a=s*a 8 B/elem "
      "(%zu MiB float arrays, aligned, pre-faulted; write-allocate not counted; a RoPE row's "
      "copy / update runs on that row's own q, k buffers); "
      "gemm = Eigen fp32 S=QK^T, O=SV per head\n",
      (cx.o.smoke ? kSmokeStreamBytes : kStreamBytes) >> 20);
  std::printf("\n%-62s %3s %10s %-8s %9s %14s %7s\n", "kernel", "thr", "rate", "unit", "ceiling",
              "ratio", "target");
  for (const Row& r : cx.rows) {
    const std::string ceil = r.has_ratio ? r.ceiling + " " + num(r.ceiling_value) : "";
    std::printf("%-62s %3d %10s %-8s %9s %14s %7s\n", r.name.c_str(), r.threads,
                num(r.value).c_str(), r.unit.c_str(), ceil.c_str(), ratio_text(r).c_str(),
                r.target.c_str());
  }
  std::printf("\nbytes/FLOPs counted:\n");
  std::map<std::string, std::string> seen;
  for (const Row& r : cx.rows) {
    if (!r.counts.empty() && !seen.count(r.group + r.counts)) {
      seen[r.group + r.counts] = r.counts;
      std::printf("  %-10s %s\n", r.group.c_str(), r.counts.c_str());
    }
  }
  (void)threads;
  std::printf("total bench time %.0f s\n", total);
}

json to_json(const Context& cx, const std::string& load0, const std::string& load1, double total) {
  json rows = json::array();
  for (const Row& r : cx.rows) {
    json j = {{"group", r.group}, {"kernel", r.name}, {"threads", r.threads},
              {"rate", r.value},  {"unit", r.unit},   {"counts", r.counts}};
    if (r.has_ratio) {
      j["ceiling"] = r.ceiling;
      j["ceiling_rate"] = r.ceiling_value;
      j["ratio"] = r.ratio;
      j["ceiling_broken"] = broken(r);
    }
    if (!r.target.empty()) j["target"] = r.target;
    rows.push_back(j);
  }
  json plot = json::array();
  for (const auto& p : cx.plot)
    plot.push_back({{"threads", p.threads}, {"bytes", p.bytes}, {"gbs", p.gbs}});
  return {{"repetitions", cx.reps},       {"smoke", cx.o.smoke},
          {"load_average_start", load0},  {"load_average_end", load1},
          {"cores", omp_get_num_procs()}, {"rows", rows},
          {"rope_sizes", plot},           {"total_seconds", total}};
}

/// Hand-written SVG: RoPE GB/s against bytes moved (log2 axis), one line per thread count,
/// the copy ceiling of each thread count dashed.
void write_plot(const Context& cx, const fs::path& file) {
  const double w = 720, h = 440, l = 70, r = 160, t = 40, b = 60;
  std::int64_t bmin = INT64_MAX, bmax = 1;
  double ymax = 1;
  for (const auto& p : cx.plot) {
    bmin = std::min(bmin, p.bytes);
    bmax = std::max(bmax, p.bytes);
    ymax = std::max(ymax, p.gbs);
  }
  for (const auto& [th, c] : cx.copy_ceiling) ymax = std::max(ymax, c);
  ymax = std::ceil(ymax / 10.0) * 10.0;
  if (bmin >= bmax) bmax = bmin * 2;
  const double lx0 = std::log2(static_cast<double>(bmin)),
               lx1 = std::log2(static_cast<double>(bmax));
  auto X = [&](double bytes) { return l + (std::log2(bytes) - lx0) / (lx1 - lx0) * (w - l - r); };
  auto Y = [&](double g) { return h - b - g / ymax * (h - t - b); };
  const char* colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd"};
  std::ostringstream s;
  s << "<svg xmlns='http://www.w3.org/2000/svg' width='" << w << "' height='" << h
    << "' font-family='sans-serif' font-size='12'>\n<rect width='100%' height='100%' "
       "fill='white'/>\n";
  s << "<text x='" << l
    << "' y='22' font-size='14'>RoPE q+k, table in call, [T, 8, 128] out of "
       "place: GB/s against bytes moved per call</text>\n";
  s << "<line x1='" << l << "' y1='" << h - b << "' x2='" << w - r << "' y2='" << h - b
    << "' stroke='black'/>\n<line x1='" << l << "' y1='" << t << "' x2='" << l << "' y2='" << h - b
    << "' stroke='black'/>\n";
  for (int i = 0; i <= 5; ++i) {
    const double g = ymax * i / 5;
    s << "<line x1='" << l - 4 << "' y1='" << Y(g) << "' x2='" << w - r << "' y2='" << Y(g)
      << "' stroke='#ddd'/><text x='" << l - 8 << "' y='" << Y(g) + 4 << "' text-anchor='end'>"
      << num(g) << "</text>\n";
  }
  for (double by = std::exp2(std::ceil(lx0)); by <= bmax * 1.0001; by *= 4) {
    const double mib = by / (1 << 20);
    std::string label = mib >= 1 ? num(mib) + " MiB" : num(by / 1024) + " KiB";
    s << "<line x1='" << X(by) << "' y1='" << h - b << "' x2='" << X(by) << "' y2='" << h - b + 4
      << "' stroke='black'/><text x='" << X(by) << "' y='" << h - b + 18
      << "' text-anchor='middle'>" << label << "</text>\n";
  }
  s << "<text x='" << (l + w - r) / 2 << "' y='" << h - 20
    << "' text-anchor='middle'>bytes counted per call (q, k read and written; log scale)</text>\n";
  s << "<text x='18' y='" << (t + h - b) / 2 << "' transform='rotate(-90 18 " << (t + h - b) / 2
    << ")' text-anchor='middle'>GB/s</text>\n";
  int ci = 0, legend = 0;
  std::map<int, std::vector<PlotPoint>> by_threads;
  for (const auto& p : cx.plot) by_threads[p.threads].push_back(p);
  for (const auto& [th, pts] : by_threads) {
    const char* col = colors[ci++ % 4];
    s << "<polyline fill='none' stroke='" << col << "' stroke-width='2' points='";
    for (const auto& p : pts) s << X(static_cast<double>(p.bytes)) << "," << Y(p.gbs) << " ";
    s << "'/>\n";
    for (const auto& p : pts) {
      s << "<circle cx='" << X(static_cast<double>(p.bytes)) << "' cy='" << Y(p.gbs)
        << "' r='3' fill='" << col << "'/>\n";
    }
    const double ly = t + 20 + 36 * legend++;
    s << "<line x1='" << w - r + 10 << "' y1='" << ly << "' x2='" << w - r + 30 << "' y2='" << ly
      << "' stroke='" << col << "' stroke-width='2'/><text x='" << w - r + 36 << "' y='" << ly + 4
      << "'>RoPE, " << th << " thread" << (th > 1 ? "s" : "") << "</text>\n";
    if (cx.copy_ceiling.count(th)) {
      const double c = cx.copy_ceiling.at(th);
      s << "<line x1='" << l << "' y1='" << Y(c) << "' x2='" << w - r << "' y2='" << Y(c)
        << "' stroke='" << col << "' stroke-dasharray='6 4'/>\n";
      s << "<line x1='" << w - r + 10 << "' y1='" << ly + 16 << "' x2='" << w - r + 30 << "' y2='"
        << ly + 16 << "' stroke='" << col << "' stroke-dasharray='6 4'/><text x='" << w - r + 36
        << "' y='" << ly + 20 << "'>copy ceiling, " << th << "</text>\n";
    }
  }
  s << "</svg>\n";
  const fs::path tmp = file.string() + ".tmp";
  {
    std::ofstream f(tmp);
    f << s.str();
    if (!f) throw std::runtime_error("bench: cannot write --plot file " + file.string());
  }
  fs::rename(tmp, file);
}

}  // namespace

CLI::App* add_bench_subcommand(CLI::App& app, BenchOptions* o) {
  auto* b = app.add_subcommand(
      "bench",
      "Kernel speed as ratios to ceilings measured in the same run (copy / update bandwidth, "
      "Eigen GEMM), medians of interleaved repetitions, load average beside; also the oracle's "
      "rate, catalog generation time and verify throughput. Not a test: nothing fails on a "
      "number");
  b->add_option("--threads", o->threads, "Comma list of OpenMP thread counts (default 1,2)");
  b->add_option("--format", o->format, "text or json");
  b->add_flag("--smoke", o->smoke,
              "Tiny sizes, one repetition, a few seconds (CI); skips the catalog and the big "
              "verify run");
  b->add_option("--kernel", o->kernels,
                "Only these groups (repeatable or comma list): rope, attention, oracle, "
                "generate, verify")
      ->delimiter(',');
  b->add_option("--plot", o->plot, "Write an SVG plot of RoPE GB/s against size and threads");
  b->add_option("--repeat", o->repeat, "Repetitions per row (default 5; 1 with --smoke)");
  return b;
}

int cmd_bench(const BenchOptions& o) {
  try {
    if (o.format != "text" && o.format != "json") {
      throw std::invalid_argument("bench: --format must be text or json (got " + o.format + ")");
    }
    for (const auto& k : o.kernels) {
      if (std::find(kGroups.begin(), kGroups.end(), k) == kGroups.end()) {
        throw std::invalid_argument(
            "bench: --kernel must be rope, attention, oracle, generate or verify (got " + k + ")");
      }
    }
    if (o.repeat < 0) {
      throw std::invalid_argument("bench: --repeat must be >= 1 (got " + std::to_string(o.repeat) +
                                  ")");
    }
    const std::vector<int> threads = parse_threads(o.threads);
    Context cx{o};
    cx.reps = o.repeat > 0 ? o.repeat : (o.smoke ? 1 : 5);
    const bool tty = isatty(STDERR_FILENO) != 0;
    auto progress = [&](const std::string& what) {
      if (tty) std::fprintf(stderr, "\r\033[Kbench: %s", what.c_str());
    };
    const std::string load0 = load_average();
    const auto t0 = std::chrono::steady_clock::now();
    const std::size_t stream_n = (o.smoke ? kSmokeStreamBytes : kStreamBytes) / sizeof(float);
    for (int th : threads) {
      omp_set_num_threads(th);
      Eigen::setNbThreads(1);  // GEMMs run one per thread (threads over heads)
      progress("ceilings, " + std::to_string(th) + " thread(s)");
      Stream st(stream_n);
      const Measured copy = interleaved(
          cx.reps, [&] { st.copy(); }, st.bytes(8), [&] { st.update(); }, st.bytes(8));
      const Measured triad = interleaved(
          cx.reps, [&] { st.triad(); }, st.bytes(12), [&] { st.copy(); }, st.bytes(8));
      cx.copy_ceiling[th] = copy.rate / 1e9;
      for (const auto& [name, rate, counts] :
           {std::tuple{"ceiling copy b=a", copy.rate, "8 B/element"},
            std::tuple{"ceiling update a=s*a (in place)", copy.ceiling_rate, "8 B/element"},
            std::tuple{"ceiling triad a=b+s*c", triad.rate, "12 B/element"}}) {
        Row r;
        r.group = "ceiling";
        r.name = name;
        r.unit = "GB/s";
        r.threads = th;
        r.value = rate / 1e9;
        r.counts = std::string(name) + ": " + counts;
        cx.rows.push_back(r);
      }
      if (cx.wants("attention")) {
        Gemm g(o.smoke ? 2 : 8, o.smoke ? 128 : 2048, 128);
        g.run();
        std::vector<double> rates;
        for (int i = 0; i < cx.reps; ++i) rates.push_back(g.flops() / seconds([&] { g.run(); }));
        Row r;
        r.group = "ceiling";
        r.name = "ceiling gemm (Eigen fp32, attention's shapes)";
        r.unit = "GFLOP/s";
        r.threads = th;
        r.value = median(rates) / 1e9;
        r.counts = "gemm: 4 H T^2 d FLOPs";
        cx.rows.push_back(r);
      }
      if (cx.wants("rope")) {
        progress("rope, " + std::to_string(th) + " thread(s)");
        bench_rope(cx, th, st);
        if (!o.plot.empty()) bench_rope_sizes(cx, th);
      }
      if (cx.wants("attention")) {
        progress("attention, " + std::to_string(th) + " thread(s)");
        bench_attention(cx, th);
      }
    }
    omp_set_num_threads(omp_get_num_procs());
    if (cx.wants("oracle")) {
      progress("oracle");
      bench_oracle(cx);
    }
    if (cx.wants("generate") && !o.smoke) {
      progress("generate");
      bench_generate(cx);
    }
    if (cx.wants("verify")) {
      progress("verify");
      bench_verify(cx);
    }
    if (tty) std::fprintf(stderr, "\r\033[K");
    const double total =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const std::string load1 = load_average();
    if (!o.plot.empty()) write_plot(cx, o.plot);
    if (o.format == "json") {
      std::cout << to_json(cx, load0, load1, total).dump(1) << '\n';
    } else {
      print_text(cx, threads, load0, load1, total);
    }
    return 0;
  } catch (const std::invalid_argument& e) {
    std::cerr << "posenc: error: " << e.what() << '\n';
    return 2;
  }
}

}  // namespace posenc::tools
