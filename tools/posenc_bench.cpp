// posenc_bench: speed of the optimized kernels as ratios measured in one run (never absolute
// seconds: these machines are shared and noisy). Each ratio is the median over --repeat runs.
//   rope      RoPE apply, fp32, out of place, [4096, 32, 128], vs memcpy of the same bytes
//             (target >= 0.9: the kernel is memory-bound)
//   attention tiled attention FLOP rate vs an Eigen fp32 GEMM of the score shape (target >= 0.6)
//   alibi     ALiBi fused into the tiled kernel vs the same kernel without bias (bias cost)
// Not a test: nothing here passes or fails.
#define EIGEN_DONT_PARALLELIZE
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <omp.h>

#include <CLI/CLI.hpp>

#include "optimized/alibi.hpp"
#include "optimized/attention.hpp"
#include "optimized/rope.hpp"
#include "reference/common/eigen.hpp"

namespace {

using namespace posenc;

double seconds(const std::function<void()>& fn) {
  const auto t0 = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/// Median over `repeat` runs of time(b) / time(a): > 1 means a is faster than b.
double ratio(int repeat, const std::function<void()>& a, const std::function<void()>& b) {
  a();
  b();  // warm up caches and page faults
  std::vector<double> r;
  for (int i = 0; i < repeat; ++i) r.push_back(seconds(b) / seconds(a));
  return median(r);
}

std::vector<float> filled(std::size_t n) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<float>((i * 2654435761u) % 2001) / 1000.0f - 1.0f;
  return v;
}

void bench_rope(int repeat) {
  const std::int64_t tokens = 4096;
  const int heads = 32, dim = 128;
  const reference::RopeParams p{dim, dim, 500000.0, reference::RopeLayout::kHalfSplit, 1.0};
  std::vector<std::int64_t> pos(tokens);
  for (std::int64_t t = 0; t < tokens; ++t) pos[t] = t;
  const auto cache = optimized::rope_cache_init(p, pos);
  const auto x = filled(static_cast<std::size_t>(tokens * heads * dim));
  std::vector<float> y(x.size()), z(x.size());
  const optimized::RopeShape s{tokens, heads, optimized::RopeTensorLayout::kTokensHeadsDim};
  const double r = ratio(
      repeat, [&] { optimized::rope_apply(p, cache, s, x, y); },
      [&] { std::memcpy(z.data(), x.data(), x.size() * sizeof(float)); });
  std::printf("rope       apply fp32 [4096,32,128] out of place / memcpy of 64 MiB: %.2f of memcpy speed (target >= 0.9)\n", r);
}

void bench_attention(int repeat) {
  const std::int64_t t = 1024;
  const int heads = 8, d = 64;
  const reference::AttentionParams p{heads, heads, d, d, reference::AttentionScale::kInvSqrtHeadDim, 1.0, false, 0, 0};
  const auto q = filled(static_cast<std::size_t>(t * heads * d)), k = q, v = q;
  std::vector<float> out(q.size());
  // The attention FLOPs (2 GEMMs per head) against the same FLOPs done by plain Eigen GEMMs.
  using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const RowMatrix a = RowMatrix::Random(t, d), b = RowMatrix::Random(d, t), c = RowMatrix::Random(t, d);
  const double r = ratio(
      repeat, [&] { optimized::attention_forward(p, {}, t, t, q, k, v, out); },
      [&] {
#pragma omp parallel for schedule(static)
        for (int h = 0; h < heads; ++h) {
          RowMatrix s(t, t), o(t, d);
          s.noalias() = a * b;
          o.noalias() = s * c;
        }
      });
  std::printf("attention  tiled fp32, T=1024, 8 heads, d=64 / Eigen GEMMs of the same FLOPs: %.2f of GEMM rate (target >= 0.6)\n", r);
  const reference::AlibiParams ap{heads, reference::AlibiForm::kPaper};
  reference::AttentionParams pc = p;
  pc.causal = true;
  const double rb = ratio(
      repeat, [&] { optimized::alibi_attention_forward(ap, pc, {}, t, t, q, k, v, out); },
      [&] { optimized::attention_forward(pc, {}, t, t, q, k, v, out); });
  std::printf("alibi      fused bias, causal, same shape / plain causal attention: %.2f of plain speed\n", rb);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"posenc_bench: kernel speed as ratios measured in one run (see the file header)"};
  int threads = 1, repeat = 7;
  std::string which = "all";
  app.add_option("--threads", threads, "OpenMP threads (default 1: 2 threads are bimodal on shared machines)");
  app.add_option("--repeat", repeat, "Runs per ratio; the median is printed");
  app.add_option("--kernel", which, "rope, attention or all");
  CLI11_PARSE(app, argc, argv);
  if (threads < 1 || repeat < 1 || (which != "all" && which != "rope" && which != "attention")) {
    std::fprintf(stderr, "posenc_bench: --threads and --repeat must be >= 1, --kernel rope|attention|all\n");
    return 2;
  }
  omp_set_num_threads(threads);
  std::printf("posenc_bench: %d thread(s), median of %d runs\n", threads, repeat);
  if (which == "all" || which == "rope") bench_rope(repeat);
  if (which == "all" || which == "attention") bench_attention(repeat);
  return 0;
}
