// `posenc oracle rope` (tools/posenc_oracle.hpp).
//
// Reads q (and k) as float32 .npy [tokens, heads, head_dim], builds the in-memory golden case of
// that call (golden/cases/rope_call_case.hpp: mp50 oracle cross-checked with mp100, every
// profile's budgets) and writes into --out:
//   <t>.exact.npy   float64  the exact values (mp50, rounded to double)    t = q_rot, k_rot, scores
//   <t>.f32.npy     float32  the exact values correctly rounded to float32
//   <t>.budget.npy  float64  the profile's per-element budget (what verify allows |y - y*| to be)
//   inv_freq.npy    float64  base^(-2i/rotary_dim) rounded to double
// scores [heads, tokens, tokens] = q_rot . k_rot (unscaled; q head h uses kv head h / group).
// `posenc oracle alibi --heads N` writes slopes.exact.npy and slopes.budget.npy [N]: the committed
// case alibi_slopes_h1_to_256_f32 (every head count 1..256) restricted to N heads.
// `posenc oracle t5 --positions R,... --num-buckets N --max-distance D [--causal]` writes
// buckets.npy (int64 [len R]): the exact T5 bucket of each relative position r = key - query
// (reference/t5_bias.hpp; integers, the same under every profile).
// Each file is written atomically (temporary file, then rename) under the output rule
// (golden/format/output_path.hpp): --out and every file name in it are checked before anything
// is computed; --q and --k (and the alibi case's files) are the files this command reads.
#include "tools/posenc_oracle.hpp"

#include <filesystem>
#include <sstream>
#include <vector>

#include "golden/cases/catalog.hpp"
#include "golden/cases/rope_call_case.hpp"
#include "golden/format/format.hpp"
#include "golden/format/output_path.hpp"
#include "golden/format/profiles.hpp"
#include "golden/verify/element_budgets.hpp"
#include "reference/common/errors.hpp"
#include "reference/common/scalar.hpp"
#include "reference/t5_bias.hpp"
#include "tools/cli_checks.hpp"

namespace posenc::tools {
namespace fs = std::filesystem;
using namespace posenc::golden;

CLI::App* add_oracle_command(CLI::App& app, OracleArgs* a) {
  auto* o = app.add_subcommand(
      "oracle",
      "Exact (mp50) outputs and a profile's per-element budgets for one call of your kernel, as "
      ".npy files: <t>.exact.npy, <t>.f32.npy, <t>.budget.npy for t = q_rot, k_rot, scores, and "
      "inv_freq.npy (python/posenc/properties.py uses it). Example: posenc oracle rope "
      "--positions 0,7,65535 --head-dim 64 --heads 2 --kv-heads 1 --q q.npy --k k.npy --out DIR");
  o->add_option("SCHEME", a->scheme,
                "rope, alibi (slopes.exact.npy and slopes.budget.npy for --heads N), or t5 "
                "(buckets.npy for --positions as relative positions key - query)")
      ->required();
  o->add_option("--positions", a->positions,
                "rope: token positions, comma separated (e.g. 0,7); t5: relative positions key - "
                "query (negative ones as --positions=-3,5)");
  o->add_option("--head-dim", a->head_dim, "rope: channels per head");
  o->add_option("--rotary-dim", a->rotary_dim, "Rotated leading channels (default: head_dim)");
  o->add_option("--base", a->base, "RoPE base (default 10000)");
  o->add_option("--layout", a->layout,
                "Pairing: half_split ((i, i + d/2), NeoX / HF rotate_half, default) or "
                "interleaved ((2i, 2i + 1), GPT-J / Meta)")->check(kNonEmpty);
  o->add_option("--heads", a->heads, "rope: q heads; alibi: the head count, 1..256");
  o->add_option("--kv-heads", a->kv_heads, "k heads (divides --heads; default 1)");
  o->add_option("--q", a->q, "rope: q as float32 .npy [tokens, heads, head_dim]")->check(kNonEmpty);
  o->add_option("--k", a->k, "rope: k as float32 .npy [tokens, kv_heads, head_dim]")->check(kNonEmpty);
  o->add_option("--profile", a->profile,
                "Budgets of this profile: strict, fp32 (default), fp32-recurrence");
  o->add_option("--num-buckets", a->num_buckets, "t5: number of buckets (default 32)");
  o->add_option("--max-distance", a->max_distance, "t5: max_distance (default 128)");
  o->add_flag("--causal", a->causal, "t5: causal (unidirectional) buckets; default bidirectional");
  o->add_option("--out", a->out, "Output directory (created)")->check(kNonEmpty)->required();
  o->add_flag("--force", a->force,
              "Replace files in --out that are not .npy files. Never: a FIFO, device, socket or "
              "directory, nor --q or --k");
  return o;
}

namespace {

std::vector<std::int64_t> parse_positions(const std::string& s) {
  std::vector<std::int64_t> v;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    std::size_t used = 0;
    std::int64_t x = 0;
    try {
      x = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size()) {
      throw_invalid("posenc oracle", "--positions must be integers separated by commas", s);
    }
    v.push_back(x);
  }
  if (v.empty()) throw_invalid("posenc oracle", "--positions must name at least one position", s);
  return v;
}

std::vector<double> read_input(const std::string& path, const char* name, std::int64_t tokens,
                               int heads, int head_dim) {
  const Tensor t = npy_read(path, name);
  if (t.dtype != DType::kF32) {
    throw_invalid("posenc oracle", std::string("--") + name + " must be a float32 .npy", path);
  }
  if (t.shape != std::vector<std::int64_t>{tokens, heads, head_dim}) {
    std::ostringstream os;
    os << "--" << name << " must have shape [" << tokens << ", " << heads << ", " << head_dim
       << "] (tokens, heads, head_dim)";
    throw_invalid("posenc oracle", os.str(), path);
  }
  return tensor_to_f64(t);
}

}  // namespace

