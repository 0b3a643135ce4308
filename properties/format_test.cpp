// Tests of golden/format: safetensors and .npy codecs, SHA-256, atomic file writes.
#include "golden/format/format.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "reference/common/errors.hpp"

namespace posenc::golden {
namespace {

namespace fs = std::filesystem;

std::vector<std::uint8_t> bytes_of(std::string_view s) {
  return std::vector<std::uint8_t>(s.begin(), s.end());
}

std::string string_of(std::span<const std::uint8_t> b) {
  return std::string(b.begin(), b.end());
}

// A safetensors file with a hand-written header (no padding) followed by `data_size` bytes.
std::vector<std::uint8_t> raw_safetensors(std::string_view header, std::size_t data_size) {
  std::vector<std::uint8_t> out;
  for (int k = 0; k < 8; ++k) out.push_back(static_cast<std::uint8_t>(header.size() >> (8 * k)));
  out.insert(out.end(), header.begin(), header.end());
  for (std::size_t k = 0; k < data_size; ++k) out.push_back(static_cast<std::uint8_t>(k));
  return out;
}

// A .npy file of the given version with a hand-written header dict and `data_size` bytes.
std::vector<std::uint8_t> raw_npy(int major, std::string_view dict, std::size_t data_size) {
  std::vector<std::uint8_t> out = {0x93, 'N', 'U', 'M', 'P', 'Y',
                                   static_cast<std::uint8_t>(major), 0};
  std::string header(dict);
  header += '\n';
  const int len_size = major == 1 ? 2 : 4;
  for (int k = 0; k < len_size; ++k) {
    out.push_back(static_cast<std::uint8_t>(header.size() >> (8 * k)));
  }
  out.insert(out.end(), header.begin(), header.end());
  for (std::size_t k = 0; k < data_size; ++k) out.push_back(static_cast<std::uint8_t>(k));
  return out;
}

// Decodes and returns the GoldenFileError message; fails the test if nothing is thrown.
std::string safetensors_error(std::span<const std::uint8_t> b, const std::string& source = "f") {
  try {
    safetensors_decode(b, source);
  } catch (const GoldenFileError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no GoldenFileError";
  return "";
}

std::string npy_error(std::span<const std::uint8_t> b, const std::string& source = "f.npy") {
  try {
    npy_decode(b, "x", source);
  } catch (const GoldenFileError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no GoldenFileError";
  return "";
}

void expect_same_tensor(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.dtype, b.dtype) << a.name;
  EXPECT_EQ(a.shape, b.shape) << a.name;
  EXPECT_EQ(a.data, b.data) << a.name;
}

// One tensor of every dtype, with edge values (signed zero, inf, NaN payload, subnormals).
std::vector<Tensor> every_dtype() {
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<double> f64 = {0.0, -0.0, 1.0, -2.5, inf, -inf,
                                   std::numeric_limits<double>::denorm_min(),
                                   std::bit_cast<double>(std::uint64_t{0x7ff8000000000123}),
                                   0.1, 1e300, -1e-300, 3.0};
  const float finf = std::numeric_limits<float>::infinity();
  const std::vector<float> f32 = {0.0f, -0.0f, 1.0f, finf, std::numeric_limits<float>::denorm_min(),
                                  0.1f};
  const std::vector<std::int64_t> i64 = {0, -1, std::numeric_limits<std::int64_t>::min(),
                                         std::numeric_limits<std::int64_t>::max()};
  const std::vector<std::int32_t> i32 = {0, -1, std::numeric_limits<std::int32_t>::min(),
                                         std::numeric_limits<std::int32_t>::max(), 7, 8};
  const std::vector<std::uint16_t> bf16 = {0x3f80, 0xc000, 0x0001, 0x7f80, 0xffc1, 0x8000};
  const std::vector<std::uint16_t> f16 = {0x3c00, 0x0001, 0xfc00, 0x7e01, 0x8000};
  return {
      tensor_from_f64("f64", {3, 4}, f64),
      tensor_from_f32("f32", {2, 3}, f32),
      tensor_from_bits16("bf16", DType::kBF16, {6}, bf16),
      tensor_from_bits16("f16", DType::kF16, {5, 1}, f16),
      tensor_from_i64("i64", {2, 1, 2}, i64),
      tensor_from_i32("i32", {6}, i32),
  };
}

// Applies one seeded random corruption: byte overwrites, bit flips, a cut or an insertion.
std::vector<std::uint8_t> mutate(std::vector<std::uint8_t> b, std::mt19937_64& rng,
                                 std::size_t hot_prefix) {
  auto pick = [&](std::size_t n) {
    return static_cast<std::size_t>(rng() % std::max<std::size_t>(n, 1));
  };
  const int kind = static_cast<int>(rng() % 5);
  const int count = 1 + static_cast<int>(rng() % 4);
  for (int k = 0; k < count && !b.empty(); ++k) {
    // Half of the edits land in the preamble and header, where structure lives.
    const std::size_t at = rng() % 2 == 0 ? pick(std::min(hot_prefix, b.size())) : pick(b.size());
    switch (kind) {
      case 0: b[at] = static_cast<std::uint8_t>(rng()); break;
      case 1: b[at] ^= static_cast<std::uint8_t>(1u << (rng() % 8)); break;
      case 2: b.resize(at); break;
      case 3:
        b.insert(b.begin() + static_cast<std::ptrdiff_t>(at), static_cast<std::uint8_t>(rng()));
        break;
      default: {
        // Replace with a JSON/Python-significant character to reach deeper parser states.
        static constexpr char kChars[] = "{}[]()\":,'0123456789- TrueFalse\n";
        b[at] = static_cast<std::uint8_t>(kChars[pick(sizeof kChars - 1)]);
        break;
      }
    }
  }
  return b;
}

// -------------------------------------------------------------------------------------------
// SHA-256.

std::string sha_of(std::string_view s) { return sha256_hex(bytes_of(s)); }

TEST(FormatSha256, Fips180Vectors) {
  EXPECT_EQ(sha_of(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha_of("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha_of("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(FormatSha256, MillionA) {
  EXPECT_EQ(sha_of(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(FormatSha256, PaddingBoundaries) {
  // Lengths around the one-block/two-block padding boundary; digests from an independent
  // implementation (Python hashlib) of bytes (7k + 3) mod 256.
  const std::vector<std::pair<std::size_t, std::string>> cases = {
      {55, "e7313d333c272e639f790978283f9eb392e843d0f29b7016828bb1daa4aac70b"},
      {56, "4324d65f3c103567f5589c710bc08f8523f929a9272e3af36fc968e52abc6c27"},
      {63, "81c80242132f230c3bd41b3e63bbcff16107339549214a99614ff26664625055"},
      {64, "39e3d7b6b5d075d37d053ad89b24b41bef4f3c29760c84447cab3f3be1882241"},
      {119, "9ce7368e4daf32341631b492e80359dc9f594b48453cd0dd5bf0b19279cc177e"},
      {120, "7836b787757e95e58b3ca5aec90b1b004e8deba1e50e9675af9cabf1a13a04b5"},
      {1000, "1e9bc38cbf860b9ec31918b065f9b52476c549a782e0e7990bed8ce3868d2371"},
  };
  for (const auto& [n, digest] : cases) {
    std::vector<std::uint8_t> b(n);
    for (std::size_t k = 0; k < n; ++k) b[k] = static_cast<std::uint8_t>((k * 7 + 3) % 256);
    EXPECT_EQ(sha256_hex(b), digest) << "length " << n;
  }
}

TEST(FormatSha256, LowerCaseHexOfLength64) {
  const std::string h = sha_of("posenc");
  ASSERT_EQ(h.size(), 64u);
  EXPECT_TRUE(std::all_of(h.begin(), h.end(),
                          [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }));
}

// -------------------------------------------------------------------------------------------
// Tensor accessors (bit-exact decoding is what safetensors payloads rely on).

TEST(FormatSafetensors, Bf16GetF64Exact) {
  const std::vector<std::uint16_t> bits = {0x3f80, 0xc000, 0x0001, 0x7f80, 0x3fc0, 0x8000};
  const Tensor t = tensor_from_bits16("b", DType::kBF16, {6}, bits);
  EXPECT_EQ(t.get_f64(0), 1.0);
  EXPECT_EQ(t.get_f64(1), -2.0);
  EXPECT_EQ(t.get_f64(2), 0x1p-133);  // smallest bf16 subnormal
  EXPECT_EQ(t.get_f64(3), std::numeric_limits<double>::infinity());
  EXPECT_EQ(t.get_f64(4), 1.5);
  EXPECT_TRUE(std::signbit(t.get_f64(5)));
  EXPECT_EQ(t.get_bits(1), 0xc000u);
}

TEST(FormatSafetensors, F16GetF64Exact) {
  const std::vector<std::uint16_t> bits = {0x3c00, 0x0001, 0x7bff, 0xc000, 0x0400, 0x3555};
  const Tensor t = tensor_from_bits16("h", DType::kF16, {2, 3}, bits);
  EXPECT_EQ(t.get_f64(0), 1.0);
  EXPECT_EQ(t.get_f64(1), 0x1p-24);
  EXPECT_EQ(t.get_f64(2), 65504.0);
  EXPECT_EQ(t.get_f64(3), -2.0);
  EXPECT_EQ(t.get_f64(4), 0x1p-14);
  EXPECT_EQ(t.get_f64(5), 0x1.554p-2);
}

TEST(FormatSafetensors, AccessorsAndConversions) {
  const std::vector<std::int32_t> iv = {-5, 7};
  const Tensor ti = tensor_from_i32("i", {2}, iv);
  EXPECT_EQ(ti.get_i64(0), -5);
  EXPECT_EQ(ti.get_bits(0), 0xfffffffbu);  // zero-extended, not sign-extended
  EXPECT_EQ(ti.get_f64(1), 7.0);
  EXPECT_EQ(tensor_to_f64(ti), (std::vector<double>{-5.0, 7.0}));
  EXPECT_THROW(tensor_to_f32(ti), InvalidArgument);

  const std::vector<double> dv = {0.1, 1.0 + 0x1p-24, 1.0 + 0x1p-23 + 0x1p-24};
  const Tensor td = tensor_from_f64("d", {3}, dv);
  EXPECT_THROW(td.get_i64(0), InvalidArgument);
  EXPECT_THROW(td.get_f64(3), InvalidArgument);
  EXPECT_THROW(td.get_f64(-1), InvalidArgument);
  const std::vector<float> f = tensor_to_f32(td);
  EXPECT_EQ(f[0], 0.1f);
  EXPECT_EQ(f[1], 1.0f);                     // tie rounds to even
  EXPECT_EQ(f[2], 1.0f + 0x1p-22f);          // tie rounds to even (up)
  EXPECT_EQ(tensor_to_f64(td), dv);

  const Tensor scalar = tensor_from_f32("s", {}, std::vector<float>{2.5f});
  EXPECT_EQ(scalar.numel(), 1);
  EXPECT_EQ(scalar.get_f64(0), 2.5);
  EXPECT_EQ(tensor_from_f32("e", {0, 3}, std::vector<float>{}).numel(), 0);

  EXPECT_THROW(tensor_from_f32("x", {2, 2}, std::vector<float>{1, 2, 3}), InvalidArgument);
  EXPECT_THROW(tensor_from_f32("x", {-1}, std::vector<float>{}), InvalidArgument);
  EXPECT_THROW(tensor_from_bits16("x", DType::kF32, {1}, std::vector<std::uint16_t>{1}),
               InvalidArgument);
}

// -------------------------------------------------------------------------------------------
// safetensors encoding.

TEST(FormatSafetensors, RoundTripEveryDtype) {
  const std::vector<Tensor> in = every_dtype();
  const std::map<std::string, std::string> meta = {{"format", "pt"}, {"note", "q\"uote\n"}};
  const std::vector<std::uint8_t> file = safetensors_encode(in, meta);
  std::map<std::string, std::string> meta_out;
  const std::vector<Tensor> out = safetensors_decode(file, "f", &meta_out);
  EXPECT_EQ(meta_out, meta);
  ASSERT_EQ(out.size(), in.size());
  std::vector<Tensor> sorted = in;
  std::sort(sorted.begin(), sorted.end(),
            [](const Tensor& a, const Tensor& b) { return a.name < b.name; });
  for (std::size_t k = 0; k < out.size(); ++k) expect_same_tensor(out[k], sorted[k]);
  // Values, not just bytes: the NaN payload and the integer extremes survive.
  const Tensor& f64 = out[3];
  ASSERT_EQ(f64.name, "f64");
  EXPECT_EQ(f64.get_bits(7), 0x7ff8000000000123u);
  const Tensor& i64 = out[5];
  ASSERT_EQ(i64.name, "i64");
  EXPECT_EQ(i64.get_i64(2), std::numeric_limits<std::int64_t>::min());
}

TEST(FormatSafetensors, RankZeroEmptyAndNoTensors) {
  const std::vector<Tensor> in = {tensor_from_f32("scalar", {}, std::vector<float>{4.0f}),
                                  tensor_from_f32("empty", {0, 5}, std::vector<float>{}),
                                  tensor_from_i64("z", {0}, std::vector<std::int64_t>{})};
  const std::vector<Tensor> out = safetensors_decode(safetensors_encode(in), "f");
  ASSERT_EQ(out.size(), 3u);
  expect_same_tensor(out[0], in[1]);
  expect_same_tensor(out[1], in[0]);
  expect_same_tensor(out[2], in[2]);

  const std::vector<std::uint8_t> none = safetensors_encode({});
  EXPECT_EQ(string_of(none), std::string("\x08\0\0\0\0\0\0\0{}      ", 16));
  EXPECT_TRUE(safetensors_decode(none, "f").empty());
}

TEST(FormatSafetensors, ExactBytesOfSmallFile) {
  const Tensor t = tensor_from_f32("x", {1}, std::vector<float>{1.0f});
  const std::string json = R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  std::string expected("\x38\0\0\0\0\0\0\0", 8);  // 56 = 54 bytes of JSON + 2 spaces
  expected += json + "  ";
  expected += std::string("\0\0\x80\x3f", 4);
  EXPECT_EQ(string_of(safetensors_encode({t})), expected);
}

TEST(FormatSafetensors, MetadataFirstAndNoWhitespace) {
  const std::vector<Tensor> in = {tensor_from_f32("A", {1}, std::vector<float>{1.0f})};
  const std::vector<std::uint8_t> b = safetensors_encode(in, {{"k", "v"}});
  const std::string s = string_of(b);
  const std::string json = R"({"__metadata__":{"k":"v"},"A":{"dtype":"F32","shape":[1],)"
                           R"("data_offsets":[0,4]}})";
  EXPECT_EQ(s.substr(8, json.size()), json);
}

TEST(FormatSafetensors, EncodingIsDeterministic) {
  std::vector<Tensor> in = every_dtype();
  const std::vector<std::uint8_t> a = safetensors_encode(in, {{"x", "1"}});
  EXPECT_EQ(a, safetensors_encode(in, {{"x", "1"}}));
  std::mt19937_64 rng(7);
  for (int k = 0; k < 5; ++k) {
    std::shuffle(in.begin(), in.end(), rng);
    EXPECT_EQ(a, safetensors_encode(in, {{"x", "1"}})) << "permutation " << k;
  }
  std::map<std::string, std::string> meta;
  const std::vector<Tensor> decoded = safetensors_decode(a, "f", &meta);
  EXPECT_EQ(a, safetensors_encode(decoded, meta));
  EXPECT_EQ(sha256_hex(a), sha256_hex(safetensors_encode(decoded, meta)));
}

// safetensors_write (spilled tensors appended chunk by chunk, the file copied in chunks) gives
// safetensors_encode's bytes, for random tensors, random spill pieces and random chunk sizes.
TEST(FormatSafetensors, ChunkedWriterMatchesEncoder) {
  std::mt19937_64 rng(11);
  const fs::path dir = fs::temp_directory_path() / ("posenc_chunked_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const DType dtypes[] = {DType::kF64, DType::kF32, DType::kBF16, DType::kF16, DType::kI64, DType::kI32};
  for (int trial = 0; trial < 40; ++trial) {
    std::vector<Tensor> all, memory;
    std::vector<SpilledTensor> spilled;
    const int n = 1 + static_cast<int>(rng() % 6);
    for (int k = 0; k < n; ++k) {
      Tensor t;
      t.name = "t" + std::to_string(rng() % 1000) + "_" + std::to_string(k);
      t.dtype = dtypes[rng() % 6];
      t.shape = {static_cast<std::int64_t>(rng() % 40), static_cast<std::int64_t>(1 + rng() % 5)};
      t.data.resize(static_cast<std::size_t>(t.numel() * dtype_size(t.dtype)));
      for (auto& b : t.data) b = static_cast<std::uint8_t>(rng());
      all.push_back(t);
      if (rng() % 2) {
        TensorSpill sp(t.name, t.dtype, t.shape, dir);
        for (std::size_t at = 0; at < t.data.size();) {
          const std::size_t piece = std::min<std::size_t>(1 + rng() % 97, t.data.size() - at);
          sp.append(std::span<const std::uint8_t>(t.data.data() + at, piece));
          at += piece;
        }
        spilled.push_back(sp.finish());
        EXPECT_EQ(spilled.back().sha256, sha256_hex(t.data)) << t.name;
      } else {
        memory.push_back(t);
      }
    }
    const std::map<std::string, std::string> meta = {{"posenc_case", "c" + std::to_string(trial)}};
    const std::vector<std::uint8_t> want = safetensors_encode(all, meta);
    const std::size_t chunk = 1 + rng() % 300;
    const WrittenFile w = safetensors_write(dir / "x.safetensors", memory, spilled, meta, chunk);
    const std::vector<std::uint8_t> got = read_file(dir / "x.safetensors");
    ASSERT_EQ(got, want) << "trial " << trial << ", chunk " << chunk;
    EXPECT_EQ(w.bytes, want.size());
    EXPECT_EQ(w.sha256, sha256_hex(want));
  }
  // A spill given the wrong number of bytes is refused, and its file removed.
  TensorSpill sp("short", DType::kF32, {4}, dir);
  sp.append(std::vector<std::uint8_t>(12, 0));
  EXPECT_THROW(sp.finish(), InvalidArgument);
  EXPECT_THROW(sp.append(std::vector<std::uint8_t>(8, 0)), InvalidArgument);
  fs::remove_all(dir);
}

TEST(FormatSafetensors, HeaderAlignedToEight) {
  for (int len = 1; len <= 24; ++len) {
    const Tensor t = tensor_from_f32(std::string(len, 'n'), {1}, std::vector<float>{0.0f});
    const std::vector<std::uint8_t> b = safetensors_encode({t});
    std::uint64_t n = 0;
    for (int k = 7; k >= 0; --k) n = (n << 8) | b[k];
    EXPECT_EQ((8 + n) % 8, 0u) << "name length " << len;
    EXPECT_EQ(b.size(), 8 + n + 4);
    const std::string header = string_of(std::span(b).subspan(8, n));
    const std::size_t close = header.rfind('}');
    EXPECT_EQ(header.find_first_not_of(' ', close + 1), std::string::npos);
    EXPECT_EQ(header.substr(0, close + 1).find(' '), std::string::npos);
  }
}

TEST(FormatSafetensors, EncodeRejectsBadInput) {
  const Tensor a = tensor_from_f32("a", {1}, std::vector<float>{1.0f});
  EXPECT_THROW(safetensors_encode({a, a}), InvalidArgument);
  Tensor reserved = a;
  reserved.name = "__metadata__";
  EXPECT_THROW(safetensors_encode({reserved}), InvalidArgument);
  Tensor short_data = a;
  short_data.shape = {2};
  EXPECT_THROW(safetensors_encode({short_data}), InvalidArgument);
  Tensor bad_utf8 = a;
  bad_utf8.name = "\xff";
  EXPECT_THROW(safetensors_encode({bad_utf8}), InvalidArgument);
}

// -------------------------------------------------------------------------------------------
// safetensors decoding errors.

TEST(FormatSafetensors, EveryTruncationThrows) {
  const std::vector<std::uint8_t> full = safetensors_encode(
      {tensor_from_f32("a", {2}, std::vector<float>{1, 2}),
       tensor_from_i32("b", {1}, std::vector<std::int32_t>{3})},
      {{"m", "v"}});
  ASSERT_NO_THROW(safetensors_decode(full, "f"));
  for (std::size_t len = 0; len < full.size(); ++len) {
    const std::span<const std::uint8_t> prefix(full.data(), len);
    const std::string msg = safetensors_error(prefix, "cut.safetensors");
    EXPECT_EQ(msg.rfind("cut.safetensors: ", 0), 0u) << "length " << len << ": " << msg;
  }
  // Cutting the data section names both sizes.
  const std::string msg = safetensors_error(std::span(full.data(), full.size() - 1), "e.st");
  EXPECT_NE(msg.find("e.st: truncated: header says 12 bytes of data, file has 11"),
            std::string::npos)
      << msg;
}

TEST(FormatSafetensors, HeaderLengthLargerThanFile) {
  std::vector<std::uint8_t> b = raw_safetensors("{}", 0);
  b[0] = 200;
  EXPECT_NE(safetensors_error(b).find("truncated"), std::string::npos);
  b[0] = 0;
  b[4] = 0x10;  // 2^36 bytes: over the 100 MiB limit
  EXPECT_NE(safetensors_error(b).find("exceeds"), std::string::npos);
  std::fill(b.begin(), b.begin() + 8, 0xff);
  EXPECT_NE(safetensors_error(b).find("exceeds"), std::string::npos);
}

TEST(FormatSafetensors, InvalidJson) {
  for (const char* header : {"", "{", R"({"a":})", "{'a':1}", "{\"a\":{\"dtype\":\"F32\"", "nul",
                             "{}x", "\x01", R"({"a":1,})"}) {
    const std::string msg = safetensors_error(raw_safetensors(header, 0));
    EXPECT_NE(msg.find("not valid JSON"), std::string::npos) << header << " -> " << msg;
  }
  EXPECT_NE(safetensors_error(raw_safetensors("[1,2]", 0)).find("not a JSON object"),
            std::string::npos);
  EXPECT_NE(safetensors_error(raw_safetensors("\"s\"", 0)).find("not a JSON object"),
            std::string::npos);
}

TEST(FormatSafetensors, UnknownDtypeNamed) {
  const std::string msg = safetensors_error(
      raw_safetensors(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}})", 2), "u.st");
  EXPECT_EQ(msg.rfind("u.st: ", 0), 0u);
  EXPECT_NE(msg.find("unsupported dtype \"U8\""), std::string::npos) << msg;
  EXPECT_NE(safetensors_error(raw_safetensors(
                                  R"({"a":{"dtype":7,"shape":[2],"data_offsets":[0,2]}})", 2))
                .find("dtype is not a string"),
            std::string::npos);
}

TEST(FormatSafetensors, ShapeOffsetMismatch) {
  const std::string msg = safetensors_error(
      raw_safetensors(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8));
  EXPECT_NE(msg.find("need 12"), std::string::npos) << msg;
  for (const char* header : {
           R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,0]}})",
           R"({"a":{"dtype":"F32","shape":[1.0],"data_offsets":[0,4]}})",
           R"({"a":{"dtype":"F32","shape":"1","data_offsets":[0,4]}})",
           R"({"a":{"dtype":"F32","shape":[99999999999999999999],"data_offsets":[0,4]}})",
           R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}})",
           R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,0]}})",
           R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0]}})",
           R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4,8]}})",
           R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}})",
           R"({"a":{"dtype":"F32","shape":[1]}})",
           R"({"a":{"shape":[1],"data_offsets":[0,4]}})",
           R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"extra":1}})",
           R"({"a":[1]})",
           R"({"__metadata__":{"k":1}})",
           R"({"__metadata__":[]})",
       }) {
    SCOPED_TRACE(header);
    EXPECT_FALSE(safetensors_error(raw_safetensors(header, 4)).empty());
  }
}

