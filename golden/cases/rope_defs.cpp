// RoPE case definitions: ids, seeds, hard positions, declared alternatives, the catalog's
// cases of a model and the level-2 sweeps (golden/cases/rope_case.hpp).
#include "golden/cases/rope_kit.hpp"

namespace posenc::golden {

using namespace rope_kit;
using reference::LongRopePolicy;
using reference::RopeLayout;
using reference::RopeParams;
using reference::RopeScaling;
using reference::RopeScalingType;
using reference::YarnForm;
using Json = nlohmann::json;
namespace bud = budgets;

// ---- case definitions -----------------------------------------------------------------------

std::string rope_base_tag(double base) {
  const int e = static_cast<int>(std::floor(std::log10(base)));
  const double mant = base / std::pow(10.0, e);
  if (std::fabs(mant - std::round(mant)) < 1e-12) {
    return std::to_string(static_cast<int>(std::round(mant))) + "e" + std::to_string(e);
  }
  return std::to_string(static_cast<long long>(base));
}

std::uint64_t rope_seed_of(const std::string& id) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : id) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

std::vector<HardPosition> rope_call_positions(std::int64_t last, const std::vector<HardPosition>& edges) {
  std::map<std::int64_t, std::string> m;
  for (const auto& hp : hard_positions()) {
    if (hp.m <= last) m.emplace(hp.m, hp.why);
  }
  for (const auto& e : edges) {
    if (e.m >= 0 && e.m <= last) m.emplace(e.m, e.why);
  }
  m.emplace(last, "the call's last position: seq_len = " + std::to_string(last + 1));
  std::vector<HardPosition> v;
  for (const auto& [pos, why] : m) v.push_back({pos, why});
  return v;
}

std::vector<HardPosition> rope_scaling_edges(const RopeModelConfig& m, std::int64_t last) {
  const RopeScaling& s = m.scaling;
  std::vector<HardPosition> v;
  // x: a position as a double (L0 / beta, L0 / a factor); none beyond the kernel's range, where
  // no call reaches (and llround would overflow).
  auto around = [&](double xd, const std::string& what) {
    if (!(xd >= 0.5 && xd <= static_cast<double>(optimized::kRopeMaxPosition))) return;
    const auto x = static_cast<std::int64_t>(std::llround(xd));
    v.push_back({x - 1, what + " - 1"});
    v.push_back({x, what});
    v.push_back({x + 1, what + " + 1"});
  };
  const std::string l0 = "L0 = original_max_position_embeddings = " + std::to_string(s.original_max_position);
  switch (s.type) {
    case RopeScalingType::kLlama3:
      around(static_cast<double>(s.original_max_position) / s.high_freq_factor,
             "wavelength edge L0 / high_freq_factor (kept below)");
      around(static_cast<double>(s.original_max_position) / s.low_freq_factor,
             "wavelength edge L0 / low_freq_factor (divided above)");
      break;
    case RopeScalingType::kYarn:
      around(static_cast<double>(s.original_max_position) / s.beta_fast,
             "ramp edge: beta_fast turns over L0 (wavelength L0 / beta_fast)");
      around(static_cast<double>(s.original_max_position) / s.beta_slow,
             "ramp edge: beta_slow turns over L0 (wavelength L0 / beta_slow)");
      break;
    case RopeScalingType::kLongRope:
      around(static_cast<double>(s.original_max_position), "switch boundary " + l0);
      break;
    case RopeScalingType::kDynamic:
      around(static_cast<double>(m.max_position),
             "dynamic boundary L = max_position_embeddings = " + std::to_string(m.max_position));
      break;
    default:
      break;
  }
  if (s.type != RopeScalingType::kNone && m.max_position > 0 && s.type != RopeScalingType::kDynamic) {
    v.push_back({m.max_position - 1, "the last position of the extended context L - 1"});
  }
  std::vector<HardPosition> out;
  for (const auto& e : v) {
    if (e.m <= last) out.push_back(e);
  }
  return out;
}

std::vector<RopeAlternative> rope_default_alternatives(const RopeModelConfig& m, const RopeScaling& expected) {
  std::vector<RopeAlternative> v;
  (void)m;
  if (expected.type == RopeScalingType::kLongRope && !reference::longrope_uses_long(expected)) {
    RopeScaling r = expected;
    r.longrope_policy = reference::LongRopePolicy::kVllmMaxModelLen;
    if (reference::longrope_uses_long(r)) {
      v.push_back({reference::longrope_policy_name(r.longrope_policy),
                   "current vLLM (phi3_long_rope_scaled_rope.py) uses the long factors for every call "
                   "whenever max_model_len > original_max_position_embeddings, chosen once so the KV "
                   "cache never mixes the two; HF uses the short ones for this call (seq_len <= L0)",
                   r});
    }
  }
  return v;
}

