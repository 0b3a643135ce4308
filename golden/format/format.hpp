// Golden file formats: safetensors and .npy tensors, SHA-256, atomic file writes.
//
// safetensors is the plain tensor container of the Hugging Face ecosystem, readable by every
// engine under test without code execution. Byte layout:
//   [0, 8)        N, the header length, unsigned 64-bit little-endian
//   [8, 8 + N)    UTF-8 JSON object: {"__metadata__": {str: str}, "<name>": {"dtype": "F32",
//                 "shape": [2, 3], "data_offsets": [begin, end]}, ...}, padded with spaces
//   [8 + N, EOF)  the data section; each tensor is the byte range [begin, end) of it, raw
//                 little-endian elements in C (row-major) order
//
// The encoder is deterministic (sorted keys, sorted data layout, no free whitespace, header
// padded so that the data section starts at a multiple of 8): the same tensors always give the
// same bytes, so a golden file can be pinned by its SHA-256 in a manifest and regenerated
// byte-for-byte on any machine.
//
// The decoders are strict. A malformed, truncated or unreadable file is a GoldenFileError whose
// message starts with the file's path. A well-formed file whose numbers disagree with the
// reference is not an error here: that mismatch is data, reported by the verifier.
#pragma once
#include <array>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "reference/common/dtype.hpp"

namespace posenc::golden {

/// One named tensor: dtype, shape and its elements as little-endian raw bytes in C order.
struct Tensor {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<std::int64_t> shape;
  std::vector<std::uint8_t> data;

  /// Product of the shape (1 for rank 0); InvalidArgument on a negative dim or overflow.
  std::int64_t numel() const;
  /// Element i as a double: exact for every float dtype; integers converted (exact below 2^53).
  double get_f64(std::int64_t i) const;
  /// Element i of an I64 or I32 tensor; InvalidArgument for float dtypes.
  std::int64_t get_i64(std::int64_t i) const;
  /// Raw bit pattern of element i, zero-extended to 64 bits.
  std::uint64_t get_bits(std::int64_t i) const;
};

/// Builds an F64 tensor; InvalidArgument when the shape does not match v.size().
Tensor tensor_from_f64(std::string name, std::vector<std::int64_t> shape,
                       std::span<const double> v);
/// Builds an F32 tensor; InvalidArgument when the shape does not match v.size().
Tensor tensor_from_f32(std::string name, std::vector<std::int64_t> shape,
                       std::span<const float> v);
/// Builds an I64 tensor; InvalidArgument when the shape does not match v.size().
Tensor tensor_from_i64(std::string name, std::vector<std::int64_t> shape,
                       std::span<const std::int64_t> v);
/// Builds an I32 tensor; InvalidArgument when the shape does not match v.size().
Tensor tensor_from_i32(std::string name, std::vector<std::int64_t> shape,
                       std::span<const std::int32_t> v);
/// Builds a BF16 or F16 tensor from bit patterns; InvalidArgument for any other dtype.
Tensor tensor_from_bits16(std::string name, DType dtype, std::vector<std::int64_t> shape,
                          std::span<const std::uint16_t> v);

/// Float tensor to floats (F64 rounded to nearest even); InvalidArgument for integer dtypes.
std::vector<float> tensor_to_f32(const Tensor& t);
/// Any tensor to doubles: exact for float dtypes, integers converted (exact below 2^53).
std::vector<double> tensor_to_f64(const Tensor& t);

/// Deterministic safetensors encoding; InvalidArgument on a duplicate or reserved name or on
/// data whose size does not match dtype and shape.
///
/// Layout: 8-byte LE header length N, N bytes of JSON header, then the data. Header keys in
/// sorted order ("__metadata__" first if metadata is non-empty, then tensor names sorted),
/// data_offsets assigned in sorted-name order, header padded with spaces so that 8 + N is a
/// multiple of 8, no whitespace in the JSON other than that padding.
std::vector<std::uint8_t> safetensors_encode(
    const std::vector<Tensor>& tensors, const std::map<std::string, std::string>& metadata = {});

class Sha256;
class AtomicFile;  // golden/format/output_path.hpp

/// An open spill file: a temporary file unlinked as soon as it was created (nothing is left
/// behind however the process ends), read back through its descriptor; closed when the last
/// copy goes.
struct SpillFile {
  int fd = -1;
  std::string name;  // where it was created (messages)
  ~SpillFile();
};

/// A tensor whose data lies in a file of its own (TensorSpill), for tensors too large to hold
/// in memory.
struct SpilledTensor {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<std::int64_t> shape;
  std::shared_ptr<const SpillFile> file;
  std::uint64_t bytes = 0;
  std::string sha256;  // of the data
};

/// Writes one tensor's data chunk by chunk to a temp file (in `dir`, default the system temp
/// folder: $TMPDIR; unlinked at creation), hashing as it goes. finish() checks that exactly numel * dtype size bytes
/// came (InvalidArgument otherwise) and hands the file over; an unfinished spill removes it.
class TensorSpill {
 public:
  TensorSpill(std::string name, DType dtype, std::vector<std::int64_t> shape,
              const std::filesystem::path& dir = {});
  ~TensorSpill();
  TensorSpill(const TensorSpill&) = delete;
  TensorSpill& operator=(const TensorSpill&) = delete;
  void append(std::span<const std::uint8_t> bytes);
  SpilledTensor finish();