namespace {

/// The output rule of one oracle run: --out and its files checked before any work.
OutputRule oracle_outputs(const OracleArgs& a, const std::vector<fs::path>& reads,
                          const std::vector<std::string>& files) {
  OutputRule rule(a.force);
  for (const auto& r : reads) rule.add_read(r);
  rule.check_dir(a.out);
  for (const auto& f : files) rule.check_file(fs::path(a.out) / f, OutputKind::kNpyOutput);
  return rule;
}

int run_alibi_oracle(const OracleArgs& a, const std::string& profile) {
  if (a.heads < 1 || a.heads > 256) {
    throw_invalid("posenc oracle alibi", "--heads must be in 1..256", a.heads);
  }
  const fs::path manifest = default_data_dir() / "alibi" / "alibi_slopes_h1_to_256_f32.json";
  const OutputRule rule =
      oracle_outputs(a, {manifest, manifest.parent_path() / "alibi_slopes_h1_to_256_f32.safetensors"},
                     {"slopes.exact.npy", "slopes.budget.npy"});
  const LoadedCase c = load_case(manifest);
  const ElementBudgets b = element_budgets(c.spec, c.golden, "slopes", profile);
  const Tensor& nh = c.golden.at("n_heads");
  std::vector<double> exact, budget;
  for (std::int64_t e = 0; e < nh.numel(); ++e) {
    if (nh.get_i64(e) != a.heads) continue;
    exact.push_back(b.exact[e]);
    budget.push_back(b.budget[e]);
  }
  const fs::path out(a.out);
  rule.write(out / "slopes.exact.npy", OutputKind::kNpyOutput,
             npy_encode(tensor_from_f64("slopes.exact", {a.heads}, exact)));
  rule.write(out / "slopes.budget.npy", OutputKind::kNpyOutput,
             npy_encode(tensor_from_f64("slopes.budget", {a.heads}, budget)));
  return 0;
}

int run_t5_oracle(const OracleArgs& a) {
  reference::T5BiasParams p;
  p.num_buckets = a.num_buckets;
  p.max_distance = a.max_distance;
  p.bidirectional = !a.causal;
  reference::t5_bias_check(p, "posenc oracle t5");
  if (a.positions.empty()) {
    throw_invalid("posenc oracle t5", "needs --positions (relative positions key - query)", "");
  }
  const auto r = parse_positions(a.positions);
  const OutputRule rule = oracle_outputs(a, {}, {"buckets.npy"});
  std::vector<std::int64_t> b;
  for (std::int64_t x : r) b.push_back(reference::t5_bias_bucket(p, x));
  const std::int64_t n = static_cast<std::int64_t>(b.size());
  rule.write(fs::path(a.out) / "buckets.npy", OutputKind::kNpyOutput,
             npy_encode(tensor_from_i64("buckets", {n}, b)));
  return 0;
}

}  // namespace

