// Golden file formats: safetensors and .npy codecs, SHA-256, atomic writes (see format.hpp).
#include "golden/format/format.hpp"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <openssl/evp.h>
#include <optional>
#include <set>
#include <sstream>
#include <utility>

#include "golden/format/limits.hpp"
#include "golden/format/output_path.hpp"
#include "reference/common/errors.hpp"

namespace posenc::golden {
namespace {

constexpr std::string_view kMetadataKey = "__metadata__";
constexpr unsigned char kNpyMagic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
constexpr std::size_t kNpyAlign = 64;

// ---------------------------------------------------------------------------------------------
// Little-endian byte access.

std::uint64_t load_le(const std::uint8_t* p, int n) {
  std::uint64_t v = 0;
  for (int k = n - 1; k >= 0; --k) v = (v << 8) | p[k];
  return v;
}

void store_le(std::vector<std::uint8_t>& out, std::uint64_t v, int n) {
  for (int k = 0; k < n; ++k) out.push_back(static_cast<std::uint8_t>(v >> (8 * k)));
}

// Element of `dtype` at p as a double (exact for every float dtype).
double decode_f64(DType dtype, const std::uint8_t* p) {
  const std::uint64_t bits = load_le(p, dtype_size(dtype));
  switch (dtype) {
    case DType::kF64: return std::bit_cast<double>(bits);
    case DType::kF32: return std::bit_cast<float>(static_cast<std::uint32_t>(bits));
    case DType::kBF16: return bf16_to_float(static_cast<std::uint16_t>(bits));
    case DType::kF16: return f16_to_double(static_cast<std::uint16_t>(bits));
    case DType::kI64: return static_cast<double>(std::bit_cast<std::int64_t>(bits));
    case DType::kI32:
      return static_cast<double>(static_cast<std::int32_t>(static_cast<std::uint32_t>(bits)));
  }
  return 0.0;
}

// ---------------------------------------------------------------------------------------------
// Shapes and sizes.

// Product of the dims, or nullopt on a negative dim or int64 overflow.
std::optional<std::int64_t> checked_numel(std::span<const std::int64_t> shape) {
  for (const std::int64_t d : shape) {
    if (d < 0) return std::nullopt;
    if (d == 0) return 0;
  }
  std::int64_t n = 1;
  for (const std::int64_t d : shape) {
    if (__builtin_mul_overflow(n, d, &n)) return std::nullopt;
  }
  return n;
}

// numel * dtype_size as a byte count, or nullopt on overflow.
std::optional<std::uint64_t> checked_nbytes(std::span<const std::int64_t> shape, DType dtype) {
  const std::optional<std::int64_t> n = checked_numel(shape);
  if (!n) return std::nullopt;
  std::uint64_t bytes = 0;
  if (__builtin_mul_overflow(static_cast<std::uint64_t>(*n),
                             static_cast<std::uint64_t>(dtype_size(dtype)), &bytes)) {
    return std::nullopt;
  }
  return bytes;
}

std::string shape_string(std::span<const std::int64_t> shape) {
  std::string s = "[";
  for (std::size_t k = 0; k < shape.size(); ++k) {
    if (k > 0) s += ", ";
    s += std::to_string(shape[k]);
  }
  return s + "]";
}

// Throws InvalidArgument unless t.data holds exactly numel * size bytes.
void require_consistent(const Tensor& t, const char* function) {
  const std::optional<std::uint64_t> bytes = checked_nbytes(t.shape, t.dtype);
  if (!bytes) throw_invalid(function, "tensor '" + t.name + "' has an invalid shape",
                            shape_string(t.shape));
  if (*bytes != t.data.size()) {
    throw_invalid(function,
                  "tensor '" + t.name + "' needs " + std::to_string(*bytes) + " bytes of data",
                  t.data.size());
  }
}

// Tensor of `dtype` from `count` elements whose raw bits come from bits_of(k).
template <class BitsOf>
Tensor make_tensor(const char* function, std::string name, DType dtype,
                   std::vector<std::int64_t> shape, std::size_t count, BitsOf bits_of) {
  const std::optional<std::int64_t> n = checked_numel(shape);
  if (!n) throw_invalid(function, "invalid shape", shape_string(shape));
  if (static_cast<std::uint64_t>(*n) != count) {
    throw_invalid(function, "shape " + shape_string(shape) + " needs " + std::to_string(*n) +
                                " values", count);
  }
  Tensor t;
  t.name = std::move(name);
  t.dtype = dtype;
  t.shape = std::move(shape);
  const int size = dtype_size(dtype);
  t.data.reserve(count * static_cast<std::size_t>(size));
  for (std::size_t k = 0; k < count; ++k) store_le(t.data, bits_of(k), size);
  return t;
}

std::optional<DType> dtype_from_name(std::string_view s) {
  for (const DType t : {DType::kF64, DType::kF32, DType::kBF16, DType::kF16, DType::kI64,
                        DType::kI32}) {
    if (dtype_name(t) == s) return t;
  }
  return std::nullopt;
}

[[noreturn]] void fail(const std::string& source, const std::string& what) {
  throw GoldenFileError(source + ": " + what);
}

// ---------------------------------------------------------------------------------------------
// safetensors helpers.

// JSON string literal of s (nlohmann's escaping); InvalidArgument on invalid UTF-8.
std::string json_quote(const std::string& s) {
  try {
    return nlohmann::json(s).dump();
  } catch (const nlohmann::json::exception&) {
    throw_invalid("safetensors_encode", "name or metadata is not valid UTF-8", "'" + s + "'");
  }
}

// A non-negative JSON integer that fits in int64, or nullopt.
std::optional<std::int64_t> json_non_negative(const nlohmann::json& j) {
  if (j.is_number_unsigned()) {
    const auto u = j.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      return std::nullopt;
    }
    return static_cast<std::int64_t>(u);
  }
  if (j.is_number_integer()) {
    const auto v = j.get<std::int64_t>();
    if (v >= 0) return v;
  }
  return std::nullopt;
}

// Parses the header, rejecting invalid JSON, nesting beyond the limit and duplicate keys in
// any object.
nlohmann::json parse_header(std::string_view text, const std::string& source,
                            const InputLimits& limits) {
  check_json_depth(text, source, limits.json_depth);
  std::vector<std::set<std::string>> keys;  // one set per open object
  std::string duplicate;
  bool has_duplicate = false;
  const nlohmann::json::parser_callback_t callback =
      [&](int /*depth*/, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
        using Event = nlohmann::json::parse_event_t;
        if (event == Event::object_start) {
          keys.emplace_back();
        } else if (event == Event::object_end) {
          if (!keys.empty()) keys.pop_back();
        } else if (event == Event::key && !keys.empty() && parsed.is_string()) {
          const auto& k = parsed.get_ref<const std::string&>();
          if (!keys.back().insert(k).second && !has_duplicate) {
            has_duplicate = true;
            duplicate = k;
          }
        }
        return true;
      };
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(text.begin(), text.end(), callback);
  } catch (const nlohmann::json::exception& e) {
    fail(source, std::string("header is not valid JSON: ") + e.what());
  }
  if (has_duplicate) fail(source, "duplicate key " + json_quote(duplicate) + " in header");
  if (!header.is_object()) fail(source, "header is not a JSON object");
  return header;
}