TEST(FormatSafetensors, OverlapGapAndTrailingBytes) {
  const std::string overlap = safetensors_error(raw_safetensors(
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
      R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
      12));
  EXPECT_NE(overlap.find("overlapping"), std::string::npos) << overlap;
  const std::string same = safetensors_error(raw_safetensors(
      R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
      R"("b":{"dtype":"I32","shape":[1],"data_offsets":[0,4]}})",
      4));
  EXPECT_NE(same.find("overlapping"), std::string::npos) << same;
  const std::string gap = safetensors_error(
      raw_safetensors(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8));
  EXPECT_NE(gap.find("gap"), std::string::npos) << gap;
  const std::string trailing = safetensors_error(
      raw_safetensors(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 6));
  EXPECT_NE(trailing.find("2 trailing bytes"), std::string::npos) << trailing;
  // Out-of-order offsets are fine as long as they tile the data section.
  const std::vector<Tensor> ok = safetensors_decode(
      raw_safetensors(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]},)"
                      R"("b":{"dtype":"I32","shape":[1],"data_offsets":[0,4]}})",
                      8),
      "f");
  ASSERT_EQ(ok.size(), 2u);
  EXPECT_EQ(ok[0].data, (std::vector<std::uint8_t>{4, 5, 6, 7}));
  EXPECT_EQ(ok[1].get_i64(0), 0x03020100);
}