int run_oracle_command(const OracleArgs& a) {
  if (a.scheme != "rope" && a.scheme != "alibi" && a.scheme != "t5") {
    throw_invalid("posenc oracle", "SCHEME must be rope, alibi or t5", a.scheme);
  }
  if (a.scheme == "t5") return run_t5_oracle(a);
  const std::string profile = canonical_profile(a.profile);
  if (profile != "strict" && profile != "fp32" && profile != "fp32-recurrence") {
    throw_invalid("posenc oracle", "--profile must be strict, fp32 or fp32-recurrence", a.profile);
  }
  if (a.scheme == "alibi") return run_alibi_oracle(a, profile);
  if (a.positions.empty() || a.q.empty() || a.k.empty() || a.head_dim <= 0) {
    throw_invalid("posenc oracle rope", "needs --positions, --head-dim, --q and --k", a.head_dim);
  }
  reference::RopeParams p;
  p.head_dim = a.head_dim;
  p.rotary_dim = a.rotary_dim > 0 ? a.rotary_dim : a.head_dim;
  p.base = a.base;
  if (a.layout == "half_split") {
    p.layout = reference::RopeLayout::kHalfSplit;
  } else if (a.layout == "interleaved") {
    p.layout = reference::RopeLayout::kInterleaved;
  } else {
    throw_invalid("posenc oracle", "--layout must be half_split or interleaved", a.layout);
  }
  reference::rope_check(p, "posenc oracle");
  const int kv = a.kv_heads > 0 ? a.kv_heads : 1;
  if (a.heads < 1 || a.heads % kv != 0) {
    throw_invalid("posenc oracle", "--heads must be >= 1 and a multiple of --kv-heads", a.heads);
  }
  const auto pos = parse_positions(a.positions);
  std::vector<std::string> files = {"inv_freq.npy"};
  for (const char* name : {"q_rot", "k_rot", "scores"}) {
    for (const char* suffix : {".f32.npy", ".exact.npy", ".budget.npy"}) {
      files.push_back(std::string(name) + suffix);
    }
  }
  const OutputRule rule = oracle_outputs(a, {a.q, a.k}, files);
  const std::int64_t tn = static_cast<std::int64_t>(pos.size());
  const auto q = read_input(a.q, "q", tn, a.heads, a.head_dim);
  const auto k = read_input(a.k, "k", tn, kv, a.head_dim);
  const LoadedCase lc = rope_call_case(p, a.heads, kv, pos, 0, q, k);
  const fs::path out(a.out);
  for (const char* name : {"q_rot", "k_rot", "scores"}) {
    const ElementBudgets b = element_budgets(lc.spec, lc.golden, name, profile);
    const Tensor& rounded = lc.golden.at(name);
    auto write = [&](const std::string& suffix, const Tensor& t) {
      Tensor c = t;
      c.name = std::string(name) + suffix;
      rule.write(out / (c.name + ".npy"), OutputKind::kNpyOutput, npy_encode(c));
    };
    write(".f32", rounded);
    write(".exact", tensor_from_f64("", rounded.shape, b.exact));
    write(".budget", tensor_from_f64("", rounded.shape, b.budget));
  }
  std::vector<double> inv;
  for (int i = 0; i < p.rotary_dim / 2; ++i) {
    inv.push_back(static_cast<double>(pow(mp50(p.base), -mp50(2 * i) / mp50(p.rotary_dim))));
  }
  rule.write(out / "inv_freq.npy", OutputKind::kNpyOutput,
             npy_encode(tensor_from_f64("inv_freq", {p.rotary_dim / 2}, inv)));
  return 0;
}

}  // namespace posenc::tools