struct Entry {
  std::string name;
  DType dtype;
  std::vector<std::int64_t> shape;
  std::uint64_t begin;
  std::uint64_t end;
};

Entry parse_entry(const std::string& name, const nlohmann::json& j, const std::string& source,
                  const InputLimits& limits) {
  const std::string who = "tensor " + json_quote(name);
  if (!j.is_object()) fail(source, who + ": header entry is not an object");
  for (const auto& [key, value] : j.items()) {
    if (key != "dtype" && key != "shape" && key != "data_offsets") {
      fail(source, who + ": unknown header field " + json_quote(key));
    }
  }
  for (const char* key : {"dtype", "shape", "data_offsets"}) {
    if (!j.contains(key)) fail(source, who + ": missing field \"" + key + "\"");
  }
  Entry e;
  e.name = name;
  const nlohmann::json& dtype = j.at("dtype");
  if (!dtype.is_string()) fail(source, who + ": dtype is not a string");
  const std::optional<DType> dt = dtype_from_name(dtype.get_ref<const std::string&>());
  if (!dt) fail(source, who + ": unsupported dtype " + dtype.dump());
  e.dtype = *dt;

  const nlohmann::json& shape = j.at("shape");
  if (!shape.is_array()) fail(source, who + ": shape is not an array");
  for (const nlohmann::json& d : shape) {
    const std::optional<std::int64_t> v = json_non_negative(d);
    if (!v) fail(source, who + ": shape entry " + d.dump() + " is not a non-negative integer");
    e.shape.push_back(*v);
  }
  const std::optional<std::uint64_t> nbytes = checked_nbytes(e.shape, e.dtype);
  if (!nbytes) fail(source, who + ": shape " + shape_string(e.shape) + " overflows");
  check_limit(source, who + " (" + std::string(dtype_name(e.dtype)) + " " +
                          shape_string(e.shape) + ")",
              *nbytes, limits.tensor_bytes, "POSENC_MAX_TENSOR_BYTES");

  const nlohmann::json& offsets = j.at("data_offsets");
  if (!offsets.is_array() || offsets.size() != 2) {
    fail(source, who + ": data_offsets is not a [begin, end] pair");
  }
  const std::optional<std::int64_t> begin = json_non_negative(offsets[0]);
  const std::optional<std::int64_t> end = json_non_negative(offsets[1]);
  if (!begin || !end) fail(source, who + ": data_offsets are not non-negative integers");
  e.begin = static_cast<std::uint64_t>(*begin);
  e.end = static_cast<std::uint64_t>(*end);
  const std::string range = "[" + std::to_string(e.begin) + ", " + std::to_string(e.end) + "]";
  if (e.end < e.begin) fail(source, who + ": data_offsets " + range + " end before begin");
  if (e.end - e.begin != *nbytes) {
    fail(source, who + ": data_offsets " + range + " hold " + std::to_string(e.end - e.begin) +
                     " bytes, but dtype " + std::string(dtype_name(e.dtype)) + " and shape " +
                     shape_string(e.shape) + " need " + std::to_string(*nbytes));
  }
  return e;
}

// ---------------------------------------------------------------------------------------------
// .npy header: a Python dict literal such as {'descr': '<f4', 'fortran_order': False,
// 'shape': (2, 3), }. Only that subset of Python syntax is parsed.

struct NpyHeader {
  DType dtype = DType::kF32;
  std::vector<std::int64_t> shape;
};

class NpyHeaderParser {
 public:
  NpyHeaderParser(std::string_view text, const std::string& source)
      : text_(text), source_(source) {}