TEST(FormatSafetensors, DuplicateKeysRejected) {
  const std::string dup = safetensors_error(raw_safetensors(
      R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
      R"("a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
      8));
  EXPECT_NE(dup.find("duplicate key \"a\""), std::string::npos) << dup;
  const std::string inner = safetensors_error(raw_safetensors(
      R"({"a":{"dtype":"F32","dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 4));
  EXPECT_NE(inner.find("duplicate key \"dtype\""), std::string::npos) << inner;
  EXPECT_NE(safetensors_error(raw_safetensors(R"({"__metadata__":{"k":"1","k":"2"}})", 0))
                .find("duplicate"),
            std::string::npos);
}

TEST(FormatSafetensors, RandomCorruptionDecodesOrThrowsGoldenFileError) {
  const std::vector<std::uint8_t> valid = safetensors_encode(every_dtype(), {{"k", "v"}});
  std::size_t header_end = 8;
  for (int k = 7; k >= 0; --k) header_end += static_cast<std::size_t>(valid[k]) << (8 * k);
  std::mt19937_64 rng(20240601);
  int decoded = 0, rejected = 0;
  for (int trial = 0; trial < 600; ++trial) {
    const std::vector<std::uint8_t> b = mutate(valid, rng, header_end);
    try {
      const std::vector<Tensor> out = safetensors_decode(b, "m");
      for (const Tensor& t : out) {
        EXPECT_EQ(t.data.size(), static_cast<std::size_t>(t.numel()) * dtype_size(t.dtype));
      }
      ++decoded;
    } catch (const GoldenFileError& e) {
      EXPECT_EQ(std::string(e.what()).rfind("m: ", 0), 0u) << e.what();
      ++rejected;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "trial " << trial << ": unexpected exception " << e.what();
    } catch (...) {
      ADD_FAILURE() << "trial " << trial << ": unexpected non-std exception";
    }
  }
  EXPECT_GT(rejected, 100);
  EXPECT_GT(decoded, 10);  // flips in the data section keep the file well-formed
}

