// The committed golden case rope_half_d128_b1e4_llama2_7b_f32 checked, with the GoogleTest helper
// golden/gtest.hpp of an installed posenc, against a float32 RoPE kernel written the way a PyTorch
// user writes it (rope_f32.hpp). A second kernel pairs the channels the wrong way (interleaved
// instead of half-split) and must fail: the check is shown able to fail. This test links
// posenc::verify alone (no oracle, no kernels, no MPFR): tools/consumer_test.cmake checks its
// link line and its binary. rope_property_test runs posenc's properties on the same kernel.
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "golden/gtest.hpp"
#include "rope_f32.hpp"

namespace pg = posenc::golden;
namespace fs = std::filesystem;

namespace {

const char* const kCase = "rope_half_d128_b1e4_llama2_7b_f32";

fs::path data_dir() {
  if (const char* env = std::getenv("POSENC_DATA"); env && *env) return env;
  return POSENC_CONSUMER_DATA;
}

using consumer::Pairing;

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
      const auto y = consumer::rope_f32(pg::tensor_to_f32(x), positions, heads, head_dim,
                                        rotary_dim, base, pairing);
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

}  // namespace