  NpyHeader parse() {
    NpyHeader h;
    bool have_descr = false, have_order = false, have_shape = false;
    skip_ws();
    expect('{');
    skip_ws();
    while (!at('}')) {
      const std::string key = parse_string();
      skip_ws();
      expect(':');
      skip_ws();
      if (key == "descr") {
        if (have_descr) error("duplicate key 'descr'");
        have_descr = true;
        h.dtype = descr_to_dtype(parse_string());
      } else if (key == "fortran_order") {
        if (have_order) error("duplicate key 'fortran_order'");
        have_order = true;
        if (parse_bool()) error("fortran_order True is not supported (C order only)");
      } else if (key == "shape") {
        if (have_shape) error("duplicate key 'shape'");
        have_shape = true;
        h.shape = parse_tuple();
      } else {
        error("unknown key '" + key + "'");
      }
      skip_ws();
      if (at(',')) {
        ++pos_;
        skip_ws();
      } else if (!at('}')) {
        error("expected ',' or '}'");
      }
    }
    ++pos_;  // '}'
    skip_ws();
    if (pos_ != text_.size()) error("unexpected text after the dict");
    if (!have_descr || !have_order || !have_shape) {
      error("header dict lacks one of 'descr', 'fortran_order', 'shape'");
    }
    return h;
  }

 private:
  [[noreturn]] void error(const std::string& what) const {
    fail(source_, "bad .npy header at offset " + std::to_string(pos_) + ": " + what);
  }

  bool at(char c) const { return pos_ < text_.size() && text_[pos_] == c; }

  void skip_ws() {
    while (pos_ < text_.size() &&
           (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' ||
            text_[pos_] == '\r')) {
      ++pos_;
    }
  }

  void expect(char c) {
    if (!at(c)) error(std::string("expected '") + c + "'");
    ++pos_;
  }

  std::string parse_string() {
    if (!at('\'') && !at('"')) error("expected a string");
    const char quote = text_[pos_++];
    const std::size_t start = pos_;
    while (pos_ < text_.size() && text_[pos_] != quote) {
      if (text_[pos_] == '\\') error("escapes in strings are not supported");
      ++pos_;
    }
    if (pos_ >= text_.size()) error("unterminated string");
    return std::string(text_.substr(start, pos_++ - start));
  }

  bool parse_bool() {
    if (text_.substr(pos_, 4) == "True") {
      pos_ += 4;
      return true;
    }
    if (text_.substr(pos_, 5) == "False") {
      pos_ += 5;
      return false;
    }
    error("expected True or False");
  }

  std::int64_t parse_int() {
    if (pos_ >= text_.size() || text_[pos_] < '0' || text_[pos_] > '9') {
      error("expected a non-negative integer");
    }
    std::int64_t v = 0;
    while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
      if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, text_[pos_] - '0', &v)) {
        error("integer overflows int64");
      }
      ++pos_;
    }
    return v;
  }

  std::vector<std::int64_t> parse_tuple() {
    std::vector<std::int64_t> dims;
    expect('(');
    skip_ws();
    bool trailing_comma = false;
    while (!at(')')) {
      dims.push_back(parse_int());
      skip_ws();
      trailing_comma = at(',');
      if (trailing_comma) {
        ++pos_;
        skip_ws();
      } else if (!at(')')) {
        error("expected ',' or ')' in shape");
      }
    }
    ++pos_;  // ')'
    if (dims.size() == 1 && !trailing_comma) error("shape (n) is not a tuple, write (n,)");
    return dims;
  }

  DType descr_to_dtype(const std::string& descr) const {
    if (descr.size() == 3 && (descr[0] == '<' || descr[0] == '|')) {
      const std::string_view code = std::string_view(descr).substr(1);
      if (code == "f8") return DType::kF64;
      if (code == "f4") return DType::kF32;
      if (code == "f2") return DType::kF16;
      if (code == "i8") return DType::kI64;
      if (code == "i4") return DType::kI32;
      if (code == "u2") return DType::kBF16;  // bf16 saved as a uint16 view
    }
    if (!descr.empty() && descr[0] == '>') error("big-endian descr '" + descr + "' not supported");
    error("unsupported descr '" + descr + "'");
  }

  std::string_view text_;
  const std::string& source_;
  std::size_t pos_ = 0;
};

std::string_view npy_descr(DType t) {
  switch (t) {
    case DType::kF64: return "<f8";
    case DType::kF32: return "<f4";
    case DType::kBF16: return "<u2";
    case DType::kF16: return "<f2";
    case DType::kI64: return "<i8";
    case DType::kI32: return "<i4";
  }
  return "?";
}

// Owns a FILE* and closes it on scope exit.
struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using FilePtr = std::unique_ptr<std::FILE, FileCloser>;

}  // namespace

// -----------------------------------------------------------------------------------------------
// Tensor.

std::int64_t Tensor::numel() const {
  const std::optional<std::int64_t> n = checked_numel(shape);
  if (!n) throw_invalid("Tensor::numel", "negative dimension or overflow in shape",
                        shape_string(shape));
  return *n;
}

std::uint64_t Tensor::get_bits(std::int64_t i) const {
  const std::int64_t n = numel();
  if (i < 0 || i >= n) throw_invalid("Tensor::get_bits", "index out of range [0, " +
                                         std::to_string(n) + ")", i);
  const auto size = static_cast<std::size_t>(dtype_size(dtype));
  const auto offset = static_cast<std::size_t>(i) * size;
  if (offset + size > data.size()) {
    throw_invalid("Tensor::get_bits", "data shorter than the shape needs", data.size());
  }
  return load_le(data.data() + offset, static_cast<int>(size));
}

double Tensor::get_f64(std::int64_t i) const {
  const std::uint64_t bits = get_bits(i);
  std::uint8_t raw[8];
  for (int k = 0; k < 8; ++k) raw[k] = static_cast<std::uint8_t>(bits >> (8 * k));
  return decode_f64(dtype, raw);
}

std::int64_t Tensor::get_i64(std::int64_t i) const {
  if (dtype != DType::kI64 && dtype != DType::kI32) {
    throw_invalid("Tensor::get_i64", "integer dtype required", dtype_name(dtype));
  }
  const std::uint64_t bits = get_bits(i);
  if (dtype == DType::kI32) {
    return static_cast<std::int32_t>(static_cast<std::uint32_t>(bits));
  }
  return std::bit_cast<std::int64_t>(bits);
}