// -------------------------------------------------------------------------------------------
// .npy.

TEST(FormatNpy, RoundTripEveryDtype) {
  for (const Tensor& t : every_dtype()) {
    const std::vector<std::uint8_t> b = npy_encode(t);
    ASSERT_GE(b.size(), 10u);
    EXPECT_EQ(b[6], 1);  // version 1.0
    const std::size_t header_len = b[8] | (b[9] << 8);
    EXPECT_EQ((10 + header_len) % 64, 0u);
    EXPECT_EQ(b[10 + header_len - 1], '\n');
    const Tensor back = npy_decode(b, t.name, "t.npy");
    expect_same_tensor(back, t);
  }
  for (const std::vector<std::int64_t>& shape :
       std::vector<std::vector<std::int64_t>>{{}, {0}, {3, 0, 2}}) {
    const std::size_t n = shape.empty() ? 1 : 0;
    const Tensor t = tensor_from_f64("s", shape, std::vector<double>(n, 1.25));
    expect_same_tensor(npy_decode(npy_encode(t), "s", "s.npy"), t);
  }
}

TEST(FormatNpy, HeaderMatchesNumpyLayout) {
  const Tensor t = tensor_from_f32("x", {3}, std::vector<float>{1, 2, 3});
  const std::string s = string_of(npy_encode(t));
  EXPECT_EQ(s.substr(0, 10), std::string("\x93NUMPY\x01\x00\x76\x00", 10));
  EXPECT_EQ(s.substr(10, 57), "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }");
  EXPECT_EQ(s.size(), 128u + 12u);
  const Tensor m = tensor_from_bits16("b", DType::kBF16, {2, 3}, std::vector<std::uint16_t>(6));
  EXPECT_NE(string_of(npy_encode(m)).find("{'descr': '<u2', 'fortran_order': False, "
                                          "'shape': (2, 3), }"),
            std::string::npos);
  const Tensor r0 = tensor_from_i32("r", {}, std::vector<std::int32_t>{1});
  EXPECT_NE(string_of(npy_encode(r0)).find("'shape': (), }"), std::string::npos);
}

