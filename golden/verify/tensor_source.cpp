#include "golden/verify/tensor_source.hpp"

#ifdef _OPENMP
#include <omp.h>
#endif

#include <algorithm>
#include <atomic>
#include <exception>
#include <set>
#include <thread>
#include <utility>

#include "reference/common/errors.hpp"
#include "reference/common/mutant.hpp"

namespace posenc::golden {

namespace {

void check_range(const TensorEntry& e, std::int64_t b, std::int64_t end, const char* who) {
  const std::uint64_t size = static_cast<std::uint64_t>(dtype_size(e.dtype));
  if (b < 0 || end < b || static_cast<std::uint64_t>(end) * size > e.bytes) {
    throw_invalid(who, "element range outside tensor \"" + e.name + "\"",
                  "[" + std::to_string(b) + ", " + std::to_string(end) + ")");
  }
}

}  // namespace

Tensor TensorSource::load(const std::string& name) {
  const TensorEntry* e = find(name);
  if (e == nullptr) throw_invalid("TensorSource::load", "no such tensor", name);
  Tensor t;
  t.name = name;
  t.dtype = e->dtype;
  t.shape = e->shape;
  const std::int64_t n = static_cast<std::int64_t>(e->bytes / dtype_size(e->dtype));
  const std::span<const std::uint8_t> bytes = read(name, 0, n);
  t.data.assign(bytes.begin(), bytes.end());
  return t;
}

// ---- MapSource -------------------------------------------------------------------------------

MapSource::MapSource(const std::map<std::string, Tensor>& m) : m_(m) {
  for (const auto& [name, t] : m) {
    entries_[name] = {name, t.dtype, t.shape, 0, static_cast<std::uint64_t>(t.data.size())};
  }
}

const TensorEntry* MapSource::find(const std::string& name) const {
  auto it = entries_.find(name);
  return it == entries_.end() ? nullptr : &it->second;
}

std::vector<std::string> MapSource::names() const {
  std::vector<std::string> out;
  for (const auto& [name, e] : entries_) out.push_back(name);
  return out;
}

std::span<const std::uint8_t> MapSource::read(const std::string& name, std::int64_t b,
                                              std::int64_t e) {
  const TensorEntry* entry = find(name);
  if (entry == nullptr) throw_invalid("MapSource::read", "no such tensor", name);
  check_range(*entry, b, e, "MapSource::read");
  const std::size_t size = static_cast<std::size_t>(dtype_size(entry->dtype));
  return std::span<const std::uint8_t>(m_.at(name).data).subspan(b * size, (e - b) * size);
}

// ---- FileSource ------------------------------------------------------------------------------

struct FileSource::Slot {
  TensorEntry entry;
  const InputFile* file = nullptr;
  std::vector<std::uint8_t> buffer;
  Sha256 sha;
  std::uint64_t hashed = 0;  // bytes [0, hashed) are in sha or pending
  std::span<const std::uint8_t> pending;  // read, not yet hashed (the buffer's start)
  void flush() {
    if (!pending.empty()) sha.update(pending);
    pending = {};
  }
};

FileSource::FileSource() = default;
FileSource::~FileSource() = default;

void FileSource::add_safetensors(const std::filesystem::path& path) {
  files_.push_back(std::make_unique<InputFile>(path));
  TensorFileIndex index = safetensors_index(*files_.back());
  for (TensorEntry& e : index.entries) {
    auto slot = std::make_unique<Slot>();
    slot->file = files_.back().get();
    std::string name = e.name;
    slot->entry = std::move(e);
    slots_.insert_or_assign(std::move(name), std::move(slot));
  }
  metadata_ = std::move(index.metadata);
}

void FileSource::add_npy(const std::filesystem::path& path, const std::string& name) {
  files_.push_back(std::make_unique<InputFile>(path));
  TensorFileIndex index = npy_index(*files_.back(), name);
  auto slot = std::make_unique<Slot>();
  slot->file = files_.back().get();
  slot->entry = std::move(index.entries.front());
  slots_.insert_or_assign(name, std::move(slot));
}

const TensorEntry* FileSource::find(const std::string& name) const {
  auto it = slots_.find(name);
  return it == slots_.end() ? nullptr : &it->second->entry;
}

std::vector<std::string> FileSource::names() const {
  std::vector<std::string> out;
  for (const auto& [name, s] : slots_) out.push_back(name);
  return out;
}

std::span<const std::uint8_t> FileSource::read(const std::string& name, std::int64_t b,
                                               std::int64_t e) {
  auto it = slots_.find(name);
  if (it == slots_.end()) throw_invalid("FileSource::read", "no such tensor", name);
  Slot& s = *it->second;
  check_range(s.entry, b, e, "FileSource::read");
  s.flush();  // before the buffer is overwritten
  const std::uint64_t size = static_cast<std::uint64_t>(dtype_size(s.entry.dtype));
  const std::uint64_t begin = static_cast<std::uint64_t>(b) * size;
  const std::uint64_t n = static_cast<std::uint64_t>(e - b) * size;
  if (s.buffer.size() < n) {
    buffer_bytes_ += n - s.buffer.size();
    s.buffer.resize(n);
    peak_buffer_bytes_ = std::max(peak_buffer_bytes_, buffer_bytes_);
  }
  const std::span<std::uint8_t> out(s.buffer.data(), n);
  s.file->read_at(s.entry.offset + begin, out);
  if (hashing_ && begin == s.hashed && n > 0) {
    s.pending = out;
    s.hashed += n;
  }
  return out;
}

void FileSource::flush() {
  for (auto& [name, s] : slots_) s->flush();
}

void FileSource::release() {
  for (auto& [name, s] : slots_) {
    s->flush();
    std::vector<std::uint8_t>().swap(s->buffer);
  }
  buffer_bytes_ = 0;
}

void FileSource::start_golden_check(const CaseSpec& spec, const std::string& source) {
  std::set<std::string> listed;
  auto check = [&](const std::string& name, DType dtype, const std::vector<std::int64_t>& shape) {
    listed.insert(name);
    const TensorEntry* e = find(name);
    if (e == nullptr) {
      throw GoldenFileError(source + ": golden tensor \"" + name + "\" named in the manifest is missing");
    }
    if (e->dtype != dtype) {
      throw GoldenFileError(source + ": golden tensor \"" + name + "\" has dtype " +
                            std::string(dtype_short(e->dtype)) + ", the manifest says " +
                            std::string(dtype_short(dtype)));
    }
    if (e->shape != shape) {
      throw GoldenFileError(source + ": golden tensor \"" + name + "\" has the wrong shape");
    }
  };
  for (const auto& t : spec.inputs) check(t.name, t.dtype, t.shape);
  for (const auto& t : spec.expected) {
    check(t.name, t.dtype, t.shape);
    for (const auto& c : t.companions) check(c.name, c.dtype, t.shape);
  }
  for (const auto& [name, s] : slots_) {
    if (!listed.count(name) && !POSENC_MUTANT("golden_unlisted_tensor_allowed")) {
      throw GoldenFileError(source + ": golden tensor \"" + name + "\" is not listed in the manifest");
    }
  }
  hashing_ = true;
}

void FileSource::finish_golden_check(const CaseSpec& spec, const std::string& source) {
  flush();
  // The tensors in the manifest's order, each once.
  std::vector<std::pair<std::string, std::string>> listed;  // name, manifest digest
  for (const auto& t : spec.inputs) listed.emplace_back(t.name, t.sha256);
  for (const auto& t : spec.expected) {
    listed.emplace_back(t.name, t.sha256);
    for (const auto& c : t.companions) listed.emplace_back(c.name, c.sha256);
  }
  // Those not read to their end (inputs, other profiles' companions) are hashed from where
  // their hash stopped, one tensor per thread (up to the OpenMP thread limit): a tensor's
  // digest is one sequential SHA-256, but tensors are independent.
  std::vector<Slot*> rest;
  std::set<const Slot*> seen;
  for (const auto& [name, sha] : listed) {
    Slot* s = slots_.at(name).get();
    if (s->hashed < s->entry.bytes && seen.insert(s).second) rest.push_back(s);
  }
  const std::vector<std::exception_ptr> errors = hash_to_end(rest);
  for (const auto& [name, sha] : listed) {
    Slot* slot = slots_.at(name).get();
    for (std::size_t i = 0; i < rest.size(); ++i) {  // its read error, as a sequential run met it
      if (rest[i] == slot && errors[i]) std::rethrow_exception(errors[i]);
    }
    if (slot->sha.hex() != sha && !POSENC_MUTANT("golden_companion_hash_unchecked")) {
      throw GoldenFileError(source + ": golden tensor \"" + name +
                            "\" does not match its SHA-256 in the manifest (corrupted or tampered file?)");
    }
  }
  hashing_ = false;
}

std::vector<std::exception_ptr> FileSource::hash_to_end(const std::vector<Slot*>& slots) {
  auto one = [](Slot& s) {
    constexpr std::uint64_t kPiece = 4u << 20;
    std::vector<std::uint8_t> buffer(
        static_cast<std::size_t>(std::min(kPiece, s.entry.bytes - s.hashed)));
    for (std::uint64_t at = s.hashed; at < s.entry.bytes;) {
      const std::uint64_t n = std::min<std::uint64_t>(buffer.size(), s.entry.bytes - at);
      const std::span<std::uint8_t> piece(buffer.data(), n);
      s.file->read_at(s.entry.offset + at, piece);
      s.sha.update(piece);
      at += n;
    }
    s.hashed = s.entry.bytes;
  };
  int threads = 1;
#ifdef _OPENMP
  threads = omp_get_max_threads();
#endif
  threads = static_cast<int>(std::min<std::size_t>(static_cast<std::size_t>(std::max(threads, 1)),
                                                   slots.size()));
  // Plain threads taking the next tensor; each tensor's read error is kept for the caller.
  std::atomic<std::size_t> next{0};
  std::vector<std::exception_ptr> errors(slots.size());
  auto work = [&] {
    for (std::size_t i; (i = next.fetch_add(1)) < slots.size();) {
      try {
        one(*slots[i]);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  return errors;
}

}  // namespace posenc::golden