Tensor tensor_from_f64(std::string name, std::vector<std::int64_t> shape,
                       std::span<const double> v) {
  return make_tensor("tensor_from_f64", std::move(name), DType::kF64, std::move(shape),
                     v.size(), [&](std::size_t k) { return std::bit_cast<std::uint64_t>(v[k]); });
}

Tensor tensor_from_f32(std::string name, std::vector<std::int64_t> shape,
                       std::span<const float> v) {
  return make_tensor("tensor_from_f32", std::move(name), DType::kF32, std::move(shape),
                     v.size(), [&](std::size_t k) { return std::bit_cast<std::uint32_t>(v[k]); });
}

Tensor tensor_from_i64(std::string name, std::vector<std::int64_t> shape,
                       std::span<const std::int64_t> v) {
  return make_tensor("tensor_from_i64", std::move(name), DType::kI64, std::move(shape),
                     v.size(), [&](std::size_t k) { return static_cast<std::uint64_t>(v[k]); });
}

Tensor tensor_from_i32(std::string name, std::vector<std::int64_t> shape,
                       std::span<const std::int32_t> v) {
  return make_tensor("tensor_from_i32", std::move(name), DType::kI32, std::move(shape),
                     v.size(), [&](std::size_t k) { return static_cast<std::uint32_t>(v[k]); });
}

Tensor tensor_from_bits16(std::string name, DType dtype, std::vector<std::int64_t> shape,
                          std::span<const std::uint16_t> v) {
  if (dtype != DType::kBF16 && dtype != DType::kF16) {
    throw_invalid("tensor_from_bits16", "dtype must be BF16 or F16", dtype_name(dtype));
  }
  return make_tensor("tensor_from_bits16", std::move(name), dtype, std::move(shape), v.size(),
                     [&](std::size_t k) { return v[k]; });
}

std::vector<float> tensor_to_f32(const Tensor& t) {
  if (!dtype_is_float(t.dtype)) {
    throw_invalid("tensor_to_f32", "float dtype required", dtype_name(t.dtype));
  }
  require_consistent(t, "tensor_to_f32");
  const auto size = static_cast<std::size_t>(dtype_size(t.dtype));
  std::vector<float> out(t.data.size() / size);
  for (std::size_t k = 0; k < out.size(); ++k) {
    out[k] = static_cast<float>(decode_f64(t.dtype, t.data.data() + k * size));
  }
  return out;
}

std::vector<double> tensor_to_f64(const Tensor& t) {
  require_consistent(t, "tensor_to_f64");
  const auto size = static_cast<std::size_t>(dtype_size(t.dtype));
  std::vector<double> out(t.data.size() / size);
  for (std::size_t k = 0; k < out.size(); ++k) {
    out[k] = decode_f64(t.dtype, t.data.data() + k * size);
  }
  return out;
}

// -----------------------------------------------------------------------------------------------
// safetensors.

namespace {

// What the header says of one tensor: name, dtype, shape and its data size.
struct HeaderItem {
  const std::string* name;
  DType dtype;
  const std::vector<std::int64_t>* shape;
  std::uint64_t bytes;
};

// The header items sorted by name (the data layout); InvalidArgument on a reserved or repeated
// name.
void sort_items(std::vector<HeaderItem>& items, const char* function) {
  for (const auto& it : items) {
    if (*it.name == kMetadataKey) throw_invalid(function, "reserved tensor name", *it.name);
  }
  std::sort(items.begin(), items.end(),
            [](const HeaderItem& a, const HeaderItem& b) { return *a.name < *b.name; });
  for (std::size_t k = 1; k < items.size(); ++k) {
    if (*items[k - 1].name == *items[k].name) {
      throw_invalid(function, "duplicate tensor name", *items[k].name);
    }
  }
}

// The 8-byte length and the padded JSON header of sorted items; *data_bytes = the data size.
std::vector<std::uint8_t> header_bytes(const std::vector<HeaderItem>& sorted,
                                       const std::map<std::string, std::string>& metadata,
                                       std::uint64_t* data_bytes) {
  std::string header = "{";
  bool first = true;
  if (!metadata.empty()) {
    header += json_quote(std::string(kMetadataKey)) + ":{";
    bool first_item = true;
    for (const auto& [key, value] : metadata) {
      if (!first_item) header += ",";
      first_item = false;
      header += json_quote(key) + ":" + json_quote(value);
    }
    header += "}";
    first = false;
  }
  std::uint64_t offset = 0;
  for (const HeaderItem& t : sorted) {
    if (!first) header += ",";
    first = false;
    header += json_quote(*t.name) + ":{\"dtype\":\"" + std::string(dtype_name(t.dtype)) +
              "\",\"shape\":[";
    for (std::size_t k = 0; k < t.shape->size(); ++k) {
      if (k > 0) header += ",";
      header += std::to_string((*t.shape)[k]);
    }
    const std::uint64_t end = offset + t.bytes;
    header += "],\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(end) + "]}";
    offset = end;
  }
  header += "}";
  while ((8 + header.size()) % 8 != 0) header += ' ';
  std::vector<std::uint8_t> out;
  store_le(out, header.size(), 8);
  out.insert(out.end(), header.begin(), header.end());
  *data_bytes = offset;
  return out;
}

}  // namespace

