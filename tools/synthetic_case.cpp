#include "tools/synthetic_case.hpp"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "golden/format/format.hpp"
#include "golden/format/manifest.hpp"
#include "golden/format/output_path.hpp"
#include "reference/common/errors.hpp"

namespace posenc::tools {

namespace fs = std::filesystem;
using golden::Sha256;

namespace {

// Deterministic pseudo-random float in [-1, 1) of an element index (splitmix64).
float q_value(std::uint64_t index) {
  std::uint64_t z = index + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return static_cast<float>(static_cast<double>(z >> 40) * 0x1p-23 - 1.0);
}

// Streams a file through the output rule (golden/format/output_path.hpp): checked, written to a
// temporary file, renamed over the target by close().
fs::path checked_output(const fs::path& p, golden::OutputKind kind) {
  golden::OutputRule().check_file(p, kind);
  return p;
}

class Writer {
 public:
  Writer(const fs::path& p, golden::OutputKind kind) : file_(checked_output(p, kind)) {}
  void write(const void* p, std::size_t n) {
    file_.write(std::span<const std::uint8_t>(static_cast<const std::uint8_t*>(p), n));
  }
  void close() { file_.commit(); }

 private:
  golden::AtomicFile file_;
};

struct Part {
  std::string name;
  std::string dtype;  // safetensors name
  std::vector<std::int64_t> shape;
  std::uint64_t bytes;
  // Writes the tensor's bytes, one token row at a time: fill(t, row bytes).
  std::function<void(std::int64_t, std::vector<std::uint8_t>&)> row;
  std::int64_t rows;
  std::string sha;
};

// Header of a safetensors file of `parts` (sorted by name) with one __metadata__ entry (how the
// output rule recognises posenc's own files), padded to a multiple of 8.
std::string header_of(const std::vector<Part>& parts, const std::string& meta_key,
                      const std::string& meta_value) {
  std::string h = "{\"__metadata__\":{\"" + meta_key + "\":\"" + meta_value + "\"},";
  std::uint64_t off = 0;
  for (std::size_t k = 0; k < parts.size(); ++k) {
    const Part& p = parts[k];
    if (k) h += ",";
    h += "\"" + p.name + "\":{\"dtype\":\"" + p.dtype + "\",\"shape\":[";
    for (std::size_t d = 0; d < p.shape.size(); ++d) h += (d ? "," : "") + std::to_string(p.shape[d]);
    h += "],\"data_offsets\":[" + std::to_string(off) + "," + std::to_string(off + p.bytes) + "]}";
    off += p.bytes;
  }
  h += "}";
  while ((8 + h.size()) % 8 != 0) h += ' ';
  return h;
}

// Writes the file and fills each part's sha.
std::uint64_t write_parts(const fs::path& path, std::vector<Part>& parts, golden::OutputKind kind,
                          const std::string& id) {
  Writer w(path, kind);
  const std::string h = header_of(
      parts, kind == golden::OutputKind::kGoldenTensors ? "posenc_case" : golden::kEngineOutputKey, id);
  std::uint8_t len[8];
  for (int k = 0; k < 8; ++k) len[k] = static_cast<std::uint8_t>(h.size() >> (8 * k));
  w.write(len, 8);
  w.write(h.data(), h.size());
  std::vector<std::uint8_t> buf;
  for (Part& p : parts) {
    Sha256 sha;
    for (std::int64_t r = 0; r < p.rows; ++r) {
      p.row(r, buf);
      sha.update(buf);
      w.write(buf.data(), buf.size());
    }
    p.sha = sha.hex();
  }
  w.close();
  return fs::file_size(path);  // the target: through a symbolic link, the file it names
}

template <class T>
void put(std::vector<std::uint8_t>& buf, std::size_t k, T v) {
  std::memcpy(buf.data() + k * sizeof(T), &v, sizeof(T));
}

}  // namespace

SyntheticCase write_synthetic_rope_case(const fs::path& dir, std::int64_t tokens,
                                        std::int64_t heads, std::int64_t head_dim) {
  if (tokens < 1 || heads < 1 || head_dim < 2 || head_dim % 2 != 0) {
    throw_invalid("write_synthetic_rope_case", "tokens and heads must be >= 1, head_dim even",
                  std::to_string(tokens) + ", " + std::to_string(heads) + ", " +
                      std::to_string(head_dim));
  }
  fs::create_directories(dir / "actual");
  const std::string id = "synthetic_rope_t" + std::to_string(tokens) + "_h" +
                         std::to_string(heads) + "_d" + std::to_string(head_dim);
  const std::int64_t half = head_dim / 2;
  const std::int64_t row_n = heads * head_dim;  // elements per token
  std::vector<double> inv_freq(static_cast<std::size_t>(half));
  for (std::int64_t i = 0; i < half; ++i) {
    inv_freq[i] = std::pow(10000.0, -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
  }
  // Exact rotated value and its condition scale of element (t, h, c).
  std::vector<double> cs(static_cast<std::size_t>(2 * half));
  auto tables = [&](std::int64_t t) {
    for (std::int64_t i = 0; i < half; ++i) {
      const double phi = static_cast<double>(t) * inv_freq[i];
      cs[2 * i] = std::cos(phi);
      cs[2 * i + 1] = std::sin(phi);
    }
  };
  auto q_at = [&](std::int64_t t, std::int64_t h, std::int64_t c) {
    return static_cast<double>(q_value(static_cast<std::uint64_t>((t * heads + h) * head_dim + c)));
  };
  auto rot_row = [&](std::int64_t t, auto emit) {
    tables(t);
    for (std::int64_t h = 0; h < heads; ++h) {
      for (std::int64_t i = 0; i < half; ++i) {
        const double xa = q_at(t, h, i), xb = q_at(t, h, i + half);
        const double c = cs[2 * i], s = cs[2 * i + 1];
        const std::int64_t k = h * head_dim + i;
        emit(k, xa * c - xb * s, std::fabs(xa * c) + std::fabs(xb * s));
        emit(k + half, xa * s + xb * c, std::fabs(xa * s) + std::fabs(xb * c));
      }
    }
  };
  const std::vector<std::int64_t> shape = {tokens, heads, head_dim};
  const std::uint64_t n = static_cast<std::uint64_t>(tokens * row_n);
  auto sized = [&](std::vector<std::uint8_t>& b, std::size_t elem) { b.resize(row_n * elem); };
  std::vector<Part> parts;
  parts.push_back({"positions", "I64", {tokens}, 8ull * tokens,
                   [&](std::int64_t, std::vector<std::uint8_t>& b) {
                     // One row holds every position (tokens * 8 bytes).
                     b.resize(8 * tokens);
                     for (std::int64_t t = 0; t < tokens; ++t) put<std::int64_t>(b, t, t);
                   },
                   1, ""});
  parts.push_back({"q", "F32", shape, 4 * n,
                   [&](std::int64_t t, std::vector<std::uint8_t>& b) {
                     sized(b, 4);
                     for (std::int64_t k = 0; k < row_n; ++k) {
                       put<float>(b, k, static_cast<float>(q_at(t, k / head_dim, k % head_dim)));
                     }
                   },
                   tokens, ""});
  parts.push_back({"q_rot", "F32", shape, 4 * n,
                   [&](std::int64_t t, std::vector<std::uint8_t>& b) {
                     sized(b, 4);
                     rot_row(t, [&](std::int64_t k, double x, double) {
                       put<float>(b, k, static_cast<float>(x));
                     });
                   },
                   tokens, ""});
  parts.push_back({"q_rot.cond", "F32", shape, 4 * n,
                   [&](std::int64_t t, std::vector<std::uint8_t>& b) {
                     sized(b, 4);
                     rot_row(t, [&](std::int64_t k, double, double c) {
                       put<float>(b, k, std::nextafter(static_cast<float>(c), INFINITY));
                     });
                   },
                   tokens, ""});
  parts.push_back({"q_rot.exact", "F64", shape, 8 * n,
                   [&](std::int64_t t, std::vector<std::uint8_t>& b) {
                     sized(b, 8);
                     rot_row(t, [&](std::int64_t k, double x, double) { put<double>(b, k, x); });
                   },
                   tokens, ""});
  const fs::path tensors = dir / (id + ".safetensors");
  SyntheticCase out;
  out.golden_bytes = write_parts(tensors, parts, golden::OutputKind::kGoldenTensors, id);
  std::vector<Part> act = {parts[2]};
  out.actual = dir / "actual" / (id + ".safetensors");
  out.actual_bytes = write_parts(out.actual, act, golden::OutputKind::kEngineOutput, id);

  using nlohmann::json;
  const json budget = {{"bound", 2.0}, {"ulps", 0.5}};
  const json na = {{"not_applicable", "synthetic f32 case"}};
  json expected = {
      {"name", "q_rot"}, {"stage", "rotated"}, {"dtype", "f32"}, {"shape", shape},
      {"sha256", parts[2].sha},
      {"check", {{"kind", "conditioned"},
                 {"profiles", {{"strict", budget}, {"fp32", budget}, {"fp32-recurrence", budget},
                               {"bf16", na}, {"f16", na}}}}},
      {"companions", {{"exact", {{"name", "q_rot.exact"}, {"dtype", "f64"}, {"sha256", parts[4].sha}}},
                      {"cond", {{"name", "q_rot.cond"}, {"dtype", "f32"}, {"sha256", parts[3].sha}}}}},
      {"axes", json::array({{{"name", "token"}, {"positions", "positions"}}, {{"name", "head"}},
                            {{"name", "channel"}}})}};
  json m = {{"schema", golden::kSchemaName}, {"version", golden::kSchemaVersion},
            {"generator", {{"name", "posenc bench"}, {"version", "synthetic"}}},
            {"id", id}, {"scheme", "rope"}, {"variant", "synthetic"}, {"result", "valid"},
            {"level", 1},
            {"description", "synthetic RoPE-shaped case for verify throughput; exact values from "
                            "a double-precision evaluation, not the mp oracle"},
            {"tensors_file", id + ".safetensors"},
            {"params", {{"n_tokens", tokens}, {"n_q_heads", heads}, {"n_kv_heads", 0},
                        {"head_dim", head_dim}, {"rotary_dim", head_dim}, {"base", 10000.0},
                        {"attention_factor", 1.0}, {"layout", "half_split"}, {"dtype", "f32"}}},
            {"inputs", json::array({{{"name", "positions"}, {"dtype", "i64"}, {"shape", {tokens}},
                                     {"sha256", parts[0].sha}},
                                    {{"name", "q"}, {"dtype", "f32"}, {"shape", shape},
                                     {"sha256", parts[1].sha}}})},
            {"expected", json::array({expected})}};
  out.manifest = dir / (id + ".json");
  golden::OutputRule().write_text(out.manifest, golden::OutputKind::kGoldenManifest,
                                  golden::manifest_text(m));
  return out;
}

}  // namespace posenc::tools
