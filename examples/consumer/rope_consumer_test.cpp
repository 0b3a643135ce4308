// A float32 RoPE kernel written the way a PyTorch user writes it, checked against the committed
// golden case rope_half_d128_b1e4_llama2_7b_f32 with the GoogleTest helper of an installed posenc.
// A second kernel pairs the channels the wrong way (interleaved instead of half-split) and must
// fail: the check is shown able to fail. The same kernel also runs posenc's RoPE properties
// (check/rope.hpp: oracle, relative position, pair norm, composition) under fp32.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "check/rope.hpp"
#include "golden/gtest.hpp"

namespace pg = posenc::golden;
namespace fs = std::filesystem;

namespace {

const char* const kCase = "rope_half_d128_b1e4_llama2_7b_f32";

fs::path data_dir() {
  if (const char* env = std::getenv("POSENC_DATA"); env && *env) return env;
  return POSENC_CONSUMER_DATA;
}

enum class Pairing { kHalfSplit, kInterleaved };

// x: [tokens, heads, head_dim]; rotates the first rotary_dim channels, copies the rest.
//   inv_freq = 1 / base ** (arange(0, rotary_dim, 2).float() / rotary_dim)
//   freqs    = positions.float()[:, None] * inv_freq[None, :]
//   y        = x * cos + rotate_half(x) * sin
std::vector<float> rope_f32(const std::vector<float>& x, const std::vector<std::int64_t>& positions,
                            std::int64_t heads, std::int64_t head_dim, std::int64_t rotary_dim,
                            float base, Pairing pairing) {
  const std::int64_t half = rotary_dim / 2;
  std::vector<float> inv_freq(half);
  for (std::int64_t i = 0; i < half; ++i) {
    inv_freq[i] = 1.0f / std::pow(base, static_cast<float>(2 * i) / static_cast<float>(rotary_dim));
  }
  std::vector<float> y = x;
  for (std::size_t t = 0; t < positions.size(); ++t) {
    for (std::int64_t h = 0; h < heads; ++h) {
      const std::int64_t row = (static_cast<std::int64_t>(t) * heads + h) * head_dim;
      for (std::int64_t i = 0; i < half; ++i) {
        const float angle = static_cast<float>(positions[t]) * inv_freq[i];
        const float c = std::cos(angle), s = std::sin(angle);
        const std::int64_t a = pairing == Pairing::kHalfSplit ? i : 2 * i;
        const std::int64_t b = pairing == Pairing::kHalfSplit ? i + half : 2 * i + 1;
        const float xa = x[row + a], xb = x[row + b];
        y[row + a] = xa * c - xb * s;
        y[row + b] = xb * c + xa * s;
      }
    }
  }
  return y;
}

class RopeConsumer : public ::testing::Test {
 protected:
  void SetUp() override {
    const fs::path manifest = data_dir() / "rope" / (std::string(kCase) + ".json");
    ASSERT_TRUE(fs::exists(manifest))
        << manifest << " does not exist: set POSENC_DATA to the golden data directory "
        << "(<prefix>/share/posenc/data of an installed posenc) or configure with "
        << "-DPOSENC_CONSUMER_DATA=<dir>";
    c_ = pg::load_case(manifest);
  }

  // Runs the kernel on the case's inputs; returns the outputs q_rot, k_rot.
  pg::TensorMap run(Pairing pairing) const {
    const auto& p = c_.spec.manifest.at("params");
    const auto head_dim = p.at("head_dim").get<std::int64_t>();
    const auto rotary_dim = p.at("rotary_dim").get<std::int64_t>();
    const auto base = p.at("base").get<float>();
    const pg::Tensor& pos = c_.golden.at("positions");
    std::vector<std::int64_t> positions(pos.numel());
    for (std::int64_t i = 0; i < pos.numel(); ++i) positions[i] = pos.get_i64(i);
    std::vector<pg::Tensor> out;
    for (const char* name : {"q", "k"}) {
      const pg::Tensor& x = c_.golden.at(name);
      const std::int64_t heads = x.shape.at(1);
      const auto y = rope_f32(pg::tensor_to_f32(x), positions, heads, head_dim, rotary_dim, base,
                              pairing);
      out.push_back(pg::tensor_from_f32(std::string(name) + "_rot", x.shape, y));
    }
    return pg::tensor_map(std::move(out));
  }

  pg::LoadedCase c_;
};

TEST_F(RopeConsumer, HalfSplitKernelPassesFp32) {
  EXPECT_POSENC_CASE(c_, run(Pairing::kHalfSplit), "fp32");
}

TEST_F(RopeConsumer, InterleavedKernelFails) {
  const ::testing::AssertionResult r = pg::case_passes(c_, run(Pairing::kInterleaved), "fp32");
  EXPECT_FALSE(r) << "an interleaved-pairing kernel passed the half-split case";
  // The failure names the verdict and the worst element.
  EXPECT_NE(std::string(r.message()).find("FAIL"), std::string::npos) << r.message();
  EXPECT_NE(std::string(r.message()).find("worst=[token"), std::string::npos) << r.message();
}

TEST_F(RopeConsumer, UnknownProfileIsAFailure) {
  const ::testing::AssertionResult r = pg::case_passes(c_, run(Pairing::kHalfSplit), "fp64");
  EXPECT_FALSE(r);
  EXPECT_NE(std::string(r.message()).find("unknown tolerance profile"), std::string::npos)
      << r.message();
}

// posenc's properties at random calls: the kernel behind posenc::check's calling convention.
void rope_kernel(const posenc::check::RopeCall& c) {
  const Pairing pairing = c.layout == posenc::check::RopeLayout::kInterleaved
                              ? Pairing::kInterleaved
                              : Pairing::kHalfSplit;
  const std::vector<std::int64_t> positions(c.positions.begin(), c.positions.end());
  auto rotate = [&](posenc::span<const float> x, posenc::span<float> out, int heads) {
    const auto y = rope_f32(std::vector<float>(x.begin(), x.end()), positions, heads, c.head_dim,
                            c.rotary_dim, static_cast<float>(c.base), pairing);
    std::copy(y.begin(), y.end(), out.begin());
  };
  rotate(c.q, c.q_out, c.n_heads);
  rotate(c.k, c.k_out, c.n_kv_heads);
}

posenc::check::RopeCheckOptions fp32_options() {
  posenc::check::RopeCheckOptions o;
  o.profile = "fp32";
  o.max_success = 10;  // per property; the default is 25
  return o;
}
POSENC_ROPE_PROPERTIES(RopeConsumerProperties, rope_kernel, fp32_options());

}  // namespace