std::vector<std::uint8_t> safetensors_encode(const std::vector<Tensor>& tensors,
                                             const std::map<std::string, std::string>& metadata) {
  std::vector<HeaderItem> items;
  items.reserve(tensors.size());
  std::map<const std::string*, const Tensor*> by_name;
  for (const Tensor& t : tensors) {
    require_consistent(t, "safetensors_encode");
    items.push_back({&t.name, t.dtype, &t.shape, t.data.size()});
    by_name[&t.name] = &t;
  }
  sort_items(items, "safetensors_encode");
  std::uint64_t data = 0;
  std::vector<std::uint8_t> out = header_bytes(items, metadata, &data);
  out.reserve(out.size() + data);
  for (const HeaderItem& it : items) {
    const Tensor* t = by_name.at(it.name);
    out.insert(out.end(), t->data.begin(), t->data.end());
  }
  return out;
}

namespace {

// The validated layout of a safetensors file: its entries and metadata, checked against the
// size of the data section before any tensor data is touched.
struct SafetensorsLayout {
  std::uint64_t header_len = 0;
  std::vector<Entry> entries;
  std::map<std::string, std::string> metadata;
};

// Checks the 8-byte length field against the limit and the file size (`size`, the whole file).
std::uint64_t checked_header_length(const std::uint8_t* field, std::uint64_t size,
                                    const std::string& source, const InputLimits& limits) {
  if (size < 8) {
    fail(source, "truncated: file has " + std::to_string(size) +
                     " bytes, less than the 8-byte header length");
  }
  const std::uint64_t header_len = load_le(field, 8);
  check_limit(source, "header length", header_len, limits.header_bytes,
              "POSENC_MAX_HEADER_BYTES");
  if (header_len > size - 8) {
    fail(source, "truncated: header length says " + std::to_string(header_len) +
                     " bytes, file has " + std::to_string(size - 8) + " after the length field");
  }
  return header_len;
}

// Parses the header text and checks every entry against the data section's size.
SafetensorsLayout safetensors_layout(std::string_view text, std::uint64_t data_size,
                                     const std::string& source, const InputLimits& limits) {
  SafetensorsLayout layout;
  layout.header_len = text.size();
  const nlohmann::json header = parse_header(text, source, limits);
  for (const auto& [name, value] : header.items()) {
    if (name == kMetadataKey) {
      if (!value.is_object()) fail(source, "__metadata__ is not an object");
      for (const auto& [key, item] : value.items()) {
        if (!item.is_string()) {
          fail(source, "__metadata__ value of " + json_quote(key) + " is not a string");
        }
        layout.metadata.emplace(key, item.get<std::string>());
      }
      continue;
    }
    layout.entries.push_back(parse_entry(name, value, source, limits));
  }

  std::uint64_t max_end = 0;
  for (const Entry& e : layout.entries) max_end = std::max(max_end, e.end);
  if (max_end > data_size) {
    fail(source, "truncated: header says " + std::to_string(max_end) + " bytes of data, file has " +
                     std::to_string(data_size));
  }
  std::vector<const Entry*> by_offset;
  for (const Entry& e : layout.entries) by_offset.push_back(&e);
  std::sort(by_offset.begin(), by_offset.end(), [](const Entry* a, const Entry* b) {
    return std::pair(a->begin, a->end) < std::pair(b->begin, b->end);
  });
  std::uint64_t covered = 0;
  const Entry* previous = nullptr;
  for (const Entry* e : by_offset) {
    if (e->begin < covered) {
      fail(source, "tensors " + json_quote(previous->name) + " and " + json_quote(e->name) +
                       " have overlapping data_offsets");
    }
    if (e->begin > covered) {
      fail(source, "gap in the data section: bytes [" + std::to_string(covered) + ", " +
                       std::to_string(e->begin) + ") belong to no tensor");
    }
    covered = e->end;
    previous = e;
  }
  if (covered != data_size) {
    fail(source, std::to_string(data_size - covered) + " trailing bytes after the last tensor");
  }
  return layout;
}

// Tensor of an entry whose data `fill` writes into a buffer of the entry's size.
template <class Fill>
std::vector<Tensor> safetensors_tensors(SafetensorsLayout& layout, Fill fill) {
  std::vector<Tensor> out;
  out.reserve(layout.entries.size());
  for (Entry& e : layout.entries) {
    Tensor t;
    t.dtype = e.dtype;
    t.shape = std::move(e.shape);
    t.data.resize(e.end - e.begin);
    fill(e, std::span<std::uint8_t>(t.data));
    t.name = std::move(e.name);
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace

std::vector<Tensor> safetensors_decode(std::span<const std::uint8_t> bytes,
                                       const std::string& source,
                                       std::map<std::string, std::string>* metadata) {
  const InputLimits limits = input_limits();
  const std::uint64_t header_len =
      checked_header_length(bytes.data(), bytes.size(), source, limits);
  const std::string_view text(reinterpret_cast<const char*>(bytes.data() + 8), header_len);
  SafetensorsLayout layout =
      safetensors_layout(text, bytes.size() - 8 - header_len, source, limits);
  const std::uint8_t* data = bytes.data() + 8 + header_len;
  std::vector<Tensor> out = safetensors_tensors(layout, [&](const Entry& e, auto buffer) {
    std::copy(data + e.begin, data + e.end, buffer.begin());
  });
  if (metadata != nullptr) *metadata = std::move(layout.metadata);
  return out;
}

TensorFileIndex safetensors_index(const InputFile& f) {
  const InputLimits limits = input_limits();
  const std::string& source = f.path();
  check_limit(source, "the tensor file", f.size(), limits.file_bytes, "POSENC_MAX_FILE_BYTES");
  std::array<std::uint8_t, 8> field{};
  f.read_at(0, std::span(field.data(), std::min<std::uint64_t>(f.size(), 8)));
  const std::uint64_t header_len = checked_header_length(field.data(), f.size(), source, limits);
  std::string text(header_len, '\0');
  f.read_at(8, std::span(reinterpret_cast<std::uint8_t*>(text.data()), text.size()));
  SafetensorsLayout layout = safetensors_layout(text, f.size() - 8 - header_len, source, limits);
  const std::uint64_t data_start = 8 + header_len;
  TensorFileIndex index;
  for (Entry& e : layout.entries) {
    index.entries.push_back(
        {std::move(e.name), e.dtype, std::move(e.shape), data_start + e.begin, e.end - e.begin});
  }
  std::sort(index.entries.begin(), index.entries.end(),
            [](const TensorEntry& a, const TensorEntry& b) { return a.name < b.name; });
  index.metadata = std::move(layout.metadata);
  return index;
}

std::vector<Tensor> safetensors_read(const std::filesystem::path& path,
                                     std::map<std::string, std::string>* metadata) {
  const InputFile f(path);
  TensorFileIndex index = safetensors_index(f);
  std::vector<Tensor> out;
  out.reserve(index.entries.size());
  for (TensorEntry& e : index.entries) {
    Tensor t;
    t.dtype = e.dtype;
    t.shape = std::move(e.shape);
    t.data.resize(e.bytes);
    f.read_at(e.offset, t.data);
    t.name = std::move(e.name);
    out.push_back(std::move(t));
  }
  if (metadata != nullptr) *metadata = std::move(index.metadata);
  return out;
}

// -----------------------------------------------------------------------------------------------
// .npy.

namespace {

// Where a .npy header lies, from the file's first min(size, 12) bytes (preamble and length).
struct NpyExtent {
  std::size_t header_start = 0;
  std::uint64_t header_len = 0;
};

NpyExtent npy_extent(std::span<const std::uint8_t> prefix, std::uint64_t size,
                     const std::string& source, const InputLimits& limits) {
  const std::size_t magic_seen = std::min(prefix.size(), sizeof kNpyMagic);
  if (!std::equal(prefix.begin(), prefix.begin() + static_cast<std::ptrdiff_t>(magic_seen),
                  std::begin(kNpyMagic))) {
    fail(source, "not a .npy file (bad magic)");
  }
  if (size < 8) {
    fail(source, "truncated: " + std::to_string(size) + " bytes, no .npy preamble");
  }
  const int major = prefix[6];
  const int minor = prefix[7];
  if (minor != 0 || major < 1 || major > 3) {
    fail(source, "unsupported .npy version " + std::to_string(major) + "." +
                     std::to_string(minor));
  }
  const std::size_t len_size = major == 1 ? 2 : 4;
  if (size < 8 + len_size) {
    fail(source, "truncated: " + std::to_string(size) + " bytes, no header length");
  }
  NpyExtent x;
  x.header_len = load_le(prefix.data() + 8, static_cast<int>(len_size));
  x.header_start = 8 + len_size;
  check_limit(source, "header length", x.header_len, limits.header_bytes,
              "POSENC_MAX_HEADER_BYTES");
  if (x.header_len > size - x.header_start) {
    fail(source, "truncated: header length says " + std::to_string(x.header_len) +
                     " bytes, file has " + std::to_string(size - x.header_start) +
                     " after the preamble");
  }
  return x;
}

// The parsed header and the data size it implies, checked against the file's size.
NpyHeader npy_header(std::string_view text, std::uint64_t data_start, std::uint64_t size,
                     const std::string& source, const InputLimits& limits) {
  NpyHeader h = NpyHeaderParser(text, source).parse();
  const std::optional<std::uint64_t> need = checked_nbytes(h.shape, h.dtype);
  if (!need) fail(source, "shape " + shape_string(h.shape) + " overflows");
  check_limit(source, "the array (" + std::string(dtype_name(h.dtype)) + " " +
                          shape_string(h.shape) + ")",
              *need, limits.tensor_bytes, "POSENC_MAX_TENSOR_BYTES");
  const std::uint64_t have = size - data_start;
  if (have < *need) {
    fail(source, "truncated: header says " + std::to_string(*need) + " bytes of data, file has " +
                     std::to_string(have));
  }
  if (have > *need) {
    fail(source, std::to_string(have - *need) + " trailing bytes after the array data");
  }
  return h;
}

}  // namespace

Tensor npy_decode(std::span<const std::uint8_t> bytes, const std::string& name,
                  const std::string& source) {
  const InputLimits limits = input_limits();
  const NpyExtent x =
      npy_extent(bytes.first(std::min<std::size_t>(bytes.size(), 12)), bytes.size(), source,
                 limits);
  const std::string_view text(reinterpret_cast<const char*>(bytes.data() + x.header_start),
                              x.header_len);
  const std::size_t data_start = x.header_start + x.header_len;
  NpyHeader h = npy_header(text, data_start, bytes.size(), source, limits);
  Tensor t;
  t.name = name;
  t.dtype = h.dtype;
  t.shape = std::move(h.shape);
  t.data.assign(bytes.begin() + static_cast<std::ptrdiff_t>(data_start), bytes.end());
  return t;
}

TensorFileIndex npy_index(const InputFile& f, const std::string& name) {
  const InputLimits limits = input_limits();
  const std::string& source = f.path();
  check_limit(source, "the .npy file", f.size(), limits.file_bytes, "POSENC_MAX_FILE_BYTES");
  std::array<std::uint8_t, 12> prefix{};
  const std::size_t seen = static_cast<std::size_t>(std::min<std::uint64_t>(f.size(), 12));
  f.read_at(0, std::span(prefix.data(), seen));
  const NpyExtent x = npy_extent(std::span(prefix.data(), seen), f.size(), source, limits);
  std::string text(x.header_len, '\0');
  f.read_at(x.header_start, std::span(reinterpret_cast<std::uint8_t*>(text.data()), text.size()));
  const std::uint64_t data_start = x.header_start + x.header_len;
  NpyHeader h = npy_header(text, data_start, f.size(), source, limits);
  TensorFileIndex index;
  index.entries.push_back({name, h.dtype, std::move(h.shape), data_start, f.size() - data_start});
  return index;
}

Tensor npy_read(const std::filesystem::path& path, const std::string& name) {
  const InputFile f(path);
  TensorFileIndex index = npy_index(f, name);
  TensorEntry& e = index.entries.front();
  Tensor t;
  t.name = name;
  t.dtype = e.dtype;
  t.shape = std::move(e.shape);
  t.data.resize(e.bytes);
  f.read_at(e.offset, t.data);
  return t;
}

std::vector<std::uint8_t> npy_encode(const Tensor& t) {
  require_consistent(t, "npy_encode");
  std::string dict = "{'descr': '" + std::string(npy_descr(t.dtype)) +
                     "', 'fortran_order': False, 'shape': (";
  for (std::size_t k = 0; k < t.shape.size(); ++k) {
    if (k > 0) dict += ", ";
    dict += std::to_string(t.shape[k]);
  }
  if (t.shape.size() == 1) dict += ",";
  dict += "), }";
  // Version 1.0 has a 2-byte header length; fall back to 2.0 (4 bytes) when it does not fit.
  std::size_t preamble = 10;
  auto padded = [&](std::size_t pre) {
    return dict.size() + 1 + (kNpyAlign - (pre + dict.size() + 1) % kNpyAlign) % kNpyAlign;
  };
  int major = 1;
  if (padded(preamble) > 0xffff) {
    major = 2;
    preamble = 12;
  }
  const std::size_t header_len = padded(preamble);
  std::vector<std::uint8_t> out;
  out.reserve(preamble + header_len + t.data.size());
  out.insert(out.end(), std::begin(kNpyMagic), std::end(kNpyMagic));
  out.push_back(static_cast<std::uint8_t>(major));
  out.push_back(0);
  store_le(out, header_len, major == 1 ? 2 : 4);
  out.insert(out.end(), dict.begin(), dict.end());
  out.insert(out.end(), header_len - dict.size() - 1, static_cast<std::uint8_t>(' '));
  out.push_back(static_cast<std::uint8_t>('\n'));
  out.insert(out.end(), t.data.begin(), t.data.end());
  return out;
}

// -----------------------------------------------------------------------------------------------
// SHA-256.

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
  if (ctx_ == nullptr ||
      EVP_DigestInit_ex(static_cast<EVP_MD_CTX*>(ctx_), EVP_sha256(), nullptr) != 1) {
    EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(ctx_));
    throw std::runtime_error("Sha256: OpenSSL EVP_DigestInit_ex(sha256) failed");
  }
}

Sha256::~Sha256() { EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(ctx_)); }