RopeCaseDef rope_case_for(const RopeModelConfig& m, const std::string& short_id, DType t,
                          std::vector<HardPosition> positions, const std::string& call) {
  RopeCaseDef d;
  d.model = m;
  d.scheme = scaled(m.scaling) ? "rope_scaling" : "rope";
  d.short_id = short_id;
  d.dtype = t;
  d.n_q_heads = 2;
  d.n_kv_heads = m.n_kv_heads == m.n_heads ? 2 : 1;
  d.positions = std::move(positions);
  d.call = call;
  d.expected = m.scaling;
  std::int64_t last = 0;
  for (const auto& hp : d.positions) last = std::max(last, hp.m);
  d.expected.seq_len = last + 1;
  d.model.scaling.seq_len = last + 1;
  d.resolution = !scaled(m.scaling);
  d.alternatives = rope_default_alternatives(m, d.expected);
  const std::string tag = call.empty() ? "" : "_" + call;
  d.id = d.scheme + "_" + short_id + tag + "_" + dtype_text(t);
  d.seed = rope_seed_of(d.id);
  return d;
}

std::size_t rope_case_n_positions(const RopeCaseDef& d) {
  return d.positions.size() + (d.sweep_lazy ? d.sweep_end - d.sweep_begin : 0);
}

std::int64_t rope_case_last_position(const RopeCaseDef& d) {
  std::int64_t last = d.sweep_lazy ? d.sweep_last : 0;
  for (const auto& hp : d.positions) last = std::max(last, hp.m);
  return last;
}

void rope_case_estimate(const RopeCaseDef& d, std::uint64_t* largest_tensor_bytes, std::uint64_t* file_bytes,
                        double* seconds) {
  const std::uint64_t t = rope_case_n_positions(d);
  const std::uint64_t hq = static_cast<std::uint64_t>(d.n_q_heads);
  const std::uint64_t hk = static_cast<std::uint64_t>(d.n_kv_heads);
  const std::uint64_t hd = static_cast<std::uint64_t>(d.model.params.head_dim);
  const std::uint64_t pairs = static_cast<std::uint64_t>(d.model.params.rotary_dim) / 2;
  const std::uint64_t scores = hk > 0 ? hq * t * t : 0;
  // An expected element: its dtype, .cond (f32), .exact (f64) and at most four .extra (f32).
  const std::uint64_t per = static_cast<std::uint64_t>(dtype_size(d.dtype)) + 4 + 8 + 4 * 4;
  const std::uint64_t inputs = t * 8 + (hq + hk) * t * hd * static_cast<std::uint64_t>(dtype_size(d.dtype));
  const std::uint64_t expected = pairs + 2 * t * pairs + (hq + hk) * t * hd + scores;
  *largest_tensor_bytes = std::max<std::uint64_t>({8 * scores, 8 * (hq + hk) * t * hd, 8 * t * pairs});
  *file_bytes = inputs + per * expected + 65536;  // + the header
  if (d.tables_only) {  // inv_freq, cos, sin with .cond, .exact and two .extra; q is an input
    *file_bytes = t * 8 + t * hd * static_cast<std::uint64_t>(dtype_size(d.dtype)) +
                  (static_cast<std::uint64_t>(dtype_size(d.dtype)) + 4 + 8 + 2 * 4) * (pairs + 2 * t * pairs) + 65536;
  }
  *seconds = 3.5e-7 * static_cast<double>(scores * hd) + 1e-3 * static_cast<double>(t);
  if (d.tables_only)
    *seconds = 0.03 + 7.5e-7 * static_cast<double>(t * pairs);  // fast oracle and budgets
}

