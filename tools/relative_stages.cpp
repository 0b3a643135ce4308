// Stage times of the Transformer-XL and DeBERTa kernels at the bench's attention shape (T 2048,
// 8 heads of 128; Transformer-XL d_model 512, causal; DeBERTa 256 buckets, span 512): each
// call against the same attention without bias, and the tables alone. CPU time of the calling
// thread (CLOCK_THREAD_CPUTIME_ID), median of N calls after one untimed call, so that a shared
// machine's load moves the numbers less than wall time would; run it with OMP_NUM_THREADS=1.
// A measuring aid for docs/performance.md ("What stands in the way"), not a test and not part
// of the build:
//
//   cmake --build build --target posenc_optimized
//   g++ -O2 -std=gnu++20 -fopenmp -march=native -I. -isystem /usr/include/eigen3 -o
//   build/relative_stages tools/relative_stages.cpp build/libposenc_optimized.a OMP_NUM_THREADS=1
//   build/relative_stages [N = 5] [txl | deberta] OMP_NUM_THREADS=1 perf record -o rel.data
//   build/relative_stages 5 deberta   # the profile
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <random>
#include <vector>

#include "optimized/attention.hpp"
#include "optimized/deberta.hpp"
#include "optimized/transformer_xl.hpp"

namespace {

using namespace posenc;

double thread_seconds() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

/// Median CPU seconds of n calls of f, after one untimed call.
double median_seconds(int n, const std::function<void()>& f) {
  f();
  std::vector<double> t;
  for (int i = 0; i < n; ++i) {
    const double a = thread_seconds();
    f();
    t.push_back(thread_seconds() - a);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

void print(const char* what, double s) { std::printf("%-44s %8.1f ms\n", what, s * 1e3); }

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 5;
  const char* only = argc > 2 ? argv[2] : "";
  const int heads = 8, d = 128;
  const std::int64_t t = 2048;
  const std::size_t n = static_cast<std::size_t>(t) * heads * d, hd = std::size_t{8} * d;
  std::mt19937 g(1);
  std::normal_distribution<float> normal(0.0f, 0.5f);
  std::vector<float> q(n), k(n), v(n), out(n);
  for (auto* x : {&q, &k, &v}) {
    for (float& e : *x) e = normal(g);
  }
  const reference::AttentionParams full{
      heads, heads, d, d, reference::AttentionScale::kInvSqrtHeadDim, 1.0, false, 0, 0};
  reference::AttentionParams causal = full;
  causal.causal = true;
  if (!std::strcmp(only, "") || !std::strcmp(only, "txl")) {
    reference::TransformerXlParams p;
    p.n_heads = heads;
    p.d_head = d;
    p.d_model = 512;
    std::vector<float> u(hd, 0.01f), vb = u, w_r(hd * 512);
    for (std::size_t i = 0; i < w_r.size(); ++i) w_r[i] = 0.001f * static_cast<float>(i % 13);
    print("transformer_xl_forward", median_seconds(reps, [&] {
            optimized::transformer_xl_forward(p, t, t, q, k, v, u, vb, w_r, out);
          }));
    print("causal attention_forward, no bias", median_seconds(reps, [&] {
            optimized::attention_forward(causal, {}, t, t, q, k, v, out);
          }));
    print("TransformerXlBias (r table, u . k)", median_seconds(reps, [&] {
            const optimized::TransformerXlBias b(p, t, t, q, k, u, vb, w_r);
          }));
    print("txl_r_table_f32",
          median_seconds(reps, [&] { const auto r = optimized::txl_r_table_f32(p, t, w_r); }));
  }
  if (!std::strcmp(only, "") || !std::strcmp(only, "deberta")) {
    reference::DebertaParams p;
    p.n_heads = heads;
    p.head_dim = d;
    p.position_buckets = 256;
    p.max_relative_positions = 512;
    optimized::DebertaWeightsF32 w;
    w.hidden = static_cast<std::int64_t>(hd);
    w.rel_embeddings.assign(2 * 256 * hd, 0.01f);
    w.key_w.assign(hd * hd, 0.001f);
    w.key_b.assign(hd, 0.0f);
    w.query_w = w.key_w;
    w.query_b = w.key_b;
    print("deberta_forward", median_seconds(reps, [&] {
            optimized::deberta_forward(p, full, {}, t, t, w, q, k, v, out);
          }));
    print("attention_forward, no bias", median_seconds(reps, [&] {
            optimized::attention_forward(full, {}, t, t, q, k, v, out);
          }));
    print("deberta_position_layers (projection)",
          median_seconds(reps, [&] { const auto l = optimized::deberta_position_layers(p, w); }));
    const auto layers = optimized::deberta_position_layers(p, w);
    print("DebertaBias, all heads' P2C up front",
          median_seconds(reps, [&] { const optimized::DebertaBias b(p, layers, q, k, t, t, 0); }));
  }
  return 0;
}