Sha256::Sha256(Sha256&& other) noexcept : ctx_(std::exchange(other.ctx_, nullptr)) {}

Sha256& Sha256::operator=(Sha256&& other) noexcept {
  if (this != &other) {
    EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(ctx_));
    ctx_ = std::exchange(other.ctx_, nullptr);
  }
  return *this;
}

void Sha256::update(std::span<const std::uint8_t> bytes) {
  if (bytes.empty()) return;
  if (EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(ctx_), bytes.data(), bytes.size()) != 1) {
    throw std::runtime_error("Sha256: OpenSSL EVP_DigestUpdate failed");
  }
}

std::string Sha256::hex() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_DigestFinal_ex(static_cast<EVP_MD_CTX*>(ctx_), digest, &len) != 1 || len != 32) {
    throw std::runtime_error("Sha256: OpenSSL EVP_DigestFinal_ex failed");
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(64, '0');
  for (unsigned k = 0; k < 32; ++k) {
    out[2 * k] = kHex[digest[k] >> 4];
    out[2 * k + 1] = kHex[digest[k] & 15];
  }
  return out;
}

std::string sha256_hex(std::span<const std::uint8_t> bytes) {
  Sha256 h;
  h.update(bytes);
  return h.hex();
}

// -----------------------------------------------------------------------------------------------
// Files.