 private:
  SpilledTensor t_;
  std::uint64_t expected_ = 0;
  std::FILE* f_ = nullptr;
  Sha256* sha_ = nullptr;
};

/// The bytes of a spilled tensor, read back (for code that needs the tensor in memory).
Tensor spilled_tensor_read(const SpilledTensor& s);

/// What safetensors_write wrote: the file's size and SHA-256.
struct WrittenFile {
  std::uint64_t bytes = 0;
  std::string sha256;
};

/// Writes exactly safetensors_encode's bytes for tensors + spilled (the same sorted layout) to
/// path atomically (write_file_atomic's temp file, fsync, rename), copying the data `chunk`
/// bytes at a time: memory is the header and one chunk, never the file. The same errors as
/// safetensors_encode and write_file_atomic.
WrittenFile safetensors_write(const std::filesystem::path& path, const std::vector<Tensor>& tensors,
                              const std::vector<SpilledTensor>& spilled,
                              const std::map<std::string, std::string>& metadata = {},
                              std::size_t chunk = std::size_t{1} << 20);
/// The same into an open AtomicFile (OutputRule::open: the path resolved once), committed.
WrittenFile safetensors_write(AtomicFile& f, const std::vector<Tensor>& tensors,
                              const std::vector<SpilledTensor>& spilled,
                              const std::map<std::string, std::string>& metadata = {},
                              std::size_t chunk = std::size_t{1} << 20);

/// Strict safetensors decoding; every problem is a GoldenFileError starting with `source`.
///
/// Checks: at least 8 bytes; header length at most POSENC_MAX_HEADER_BYTES (100 MiB) and within
/// the file; the header is a JSON object without duplicate keys, nested at most
/// POSENC_MAX_JSON_DEPTH deep; every entry has exactly dtype (F64, F32, BF16, F16, I64, I32),
/// shape (non-negative ints) and data_offsets [begin, end] with end - begin equal to
/// numel * dtype size (multiplied with overflow checks, at most POSENC_MAX_TENSOR_BYTES); the
/// ranges lie in the data section, do not overlap and cover it without gaps. Returns the
/// tensors sorted by name and fills *metadata when given.
std::vector<Tensor> safetensors_decode(std::span<const std::uint8_t> bytes,
                                       const std::string& source,
                                       std::map<std::string, std::string>* metadata = nullptr);
/// Reads and decodes a safetensors file; errors name the path. The same checks as
/// safetensors_decode, made on the header before any tensor is read, then each tensor read
/// straight into its own buffer (memory: the tensors, not the file twice); a file over
/// POSENC_MAX_FILE_BYTES or a path that is not a regular file is refused first.
std::vector<Tensor> safetensors_read(const std::filesystem::path& path,
                                     std::map<std::string, std::string>* metadata = nullptr);

class InputFile;  // golden/format/limits.hpp

/// Where one tensor of a tensor file lies: dtype, shape and the byte range [offset, offset +
/// bytes) of its raw little-endian elements in the file.
struct TensorEntry {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<std::int64_t> shape;
  std::uint64_t offset = 0, bytes = 0;
};

/// The header of a tensor file, read without its data (streaming readers, golden/verify/).
struct TensorFileIndex {
  std::vector<TensorEntry> entries;  // sorted by name
  std::map<std::string, std::string> metadata;
};

/// The checks of safetensors_read, made on the header alone (the data is not read): memory
/// is the header's. Errors name f.path().
TensorFileIndex safetensors_index(const InputFile& f);
/// The checks of npy_read on the header alone; the one entry is called `name`.
TensorFileIndex npy_index(const InputFile& f, const std::string& name);

/// Strict .npy decoding (format 1.0, 2.0, 3.0); every problem is a GoldenFileError.
///
/// Accepted descr: '<f8', '<f4', '<f2', '<i8', '<i4' ('|' accepted in place of '<') and '<u2',
/// which is read as BF16 bits: numpy has no bfloat16, so engines save bf16 as a uint16 view.
/// fortran_order must be False; shape is a tuple of non-negative ints, () and (n,) included;
/// the data must be exactly numel * size bytes.
Tensor npy_decode(std::span<const std::uint8_t> bytes, const std::string& name,
                  const std::string& source);
/// Reads and decodes a .npy file into a tensor called `name`; errors name the path.
Tensor npy_read(const std::filesystem::path& path, const std::string& name);
/// Encodes a tensor as .npy (version 1.0, 2.0 when the header needs it); BF16 becomes '<u2'.
std::vector<std::uint8_t> npy_encode(const Tensor& t);

/// SHA-256 (FIPS 180-4) of the bytes as 64 lower-case hex digits.
std::string sha256_hex(std::span<const std::uint8_t> bytes);

/// Incremental SHA-256: update() with consecutive pieces of a message, then hex() once.
/// OpenSSL's libcrypto computes it (SHA-NI where the CPU has it: about 2 GB/s on one core,
/// several times the portable code it replaced; docs/performance.md).
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  Sha256(Sha256&& other) noexcept;
  Sha256& operator=(Sha256&& other) noexcept;
  void update(std::span<const std::uint8_t> bytes);
  /// 64 lower-case hex digits of the whole message; call once, after the last update.
  std::string hex();

 private:
  void* ctx_ = nullptr;  // EVP_MD_CTX
};

/// Whole file as bytes; GoldenFileError "<path>: cannot open ...", "<path>: read error ...",
/// "<path>: is a FIFO, not a regular file" (limits.hpp) or, over POSENC_MAX_FILE_BYTES, the
/// limit, before anything is allocated.
std::vector<std::uint8_t> read_file(const std::filesystem::path& path);

/// Writes a temp file ".posenc.<pid>.<n>.tmp" beside path (created with O_EXCL through the
/// parent folder's handle), fsyncs it, then renames it over path within that folder: never
/// a partial file (golden/format/output_path.hpp, AtomicFile). Writes regular files only: a
/// FIFO, device, socket, directory or dangling symbolic link at path is refused; a symbolic link
/// to a regular file has that file replaced. Creates missing parent directories. GoldenFileError
/// on failure, after removing the temp file. Commands go through OutputRule::write, which adds
/// the checks against the command's own inputs and foreign files.
void write_file_atomic(const std::filesystem::path& path, std::span<const std::uint8_t> bytes);
/// write_file_atomic of the text's bytes.
void write_text_atomic(const std::filesystem::path& path, std::string_view text);

}  // namespace posenc::golden
