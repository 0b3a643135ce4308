// The compiled part of check/kv_cache.hpp (golden/cases/check_kv_cache.hpp).
#include "golden/cases/check_kv_cache.hpp"

#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

#include "golden/cases/kv_call_case.hpp"
#include "golden/verify/element_budgets.hpp"
#include "reference/common/errors.hpp"
#include "reference/kv_cache.hpp"

namespace posenc::check::detail {
namespace {

reference::KvCacheParams params_of(const KvCacheCheckConfig& c) {
  reference::KvCacheParams p;
  p.attn.n_heads = c.n_heads;
  p.attn.n_kv_heads = c.n_kv_heads;
  p.attn.head_dim = c.head_dim;
  p.attn.value_dim = c.head_dim;
  p.attn.scale_kind = reference::AttentionScale::kInvSqrtHeadDim;
  p.attn.causal = true;
  p.attn.window = c.window;
  p.capacity = c.capacity;
  p.enc.kind = reference::KvEncodingKind::kRope;
  p.enc.rope.head_dim = c.head_dim;
  p.enc.rope.rotary_dim = c.head_dim;
  p.enc.rope.base = c.base;
  p.enc.rope.layout = c.layout;
  return p;
}

std::vector<std::int64_t> steps_of(const KvDraw& d) {
  std::vector<std::int64_t> s = {d.prefill};
  s.insert(s.end(), static_cast<std::size_t>(d.decode), 1);
  return s;
}

std::string step_name(std::size_t s) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "s%02zu", s);
  return buf;
}

golden::LoadedCase trace(const KvDraw& d, const std::string& mistake = "") {
  golden::KvCallDef def;
  def.params = params_of(d.config);
  def.steps = steps_of(d);
  def.seed = d.seed;
  def.mistake = mistake;
  return golden::kv_call_case(def);
}

std::vector<float> floats(const golden::LoadedCase& lc, const std::string& name) {
  const golden::Tensor& t = lc.golden.at(name);
  std::vector<float> x(static_cast<std::size_t>(t.numel()));
  for (std::int64_t i = 0; i < t.numel(); ++i) x[i] = static_cast<float>(t.get_f64(i));
  return x;
}

/// Outputs per step [T, H, d]. all_at_once: one step of every token (split back by step).
std::vector<std::vector<float>> run_session(const KvSessionFactory& factory, const KvDraw& d,
                                            const golden::LoadedCase& lc, bool all_at_once) {
  const std::vector<std::int64_t> steps = steps_of(d);
  const int H = d.config.n_heads, hd = d.config.head_dim;
  std::vector<std::vector<float>> q, k, v;
  for (std::size_t s = 0; s < steps.size(); ++s) {
    q.push_back(floats(lc, step_name(s) + ".q"));
    k.push_back(floats(lc, step_name(s) + ".k"));
    v.push_back(floats(lc, step_name(s) + ".v"));
  }
  if (all_at_once) {
    for (std::size_t s = 1; s < steps.size(); ++s) {
      q[0].insert(q[0].end(), q[s].begin(), q[s].end());
      k[0].insert(k[0].end(), k[s].begin(), k[s].end());
      v[0].insert(v[0].end(), v[s].begin(), v[s].end());
    }
    q.resize(1), k.resize(1), v.resize(1);
  }
  const KvStepFunction step = factory(d.config);
  std::vector<std::vector<float>> out;
  std::int64_t next = 0;
  for (std::size_t s = 0; s < q.size(); ++s) {
    const std::int64_t n = static_cast<std::int64_t>(q[s].size()) / (H * hd);
    std::vector<std::int64_t> pos(static_cast<std::size_t>(n));
    for (std::int64_t t = 0; t < n; ++t) pos[t] = next + t;
    next += n;
    std::vector<float> o(static_cast<std::size_t>(n * H * hd),
                         std::numeric_limits<float>::quiet_NaN());
    KvStepCall c;
    c.n_tokens = n;
    c.positions = pos;
    c.q = q[s];
    c.k = k[s];
    c.v = v[s];
    c.out = o;
    step(c);
    out.push_back(std::move(o));
  }
  if (all_at_once) {  // back to the trace's steps
    std::vector<std::vector<float>> split;
    std::size_t at = 0;
    for (std::int64_t t : steps) {
      const std::size_t w = static_cast<std::size_t>(t * H * hd);
      split.emplace_back(out[0].begin() + at, out[0].begin() + at + w);
      at += w;
    }
    return split;
  }
  return out;
}

/// Where element i of step s is: "position p, head h, channel c".
std::string where(const KvDraw& d, const std::vector<std::int64_t>& steps, std::size_t s,
                  std::size_t i) {
  std::int64_t first = 0;
  for (std::size_t x = 0; x < s; ++x) first += steps[x];
  const std::size_t hd = static_cast<std::size_t>(d.config.head_dim);
  const std::size_t H = static_cast<std::size_t>(d.config.n_heads);
  std::ostringstream os;
  os << "step " << s << " (" << (s == 0 ? "prefill of " + std::to_string(steps[0]) + " tokens"
                                        : std::string("decode"))
     << "), position " << first + static_cast<std::int64_t>(i / (H * hd)) << ", head "
     << (i / hd) % H << ", channel " << i % hd;
  return os.str();
}