std::vector<std::uint8_t> read_file(const std::filesystem::path& path) {
  const InputLimits limits = input_limits();
  const InputFile f(path);
  check_limit(path.string(), "the file", f.size(), limits.file_bytes, "POSENC_MAX_FILE_BYTES");
  std::vector<std::uint8_t> out(f.size());
  f.read_at(0, out);
  return out;
}

void write_file_atomic(const std::filesystem::path& path, std::span<const std::uint8_t> bytes) {
  AtomicFile f(path);
  f.write(bytes);
  f.commit();
}

void write_text_atomic(const std::filesystem::path& path, std::string_view text) {
  write_file_atomic(path, std::span<const std::uint8_t>(
                              reinterpret_cast<const std::uint8_t*>(text.data()), text.size()));
}

// ---- tensors too large to hold: spilled to files, written chunk by chunk --------------------

SpillFile::~SpillFile() {
  if (fd >= 0) ::close(fd);
}

TensorSpill::TensorSpill(std::string name, DType dtype, std::vector<std::int64_t> shape,
                         const std::filesystem::path& dir) {
  t_.name = std::move(name);
  t_.dtype = dtype;
  t_.shape = std::move(shape);
  const std::optional<std::uint64_t> bytes = checked_nbytes(t_.shape, dtype);
  if (!bytes) throw_invalid("TensorSpill", "tensor '" + t_.name + "' has an invalid shape", shape_string(t_.shape));
  expected_ = *bytes;
  std::string templ = ((dir.empty() ? std::filesystem::temp_directory_path() : dir) / "posenc-spill-XXXXXX").string();
  const int fd = ::mkstemp(templ.data());
  if (fd < 0) fail(templ, std::string("cannot create a spill file: ") + std::strerror(errno));
  // Unlinked at once: the data lives as long as the descriptor, and a killed run leaves nothing.
  ::unlink(templ.c_str());
  auto file = std::make_shared<SpillFile>();
  file->fd = fd;
  file->name = templ;
  t_.file = file;
  f_ = ::fdopen(::dup(fd), "wb");
  if (f_ == nullptr) fail(templ, std::string("cannot open the spill file: ") + std::strerror(errno));
  sha_ = new Sha256();
}

