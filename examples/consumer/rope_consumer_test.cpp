// The committed golden case rope_half_d128_b1e4_llama2_7b_f32 checked, with the GoogleTest helper
// golden/gtest.hpp of an installed posenc, against a float32 RoPE kernel written the way a PyTorch
// user writes it (rope_f32.hpp). A second kernel pairs the channels the wrong way (interleaved
// instead of half-split) and must fail: the check is shown able to fail. This test links
// posenc::verify alone (no oracle, no kernels, no MPFR): tools/consumer_test.cmake checks its
// link line and its binary. rope_property_test runs posenc's properties on the same kernel.
//
// With POSENC_CONSUMER_PLAN set to a plan manifest (plan.json of `posenc generate --config` on a
// model whose layer types all rotate unscaled, e.g. Gemma 2), the same kernel is also checked
// as a model's layers: the plan is read and checked (plan_manifest_read), every layer type's
// case verified on the kernel's rotation, and every layer on its own output
// (plan_verify_layers); a kernel with the other pairing fails every layer.
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "golden/gtest.hpp"
#include "golden/verify/plan_verify.hpp"
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

// Runs the kernel on a case's inputs q, k and positions with head_dim, rotary_dim and base read
// from `rope` (the case's params, or a plan type's block); returns the outputs q_rot, k_rot.
pg::TensorMap run_kernel(const pg::LoadedCase& c, const nlohmann::json& rope, Pairing pairing) {
  const auto head_dim = rope.at("head_dim").get<std::int64_t>();
  const auto rotary_dim = rope.at("rotary_dim").get<std::int64_t>();
  const auto base = rope.at("base").get<float>();
  const pg::Tensor& pos = c.golden.at("positions");
  std::vector<std::int64_t> positions(pos.numel());
  for (std::int64_t i = 0; i < pos.numel(); ++i) positions[i] = pos.get_i64(i);
  std::vector<pg::Tensor> out;
  for (const char* name : {"q", "k"}) {
    const pg::Tensor& x = c.golden.at(name);
    const std::int64_t heads = x.shape.at(1);
    const auto y = consumer::rope_f32(pg::tensor_to_f32(x), positions, heads, head_dim,
                                      rotary_dim, base, pairing);
    out.push_back(pg::tensor_from_f32(std::string(name) + "_rot", x.shape, y));
  }
  return pg::tensor_map(std::move(out));
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

  pg::TensorMap run(Pairing pairing) const {
    return run_kernel(c_, c_.spec.manifest.at("params"), pairing);
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

// ---- a model's plan, verified with posenc::verify alone -------------------------------------

class PlanConsumer : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* plan = std::getenv("POSENC_CONSUMER_PLAN");
    if (plan == nullptr || *plan == 0) GTEST_SKIP() << "POSENC_CONSUMER_PLAN is not set";
    plan_ = pg::plan_manifest_read(plan);
    for (const auto& t : plan_.types) {
      ASSERT_EQ(t.type.at("rope"), "rope") << t.name;
      ASSERT_EQ(t.type.at("scaling").at("type"), "default") << t.name << ": the kernel is unscaled";
      cases_.push_back(pg::load_case(t.manifest));
    }
  }

  // Every layer verified on the kernel's output for its type's case, under fp32. The layer
  // folders ACT/layers/NN exist (plan_verify_layers reads a layer only where its folder is); the
  // reader hands the kernel's tensors over in memory.
  std::vector<pg::PlanLayerResult> layers(Pairing pairing) const {
    const fs::path act = fs::path(::testing::TempDir()) / "posenc_consumer_plan";
    for (int l = 0; l < plan_.n_layers; ++l)
      fs::create_directories(act / "layers" / pg::plan_layer_dir_name(l, plan_.n_layers));
    pg::VerifyOptions opt;
    opt.profile = "fp32";
    return pg::plan_verify_layers(
        plan_, act, opt,
        [&](const fs::path&, const std::string& id) -> std::optional<pg::TensorMap> {
          for (std::size_t t = 0; t < plan_.types.size(); ++t) {
            if (plan_.types[t].case_id == id) return run_kernel(cases_[t], plan_.types[t].type, pairing);
          }
          return std::nullopt;
        });
  }

  pg::PlanManifest plan_;
  std::vector<pg::LoadedCase> cases_;
};

TEST_F(PlanConsumer, EveryLayerTypesCasePassesFp32) {
  ASSERT_GE(plan_.types.size(), 2u);
  for (std::size_t t = 0; t < plan_.types.size(); ++t) {
    EXPECT_POSENC_CASE(cases_[t], run_kernel(cases_[t], plan_.types[t].type, Pairing::kHalfSplit),
                       "fp32")
        << plan_.types[t].name;
  }
}

TEST_F(PlanConsumer, EveryLayerPassesOnItsOwnOutput) {
  const auto results = layers(Pairing::kHalfSplit);
  ASSERT_EQ(static_cast<int>(results.size()), plan_.n_layers);
  for (const auto& r : results)
    EXPECT_EQ(r.report.status, pg::Verdict::kPass) << "layer " << r.layer << ": " << r.report.message;
}

TEST_F(PlanConsumer, TheOtherPairingFailsEveryLayer) {
  const auto results = layers(Pairing::kInterleaved);
  ASSERT_EQ(static_cast<int>(results.size()), plan_.n_layers);
  for (const auto& r : results) EXPECT_EQ(r.report.status, pg::Verdict::kFail) << "layer " << r.layer;
}

}  // namespace