/// "" when every output is within its budget of the trace's exact value; else the worst one.
std::string judge(const KvDraw& d, const golden::LoadedCase& lc,
                  const std::vector<std::vector<float>>& out, const std::string& profile) {
  const std::vector<std::int64_t> steps = steps_of(d);
  double worst = 0;
  std::string msg;
  for (std::size_t s = 0; s < steps.size(); ++s) {
    const golden::ElementBudgets eb =
        golden::element_budgets(lc.spec, lc.golden, step_name(s) + ".out", profile);
    for (std::size_t i = 0; i < eb.exact.size(); ++i) {
      const double e = std::fabs(static_cast<double>(out[s][i]) - eb.exact[i]);
      if (e <= eb.budget[i]) continue;
      const double r = std::isfinite(e) ? e / eb.budget[i] : INFINITY;
      if (!msg.empty() && !(r > worst)) continue;
      worst = r;
      std::ostringstream os;
      os.precision(9);
      os << where(d, steps, s, i) << ": output " << out[s][i] << ", exact " << eb.exact[i]
         << ", |error| " << e << " > budget " << eb.budget[i] << " (profile " << profile << ")";
      msg = os.str();
    }
  }
  return msg;
}

/// The known numbering mistakes whose expected values the outputs match.
std::string diagnosis(const KvDraw& d, const std::vector<std::vector<float>>& out,
                      const std::string& profile) {
  struct Known {
    const char* mistake;
    const char* words;
  };
  static const Known kKnown[] = {
      {"restart-at-0",
       "positions restart at 0 after the prefill: the decode tokens are numbered from 0 again "
       "instead of continuing the sequence (after a prefill of m tokens the next one is "
       "position m)"},
      {"cache-length-position",
       "the cache length is taken as the position: once the ring buffer is full, a new token "
       "gets position = the number of cached tokens instead of the sequence's next position "
       "(a slot or cache index is storage, not a position)"}};
  std::string s;
  for (const Known& k : kKnown) {
    if (judge(d, trace(d, k.mistake), out, profile).empty()) {
      s += std::string(s.empty() ? "\ndiagnosis: " : "; or ") + k.words + " (`" + k.mistake +
           "`)";
    }
  }
  return s;
}

}  // namespace

std::string describe(const KvDraw& d) {
  const KvCacheCheckConfig& c = d.config;
  std::ostringstream os;
  os << "heads " << c.n_heads << " (kv " << c.n_kv_heads << "), head_dim " << c.head_dim
     << ", base " << c.base << ", layout " << reference::rope_layout_name(c.layout)
     << ", capacity " << c.capacity << ", window " << c.window << ", prefill " << d.prefill
     << " + " << d.decode << " decode steps, seed " << d.seed;
  return os.str();
}

void kv_check_profile(const std::string& profile, const char* function) {
  if (profile != "strict" && profile != "fp32" && profile != "fp32-recurrence") {
    throw_invalid(function,
                  "profile must be strict, fp32 or fp32-recurrence (the KV-cache traces are "
                  "float32; bf16 and f16 judge 16-bit pipelines)",
                  profile);
  }
}

std::string kv_property_at(KvCacheProperty which, const KvSessionFactory& factory,
                           const KvDraw& d, const std::string& profile) {
  const golden::LoadedCase lc = trace(d);
  const std::vector<std::vector<float>> split = run_session(factory, d, lc, false);
  if (which == KvCacheProperty::kOracle) {
    const std::string f = judge(d, lc, split, profile);
    return f.empty() ? f : "against the mp50 oracle: " + f + diagnosis(d, split, profile);
  }
  // PrefillDecode: both runs hold the same tokens, so each output is within its budget b of the
  // same exact value; the two may differ by 2 b (no new tolerance).
  const std::vector<std::vector<float>> all = run_session(factory, d, lc, true);
  const std::vector<std::int64_t> steps = steps_of(d);
  for (std::size_t s = 0; s < steps.size(); ++s) {
    const golden::ElementBudgets eb =
        golden::element_budgets(lc.spec, lc.golden, step_name(s) + ".out", profile);
    for (std::size_t i = 0; i < eb.exact.size(); ++i) {
      const double e = std::fabs(static_cast<double>(split[s][i]) - all[s][i]);
      if (e <= 2 * eb.budget[i]) continue;
      std::ostringstream os;
      os.precision(9);
      os << where(d, steps, s, i) << ": prefill of all " << d.prefill + d.decode
         << " tokens in one step gives " << all[s][i] << ", prefill + decode steps give "
         << split[s][i] << " (exact " << eb.exact[i] << "), |difference| " << e
         << " > 2 x budget " << eb.budget[i] << " (profile " << profile << ")";
      const std::string fa = judge(d, lc, all, profile), fs = judge(d, lc, split, profile);
      if (fa.empty() && !fs.empty()) {
        os << "\nthe one-step prefill agrees with the oracle; the prefill + decode steps do "
              "not: "
           << fs << diagnosis(d, split, profile);
      } else if (!fa.empty()) {
        os << "\nthe one-step prefill disagrees with the oracle: " << fa;
      }
      return os.str();
    }
  }
  return "";
}

}  // namespace posenc::check::detail
