// Where the verifier reads tensors from: element ranges [b, e) of named tensors, so that verify
// can judge a tensor chunk by chunk (golden/verify/verify.hpp) whether the tensors are in
// memory (MapSource, zero-copy) or in files (FileSource: only the headers are read up front,
// then each range by pread into a buffer reused per tensor).
//
// Contract (FileSource): memory is the headers, plus per tensor being read one buffer of the
// largest range asked for (verify asks for at most kVerifyChunkElements elements), released by
// release(). With hashing on, every golden tensor's SHA-256 is computed while its bytes stream:
// a range that continues where the hash stopped is hashed (by flush(), or before the tensor's
// buffer is reused); finish_golden_check() reads
// what no one read (inputs, other profiles' companions; one tensor per thread, up to the OpenMP
// thread limit) and compares each tensor's digest with the manifest in the manifest's order,
// refusing a mismatch as check_golden_tensors does.
#pragma once
#include <cstdint>
#include <exception>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "golden/format/format.hpp"
#include "golden/format/limits.hpp"
#include "golden/format/manifest.hpp"

namespace posenc::golden {

class TensorSource {
 public:
  virtual ~TensorSource() = default;
  /// The tensor's dtype and shape (offset and bytes: where it lies), nullptr when absent.
  virtual const TensorEntry* find(const std::string& name) const = 0;
  /// Names of every tensor, sorted.
  virtual std::vector<std::string> names() const = 0;
  /// Raw little-endian bytes of elements [b, e) of a present tensor; valid until the next
  /// read() of the same tensor or release().
  virtual std::span<const std::uint8_t> read(const std::string& name, std::int64_t b,
                                             std::int64_t e) = 0;
  /// Frees the read buffers.
  virtual void release() {}
  /// Deferred work on the bytes read so far (FileSource: hashing them); verify runs it on a
  /// second thread while it judges them. No read() may run concurrently.
  virtual void flush() {}
  /// The whole tensor (for small ones: positions, labels, trace tables).
  Tensor load(const std::string& name);
  bool contains(const std::string& name) const { return find(name) != nullptr; }
};

/// Tensors already in memory; read() returns a view of the tensor's own bytes.
class MapSource : public TensorSource {
 public:
  explicit MapSource(const std::map<std::string, Tensor>& m);
  const TensorEntry* find(const std::string& name) const override;
  std::vector<std::string> names() const override;
  std::span<const std::uint8_t> read(const std::string& name, std::int64_t b,
                                     std::int64_t e) override;

 private:
  const std::map<std::string, Tensor>& m_;
  std::map<std::string, TensorEntry> entries_;
};

/// Tensors of safetensors and .npy files, read by range. A name given by a later file
/// replaces the earlier one (as the CLI's reading of an output folder does).
class FileSource : public TensorSource {
 public:
  FileSource();
  ~FileSource() override;
  /// Reads the header (every check of safetensors_read on it); the data stays on disk.
  void add_safetensors(const std::filesystem::path& path);
  /// Reads the .npy header; the array is the tensor `name`.
  void add_npy(const std::filesystem::path& path, const std::string& name);
  /// Metadata of the last safetensors file added.
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

  const TensorEntry* find(const std::string& name) const override;
  std::vector<std::string> names() const override;
  std::span<const std::uint8_t> read(const std::string& name, std::int64_t b,
                                     std::int64_t e) override;
  void release() override;
  void flush() override;

  /// check_golden_tensors' checks that need no data (every tensor the manifest lists is
  /// present with its dtype and shape, no other tensor), GoldenFileError naming `source`; then
  /// hashes every tensor as it is read.
  void start_golden_check(const CaseSpec& spec, const std::string& source);
  /// Hashes the bytes nobody read and compares every digest with the manifest's, in the
  /// manifest's order: GoldenFileError naming `source` as check_golden_tensors.
  void finish_golden_check(const CaseSpec& spec, const std::string& source);
  /// Largest buffer held at once so far, in bytes (all tensors together).
  std::uint64_t peak_buffer_bytes() const { return peak_buffer_bytes_; }

 private:
  struct Slot;
  /// Reads and hashes each slot from where its hash stopped to its end, several slots at once
  /// (one per thread, up to the OpenMP thread limit); returns each slot's read error, if any.
  std::vector<std::exception_ptr> hash_to_end(const std::vector<Slot*>& slots);
  std::vector<std::unique_ptr<InputFile>> files_;
  std::map<std::string, std::unique_ptr<Slot>> slots_;
  std::map<std::string, std::string> metadata_;
  bool hashing_ = false;
  std::uint64_t buffer_bytes_ = 0, peak_buffer_bytes_ = 0;
};

}  // namespace posenc::golden