TEST(FormatNpy, Versions2And3Headers) {
  const char* dict = "{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }";
  for (int major : {2, 3}) {
    const Tensor t = npy_decode(raw_npy(major, dict, 16), "v", "v.npy");
    EXPECT_EQ(t.dtype, DType::kF64);
    EXPECT_EQ(t.shape, (std::vector<std::int64_t>{2}));
    EXPECT_EQ(t.data.size(), 16u);
  }
  EXPECT_NE(npy_error(raw_npy(4, dict, 16)).find("unsupported .npy version 4.0"),
            std::string::npos);
  // Larger-than-64K headers need version 2.0 on encode.
  std::vector<std::int64_t> shape(25000, 1);
  const Tensor big = tensor_from_f32("big", shape, std::vector<float>{5.0f});
  const std::vector<std::uint8_t> b = npy_encode(big);
  EXPECT_EQ(b[6], 2);
  expect_same_tensor(npy_decode(b, "big", "big.npy"), big);
}

TEST(FormatNpy, Bf16AsUint16AndPipeOrder) {
  const Tensor b = npy_decode(
      raw_npy(1, "{'descr': '<u2', 'fortran_order': False, 'shape': (1,), }", 2), "b", "b.npy");
  EXPECT_EQ(b.dtype, DType::kBF16);
  const Tensor p = npy_decode(
      raw_npy(1, "{\"shape\": (2, 1), \"fortran_order\": False, \"descr\": \"|i4\"}", 8), "p",
      "p.npy");
  EXPECT_EQ(p.dtype, DType::kI32);
  EXPECT_EQ(p.shape, (std::vector<std::int64_t>{2, 1}));
}