TensorSpill::~TensorSpill() {
  if (f_ != nullptr) std::fclose(f_);
  delete sha_;
}

void TensorSpill::append(std::span<const std::uint8_t> bytes) {
  if (f_ == nullptr) throw_invalid("TensorSpill::append", "spill of '" + t_.name + "' is finished", t_.bytes);
  if (t_.bytes + bytes.size() > expected_) {
    throw_invalid("TensorSpill::append", "tensor '" + t_.name + "' needs " + std::to_string(expected_) +
                  " bytes of data", t_.bytes + bytes.size());
  }
  if (!bytes.empty() && std::fwrite(bytes.data(), 1, bytes.size(), f_) != bytes.size()) {
    fail(t_.file->name, std::string("write error: ") + std::strerror(errno));
  }
  sha_->update(bytes);
  t_.bytes += bytes.size();
}

SpilledTensor TensorSpill::finish() {
  if (t_.bytes != expected_) {
    throw_invalid("TensorSpill::finish", "tensor '" + t_.name + "' needs " + std::to_string(expected_) +
                  " bytes of data", t_.bytes);
  }
  if (std::fclose(f_) != 0) {
    f_ = nullptr;
    fail(t_.file->name, std::string("close error: ") + std::strerror(errno));
  }
  f_ = nullptr;
  t_.sha256 = sha_->hex();
  return t_;
}

namespace {

// Copies `bytes` bytes of a spilled tensor to `emit` in pieces of at most `chunk` bytes.
template <class Emit>
void copy_spilled(const SpilledTensor& s, std::size_t chunk, Emit emit) {
  std::vector<std::uint8_t> buf(std::max<std::size_t>(chunk, 1));
  std::uint64_t at = 0;
  while (at < s.bytes) {
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(s.bytes - at, buf.size()));
    std::size_t got = 0;
    while (got < n) {
      const ssize_t r = ::pread(s.file->fd, buf.data() + got, n - got, static_cast<off_t>(at + got));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) fail(s.file->name, r < 0 ? std::string("read error: ") + std::strerror(errno) : "the spill file ended early");
      got += static_cast<std::size_t>(r);
    }
    emit(std::span<const std::uint8_t>(buf.data(), n));
    at += n;
  }
}

}  // namespace

Tensor spilled_tensor_read(const SpilledTensor& s) {
  Tensor t;
  t.name = s.name;
  t.dtype = s.dtype;
  t.shape = s.shape;
  t.data.reserve(static_cast<std::size_t>(s.bytes));
  copy_spilled(s, std::size_t{1} << 20,
               [&](std::span<const std::uint8_t> b) { t.data.insert(t.data.end(), b.begin(), b.end()); });
  return t;
}

WrittenFile safetensors_write(const std::filesystem::path& path, const std::vector<Tensor>& tensors,
                              const std::vector<SpilledTensor>& spilled,
                              const std::map<std::string, std::string>& metadata, std::size_t chunk) {
  // The temp file + rename of every posenc output (AtomicFile, golden/format/output_path.hpp):
  // created O_EXCL beside the target, removed if anything below throws.
  AtomicFile f(path);
  return safetensors_write(f, tensors, spilled, metadata, chunk);
}

WrittenFile safetensors_write(AtomicFile& f, const std::vector<Tensor>& tensors,
                              const std::vector<SpilledTensor>& spilled,
                              const std::map<std::string, std::string>& metadata, std::size_t chunk) {
  std::vector<HeaderItem> items;
  std::map<const std::string*, const Tensor*> in_memory;
  std::map<const std::string*, const SpilledTensor*> on_disk;
  for (const Tensor& t : tensors) {
    require_consistent(t, "safetensors_write");
    items.push_back({&t.name, t.dtype, &t.shape, t.data.size()});
    in_memory[&t.name] = &t;
  }
  for (const SpilledTensor& t : spilled) {
    if (checked_nbytes(t.shape, t.dtype) != std::optional<std::uint64_t>(t.bytes)) {
      throw_invalid("safetensors_write", "spilled tensor '" + t.name + "' does not match its shape", t.bytes);
    }
    items.push_back({&t.name, t.dtype, &t.shape, t.bytes});
    on_disk[&t.name] = &t;
  }
  sort_items(items, "safetensors_write");
  std::uint64_t data = 0;
  const std::vector<std::uint8_t> header = header_bytes(items, metadata, &data);

  WrittenFile w;
  Sha256 sha;
  auto emit = [&](std::span<const std::uint8_t> b) {
    f.write(b);
    sha.update(b);
    w.bytes += b.size();
  };
  emit(header);
  for (const HeaderItem& it : items) {
    if (auto m = in_memory.find(it.name); m != in_memory.end()) {
      const auto& d = m->second->data;
      const std::size_t c = std::max<std::size_t>(chunk, 1);
      for (std::size_t k = 0; k < d.size(); k += c) {
        emit(std::span<const std::uint8_t>(d.data() + k, std::min(c, d.size() - k)));
      }
    } else {
      copy_spilled(*on_disk.at(it.name), chunk, emit);
    }
  }
  f.commit();
  w.sha256 = sha.hex();
  return w;
}

}  // namespace posenc::golden