namespace {

/// A tables-only case (RopeCaseDef::tables_only) of `positions`, its sweep range [first, last].
RopeCaseDef level2_tables(const RopeModelConfig& m, const std::string& sid, DType t,
                          std::vector<HardPosition> positions, const std::string& call, std::int64_t first,
                          std::int64_t last) {
  RopeCaseDef d = rope_case_for(m, sid, t, std::move(positions), call);
  d.tables_only = true;
  d.n_q_heads = 1;
  d.n_kv_heads = 0;
  d.resolution = false;
  d.sweep_first = first;
  d.sweep_last = last;
  return d;
}

/// Tables-only chunks of a call's sorted, unique positions (`list`, shared; null: the integers
/// 0 .. n - 1), each named lazily (RopeCaseDef::sweep_lazy); each also holds the last position.
void level2_chunks(const RopeModelConfig& m, const std::string& sid, DType t,
                   const std::shared_ptr<const std::vector<std::int64_t>>& list, std::size_t n,
                   const std::string& call, std::int64_t chunk, std::vector<RopeCaseDef>* out) {
  auto at = [&](std::size_t j) { return list ? (*list)[j] : static_cast<std::int64_t>(j); };
  const std::int64_t last = at(n - 1);
  const HardPosition last_hp{last, "the call's last position: seq_len = " + std::to_string(last + 1)};
  for (std::size_t b = 0; b < n; b += static_cast<std::size_t>(chunk)) {
    const std::size_t e = std::min(n, b + static_cast<std::size_t>(chunk));
    char tag[32];
    std::snprintf(tag, sizeof tag, "_%09lld", static_cast<long long>(at(b)));
    // Built with the call's last position (its seq_len and alternatives), then made lazy.
    RopeCaseDef d = level2_tables(m, sid, t, {last_hp}, call + tag, at(b), at(e - 1));
    if (at(e - 1) == last) d.positions.clear();
    d.sweep_lazy = true;
    d.sweep_list = list;
    d.sweep_begin = b;
    d.sweep_end = e;
    out->push_back(std::move(d));
  }
}

/// A full case (q, k, rotations, scores) at `n` of the positions (first, last, evenly spread;
/// `keep` first, each with its why).
RopeCaseDef level2_sampled(const RopeModelConfig& m, const std::string& sid, DType t, const std::vector<std::int64_t>& pos,
                           std::map<std::int64_t, std::string> keep, int n, const std::string& call) {
  for (int j = 0; j < n && !pos.empty(); ++j) {
    const std::size_t at = n == 1 ? 0 : static_cast<std::size_t>((pos.size() - 1) * static_cast<std::uint64_t>(j) / (n - 1));
    keep.emplace(pos[at], "sampled: evenly spread over the call's positions");
  }
  std::vector<HardPosition> hp;
  for (const auto& [x, why] : keep) hp.push_back({x, why});
  RopeCaseDef d = rope_case_for(m, sid, t, std::move(hp), call);
  d.resolution = false;
  return d;
}

}  // namespace

std::vector<RopeCaseDef> rope_level2_cases(const RopeModelConfig& m, DType t, const std::string& name,
                                           const RopeLevel2Plan& plan) {
  const std::string sid = name.empty() ? sanitize(m.id) : sanitize(name);
  const RopeScaling& s = m.scaling;
  const std::int64_t l = m.max_position > 0 ? m.max_position : 4096;
  std::vector<std::pair<std::string, std::int64_t>> sweeps;  // call, last position
  if (s.type == RopeScalingType::kLongRope) sweeps.emplace_back("l2_short", s.original_max_position - 1);
  if (s.type == RopeScalingType::kDynamic) {
    sweeps.emplace_back("l2_within", l - 1);
    sweeps.emplace_back("l2_double", 2 * l - 1);
  } else {
    sweeps.emplace_back("l2_sweep", l - 1);
  }
  std::vector<RopeCaseDef> v;
  for (const auto& [call, last] : sweeps) {
    level2_chunks(m, sid, t, nullptr, static_cast<std::size_t>(last + 1), call, plan.chunk, &v);
  }
  // Windows: every position within `window` of each boundary of the rule, 2^k and 2^24.
  std::map<std::int64_t, std::string> centers;
  for (const auto& e : rope_scaling_edges(m, optimized::kRopeMaxPosition)) centers.emplace(e.m, e.why);
  for (std::int64_t x = 2; x <= 2 * l; x *= 2) centers.emplace(x, "2^" + std::to_string(std::countr_zero(static_cast<std::uint64_t>(x))));
  centers.emplace(std::int64_t{1} << 24, "2^24, the last integer float32 holds with every neighbour");
  std::map<std::int64_t, std::string> win;
  for (const auto& [c, why] : centers) {
    for (std::int64_t x = std::max<std::int64_t>(0, c - plan.window); x <= c + plan.window; ++x) {
      if (x <= optimized::kRopeMaxPosition) win.emplace(x, x == c ? why : "within " + std::to_string(plan.window) + " of " + why);
    }
  }
  std::vector<HardPosition> wp;
  for (const auto& [x, why] : win) wp.push_back({x, why});
  v.push_back(level2_tables(m, sid, t, std::move(wp), "l2_windows", -1, -1));
  // Sampled tokens of the context: the boundaries inside it, then evenly spread.
  std::map<std::int64_t, std::string> keep;
  for (const auto& [c, why] : centers) {
    if (c < l) keep.emplace(c, "sampled: " + why);
  }
  std::vector<std::int64_t> spread;
  for (int j = 0; j < plan.samples; ++j) spread.push_back((l - 1) * j / std::max(1, plan.samples - 1));
  v.push_back(level2_sampled(m, sid, t, spread, keep, plan.samples, "l2_sampled"));
  return v;
}