TEST(FormatNpy, FortranOrderRejected) {
  const std::string msg = npy_error(
      raw_npy(1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", 16), "fo.npy");
  EXPECT_EQ(msg.rfind("fo.npy: ", 0), 0u);
  EXPECT_NE(msg.find("fortran_order"), std::string::npos) << msg;
}

TEST(FormatNpy, TruncatedRejected) {
  const std::vector<std::uint8_t> full =
      npy_encode(tensor_from_f32("x", {2, 2}, std::vector<float>{1, 2, 3, 4}));
  for (std::size_t len = 0; len < full.size(); ++len) {
    const std::string msg = npy_error(std::span(full.data(), len), "t.npy");
    EXPECT_EQ(msg.rfind("t.npy: ", 0), 0u) << len << ": " << msg;
  }
  EXPECT_NE(npy_error(std::span(full.data(), full.size() - 3)).find(
                "truncated: header says 16 bytes of data, file has 13"),
            std::string::npos);
  std::vector<std::uint8_t> longer = full;
  longer.push_back(0);
  EXPECT_NE(npy_error(longer).find("1 trailing bytes"), std::string::npos);
}

TEST(FormatNpy, MalformedHeadersRejected) {
  const std::vector<std::uint8_t> ok = raw_npy(1, "{'descr': '<f4', 'fortran_order': False, "
                                                  "'shape': (1,), }", 4);
  ASSERT_NO_THROW(npy_decode(ok, "x", "x.npy"));
  std::vector<std::uint8_t> bad_magic = ok;
  bad_magic[1] = 'n';
  EXPECT_NE(npy_error(bad_magic).find("bad magic"), std::string::npos);
  EXPECT_NE(npy_error(bytes_of("PK\x03\x04")).find("bad magic"), std::string::npos);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }", "big-endian"},
      {"{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", "unsupported descr"},
      {"{'descr': '<f4', 'shape': (1,), }", "lacks"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}", "unknown key"},
      {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1,)}", "duplicate"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1)}", "not a tuple"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (-1,)}", "non-negative"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1 1)}", "expected ','"},
      {"{'descr': '<f4', 'fortran_order': 0, 'shape': (1,)}", "True or False"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,)} x", "after the dict"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}", "overflow"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296)}", "overflow"},
      {"{'descr: '<f4'", "expected"},
      {"", "expected '{'"},
  };
  for (const auto& [dict, what] : cases) {
    const std::string msg = npy_error(raw_npy(1, dict, 4));
    EXPECT_NE(msg.find(what), std::string::npos) << dict << " -> " << msg;
  }
}

