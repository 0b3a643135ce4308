// libFuzzer target: verify on a mutated engine output. The golden case (a small committed one,
// POSENC_FUZZ_CASE) is loaded once; each input is the engine's output safetensors file, mutated
// by the fuzzer, judged under every profile and printed as text and JSON. verify must return a
// verdict (PASS, FAIL, ERROR, ...) or reject the file cleanly, never crash or hang.
#include <cstddef>
#include <cstdint>
#include <span>

#include "fuzz/fuzz_common.hpp"
#include "golden/format/profiles.hpp"
#include "golden/verify/catalog.hpp"

using namespace posenc;
using namespace posenc::golden;

namespace {
const LoadedCase& golden_case() {
  static const LoadedCase lc = load_case(POSENC_FUZZ_CASE);
  return lc;
}
}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  (void)golden_case();  // a broken committed case fails here, before any input
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const LoadedCase& lc = golden_case();
  TensorMap actual;
  fuzz::expect_clean("safetensors_decode", [&] {
    actual = tensor_map(safetensors_decode(std::span<const std::uint8_t>(data, size), "fuzz"));
  });
  if (actual.empty()) return 0;
  for (const auto& p : profiles()) {
    VerifyOptions opt;
    opt.profile = p.name;
    opt.require_all = size % 2 == 1;  // both modes, chosen by the input
    fuzz::expect_clean("verify_case", [&] {
      const CaseReport r = verify_case(lc.spec, lc.golden, actual, opt);
      fuzz::require(r.status != Verdict::kMissing && r.status != Verdict::kNoOutput, "verify gives a case status");
      (void)format_case_text(r, /*verbose=*/true, /*by_position=*/true);
      (void)case_report_json(r, /*by_position=*/true).dump();
    });
  }
  return 0;
}
