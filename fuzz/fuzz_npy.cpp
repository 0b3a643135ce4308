// libFuzzer target: npy_decode on arbitrary bytes. An accepted file must survive a round trip
// (npy_encode of the tensor decodes to the same dtype, shape and bytes).
#include <cstddef>
#include <cstdint>
#include <span>

#include "fuzz/fuzz_common.hpp"
#include "golden/format/format.hpp"

using namespace posenc;
using namespace posenc::golden;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz::expect_clean("npy_decode", [&] {
    const Tensor t = npy_decode(std::span<const std::uint8_t>(data, size), "x", "fuzz");
    fuzz::require(static_cast<std::size_t>(t.numel()) * dtype_size(t.dtype) == t.data.size(),
                  "decoded tensor size is numel * dtype size");
    const Tensor again = npy_decode(npy_encode(t), "x", "fuzz re-encoded");
    fuzz::require(again.dtype == t.dtype && again.shape == t.shape && again.data == t.data,
                  "round trip keeps the tensor");
  });
  return 0;
}