TEST(FormatNpy, RandomCorruptionDecodesOrThrowsGoldenFileError) {
  const std::vector<std::uint8_t> valid =
      npy_encode(tensor_from_i32("x", {2, 3}, std::vector<std::int32_t>{1, 2, 3, 4, 5, 6}));
  std::mt19937_64 rng(99);
  int rejected = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const std::vector<std::uint8_t> b = mutate(valid, rng, valid.size() - 24);
    try {
      const Tensor t = npy_decode(b, "x", "m.npy");
      EXPECT_EQ(t.data.size(), static_cast<std::size_t>(t.numel()) * dtype_size(t.dtype));
    } catch (const GoldenFileError&) {
      ++rejected;
    } catch (...) {
      ADD_FAILURE() << "trial " << trial << ": unexpected exception type";
    }
  }
  EXPECT_GT(rejected, 50);
}

// -------------------------------------------------------------------------------------------
// Files.

class FormatFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("posenc_format_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::vector<std::string> listing(const fs::path& d) const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(d)) names.push_back(e.path().filename());
    std::sort(names.begin(), names.end());
    return names;
  }

  fs::path dir_;
};

TEST_F(FormatFile, AtomicWriteCreatesReplacesAndLeavesNoTemp) {
  const fs::path p = dir_ / "sub" / "deeper" / "out.bin";
  write_file_atomic(p, bytes_of("first version, longer"));
  EXPECT_EQ(read_file(p), bytes_of("first version, longer"));
  write_file_atomic(p, bytes_of("second"));
  EXPECT_EQ(read_file(p), bytes_of("second"));
  EXPECT_EQ(listing(p.parent_path()), (std::vector<std::string>{"out.bin"}));
  write_file_atomic(p, {});
  EXPECT_TRUE(read_file(p).empty());
  write_text_atomic(dir_ / "t.txt", "hello\n");
  EXPECT_EQ(read_file(dir_ / "t.txt"), bytes_of("hello\n"));
  EXPECT_EQ(listing(dir_), (std::vector<std::string>{"sub", "t.txt"}));
}

