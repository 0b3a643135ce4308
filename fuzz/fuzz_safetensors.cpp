// libFuzzer target: safetensors_decode on arbitrary bytes. Accepted files must read every
// element and survive a round trip (encode the decoded tensors, decode again: same tensors).
#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>

#include "fuzz/fuzz_common.hpp"
#include "golden/format/format.hpp"

using namespace posenc;
using namespace posenc::golden;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz::expect_clean("safetensors_decode", [&] {
    std::map<std::string, std::string> meta;
    const auto tensors = safetensors_decode(std::span<const std::uint8_t>(data, size), "fuzz", &meta);
    double sum = 0;
    for (const auto& t : tensors) {
      const std::int64_t n = t.numel();
      fuzz::require(static_cast<std::size_t>(n) * dtype_size(t.dtype) == t.data.size(),
                    "decoded tensor size is numel * dtype size");
      for (std::int64_t i = 0; i < n; ++i) sum += static_cast<double>(t.get_bits(i) & 1u);
      if (n > 0) sum += t.get_f64(n - 1) == 0;
    }
    const auto again = safetensors_decode(safetensors_encode(tensors, meta), "fuzz re-encoded");
    fuzz::require(again.size() == tensors.size(), "round trip keeps the tensor count");
    for (std::size_t k = 0; k < again.size(); ++k) {
      fuzz::require(again[k].name == tensors[k].name && again[k].dtype == tensors[k].dtype &&
                        again[k].shape == tensors[k].shape && again[k].data == tensors[k].data,
                    "round trip keeps every tensor");
    }
    (void)sum;
  });
  return 0;
}