std::vector<RopeCaseDef> rope_given_level2_cases(const RopeModelConfig& m, DType t, const std::string& name,
                                                 const std::vector<std::int64_t>& positions,
                                                 const RopeLevel2Plan& plan) {
  const std::string sid = name.empty() ? sanitize(m.id) : sanitize(name);
  std::vector<RopeCaseDef> v;
  level2_chunks(m, sid, t, std::make_shared<const std::vector<std::int64_t>>(positions), positions.size(),
                "given", plan.chunk, &v);
  v.push_back(level2_sampled(m, sid, t, positions, {}, plan.samples, "given_sampled"));
  return v;
}

std::vector<RopeCaseDef> rope_cases_for_config(const RopeModelConfig& m, DType t,
                                               const std::vector<std::int64_t>& positions, const std::string& name) {
  const std::string sid = name.empty() ? sanitize(m.id) : sanitize(name);
  std::vector<RopeCaseDef> v;
  if (!positions.empty()) {
    // Sorted and deduplicated as plain integers: a list of 2^22 positions stays 32 MB (a set
    // and a reason string per position took about 600 MB before the job's estimate was printed).
    std::vector<std::int64_t> sorted = positions;
    for (std::int64_t x : sorted) {
      if (x < 0) throw_invalid("rope_cases_for_config", "positions must be >= 0", x);
      if (x > optimized::kRopeMaxPosition) {
        throw_invalid("rope_cases_for_config", "positions must be <= 2^28 (the kernel's valid range)", x);
      }
    }
    std::sort(sorted.begin(), sorted.end());
    sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
    if (sorted.size() > kRopeMaxGivenPositions) {  // scores would hold T^2 values per head: level 2
      return rope_given_level2_cases(m, t, name, sorted);
    }
    std::vector<HardPosition> hp;
    hp.reserve(sorted.size());
    for (std::int64_t x : sorted) hp.push_back({x, "given by --positions"});
    v.push_back(rope_case_for(m, sid, t, hp, "given"));
    return v;
  }
  const std::int64_t all = hard_positions().back().m;
  const RopeScaling& s = m.scaling;
  if (s.type == RopeScalingType::kLongRope) {
    const std::int64_t l0 = s.original_max_position;
    v.push_back(rope_case_for(m, sid, t, rope_call_positions(l0 - 1, rope_scaling_edges(m, l0 - 1)), "short"));
    v.push_back(rope_case_for(m, sid, t, rope_call_positions(l0, rope_scaling_edges(m, l0)), "boundary"));
  }
  if (s.type == RopeScalingType::kDynamic) {
    const std::int64_t l = m.max_position;
    if (l <= 0 || l > optimized::kRopeMaxPosition / 2) {  // the reader refuses these; 2L - 1 must stay valid
      throw_invalid("rope_cases_for_config",
                    "dynamic scaling needs max_position_embeddings in [1, 2^27] (its call ends at 2L - 1)", l);
    }
    v.push_back(rope_case_for(m, sid, t, rope_call_positions(l - 1, rope_scaling_edges(m, l - 1)), "within"));
    v.push_back(rope_case_for(m, sid, t, rope_call_positions(2 * l - 1, rope_scaling_edges(m, 2 * l - 1)), "double"));
  }
  v.push_back(rope_case_for(m, sid, t, rope_call_positions(all, rope_scaling_edges(m, all)), "all"));
  return v;
}

// The scaling rule in the manifest (rope_scaling_to_json, rope_scaling_from_json):
// golden/cases/plan_json.cpp, with the plan types' codec that uses it.

}  // namespace posenc::golden