TEST_F(FormatFile, AtomicWriteFailureRemovesTemp) {
  const fs::path target = dir_ / "is_a_dir";
  fs::create_directories(target / "child");
  EXPECT_THROW(write_file_atomic(target, bytes_of("x")), GoldenFileError);
  EXPECT_EQ(listing(dir_), (std::vector<std::string>{"is_a_dir"}));
  // A parent path that is a regular file cannot be created.
  write_text_atomic(dir_ / "plain", "x");
  try {
    write_text_atomic(dir_ / "plain" / "f.txt", "y");
    ADD_FAILURE() << "no GoldenFileError";
  } catch (const GoldenFileError& e) {
    EXPECT_EQ(std::string(e.what()).rfind((dir_ / "plain" / "f.txt").string() + ": ", 0), 0u);
  }
}

TEST_F(FormatFile, ReadFileErrorsNamePath) {
  const fs::path missing = dir_ / "missing.safetensors";
  try {
    read_file(missing);
    ADD_FAILURE() << "no GoldenFileError";
  } catch (const GoldenFileError& e) {
    EXPECT_EQ(std::string(e.what()).rfind(missing.string() + ": cannot open", 0), 0u) << e.what();
  }
  fs::create_directories(dir_);
  EXPECT_THROW(read_file(dir_), GoldenFileError);
}

TEST_F(FormatFile, SafetensorsAndNpyFilesRoundTrip) {
  const std::vector<Tensor> in = every_dtype();
  const fs::path st = dir_ / "golden.safetensors";
  write_file_atomic(st, safetensors_encode(in, {{"case", "rope"}}));
  std::map<std::string, std::string> meta;
  const std::vector<Tensor> out = safetensors_read(st, &meta);
  EXPECT_EQ(meta.at("case"), "rope");
  EXPECT_EQ(out.size(), in.size());
  EXPECT_EQ(sha256_hex(read_file(st)), sha256_hex(safetensors_encode(out, meta)));

  const fs::path npy = dir_ / "x.npy";
  write_file_atomic(npy, npy_encode(in[0]));
  expect_same_tensor(npy_read(npy, in[0].name), in[0]);

  std::vector<std::uint8_t> cut = read_file(st);
  cut.resize(cut.size() - 1);
  write_file_atomic(st, cut);
  try {
    safetensors_read(st);
    ADD_FAILURE() << "no GoldenFileError";
  } catch (const GoldenFileError& e) {
    EXPECT_EQ(std::string(e.what()).rfind(st.string() + ": truncated", 0), 0u) << e.what();
  }
}

}  // namespace
}  // namespace posenc::golden
