// The compiled part of check/rope.hpp (golden/cases/check_rope.hpp).
#include "golden/cases/check_rope.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "golden/cases/diagnose.hpp"
#include "golden/cases/hard_positions.hpp"
#include "golden/cases/rope_call_case.hpp"
#include "golden/verify/element_budgets.hpp"
#include "reference/common/errors.hpp"

namespace posenc::check::detail {


std::string describe(const RopeDraw& d) {
  std::ostringstream os;
  os << "head_dim " << d.head_dim << ", rotary_dim " << d.rotary_dim << ", base " << d.base
     << ", layout " << reference::rope_layout_name(d.layout) << ", heads " << d.n_heads
     << " (kv 1), positions [";
  for (std::size_t i = 0; i < d.positions.size(); ++i) os << (i ? ", " : "") << d.positions[i];
  os << "], shift " << d.shift << ", seed " << d.seed;
  return os.str();
}

/// The in-memory golden case of one call (q, k given or drawn from the seed).
golden::LoadedCase rope_case(const RopeDraw& d, const std::vector<std::int64_t>& positions,
                                    const std::vector<double>& q = {},
                                    const std::vector<double>& k = {}) {
  reference::RopeParams p;
  p.head_dim = d.head_dim;
  p.rotary_dim = d.rotary_dim;
  p.base = d.base;
  p.layout = d.layout;
  return golden::rope_call_case(p, d.n_heads, 1, positions, d.seed, q, k);
}

/// Runs the kernel on a case's inputs: q_rot and k_rot, [tokens, heads, head_dim] float32.
golden::TensorMap run_kernel(const RopeKernel& kernel, const RopeDraw& d,
                                    const golden::LoadedCase& lc) {
  const golden::Tensor& pt = lc.golden.at("positions");
  std::vector<std::int64_t> pos;
  for (std::int64_t i = 0; i < pt.numel(); ++i) pos.push_back(pt.get_i64(i));
  const std::vector<float> q = golden::tensor_to_f32(lc.golden.at("q"));
  const std::vector<float> k = golden::tensor_to_f32(lc.golden.at("k"));
  // The case's exact inv_freq (mp50, rounded to double): no multiprecision code in this header.
  const std::vector<double> inv = golden::tensor_to_f64(lc.golden.at(
      std::find_if(lc.spec.expected.begin(), lc.spec.expected.end(),
                   [](const golden::TensorSpec& t) { return t.name == "inv_freq"; })->exact));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> qo(q.size(), nan), ko(k.size(), nan);
  RopeCall c;
  c.positions = pos;
  c.n_heads = d.n_heads;
  c.n_kv_heads = 1;
  c.head_dim = d.head_dim;
  c.rotary_dim = d.rotary_dim;
  c.base = d.base;
  c.layout = d.layout;
  c.inv_freq = inv;
  c.q = q;
  c.k = k;
  c.q_out = qo;
  c.k_out = ko;
  kernel(c);
  const std::int64_t tn = static_cast<std::int64_t>(pos.size());
  return golden::tensor_map({golden::tensor_from_f32("q_rot", {tn, d.n_heads, d.head_dim}, qo),
                             golden::tensor_from_f32("k_rot", {tn, 1, d.head_dim}, ko)});
}

using Budgets = golden::ElementBudgets;
Budgets budgets_of(const golden::LoadedCase& lc, const std::string& name,
                          const std::string& profile) {
  return golden::element_budgets(lc.spec, lc.golden, name, profile);
}

/// The verdict of verify on the kernel's outputs: "" when both pass, else the verbose report.
std::string oracle_failure(const golden::LoadedCase& lc, const golden::TensorMap& out,
                                  const std::string& profile) {
  golden::VerifyOptions o;
  o.profile = profile;
  golden::CaseSpec spec = lc.spec;  // judge the two stages a kernel produces
  std::erase_if(spec.expected, [](const golden::TensorSpec& t) {
    return t.name != "q_rot" && t.name != "k_rot";
  });
  const golden::CaseReport r = golden::verify_case(spec, lc.golden, out, o);
  bool ok = true;
  for (const auto& t : r.tensors) {
    if ((t.name == "q_rot" || t.name == "k_rot") && t.status != golden::Verdict::kPass) ok = false;
  }
  if (ok) return "";
  return "outputs vs the mp50 oracle under profile " + profile + ": " + golden::to_string(r.status) + "\n" +
         golden::format_case_text(r, true);
}

std::string fmt(double x) {
  char b[32];
  std::snprintf(b, sizeof b, "%.6g", x);
  return b;
}

/// Which elements of a [tokens, heads, head_dim] tensor form pair i of a head: (a, b).
std::pair<int, int> pair_channels(const RopeDraw& d, int i) {
  reference::RopeParams p;
  p.head_dim = d.head_dim;
  p.rotary_dim = d.rotary_dim;
  p.layout = d.layout;
  return {reference::rope_pair_a(p, i), reference::rope_pair_b(p, i)};
}

/// One property at one drawn call: "" or what fails. Records the failing case in `last`.
std::string property_at(RopeProperty which, const RopeKernel& kernel,
                               const std::string& profile, const RopeDraw& d, LastFailure* last) {
  auto judge = [&](const golden::LoadedCase& lc, const golden::TensorMap& out) {
    std::string f = oracle_failure(lc, out, profile);
    if (!f.empty()) {
      last->lc = lc;
      last->out = out;
    }
    return f;
  };
  const int h = d.head_dim, np = d.rotary_dim / 2;
  if (which == RopeProperty::kOracle || which == RopeProperty::kPairNorm) {
    const golden::LoadedCase lc = rope_case(d, d.positions);
    const golden::TensorMap out = run_kernel(kernel, d, lc);
    if (which == RopeProperty::kOracle) return judge(lc, out);
    // PairNorm: the exact rotation keeps every pair's norm; the tail is copied.
    for (const char* name : {"q_rot", "k_rot"}) {
      const Budgets b = budgets_of(lc, name, profile);
      const golden::Tensor& x = lc.golden.at(name[0] == 'q' ? "q" : "k");
      const golden::Tensor& y = out.at(name);
      const std::int64_t rows = x.numel() / h;
      for (std::int64_t r = 0; r < rows; ++r) {
        const std::int64_t o = r * h;
        for (int i = 0; i < np; ++i) {
          const auto [ca, cb] = pair_channels(d, i);
          const double nx = std::hypot(x.get_f64(o + ca), x.get_f64(o + cb));
          const double ny = std::hypot(y.get_f64(o + ca), y.get_f64(o + cb));
          const double tol = b.budget[o + ca] + b.budget[o + cb];
          if (!(std::fabs(ny - nx) <= tol)) {
            last->lc = lc;
            last->out = out;
            return std::string(name) + " row " + std::to_string(r) + " (token " +
                   std::to_string(r / (name[0] == 'q' ? d.n_heads : 1)) + ") pair " +
                   std::to_string(i) + " (channels " + std::to_string(ca) + ", " +
                   std::to_string(cb) + "): norm " + fmt(ny) + " vs input norm " + fmt(nx) +
                   ", |difference| " + fmt(std::fabs(ny - nx)) + " > the " + profile +
                   " budget " + fmt(tol) + "\n" + judge(lc, out);
          }
        }
        for (int c = d.rotary_dim; c < h; ++c) {
          if (y.get_bits(o + c) != x.get_bits(o + c)) {
            last->lc = lc;
            last->out = out;
            return std::string(name) + " row " + std::to_string(r) + " tail channel " +
                   std::to_string(c) + " (>= rotary_dim) changed: " + fmt(x.get_f64(o + c)) +
                   " -> " + fmt(y.get_f64(o + c)) + "\n" + judge(lc, out);
          }
        }
      }
    }
    return judge(lc, out);
  }
  if (which == RopeProperty::kRelative) {
    const std::int64_t m = d.positions[0], n = d.positions[1], s = d.shift;
    const golden::LoadedCase a = rope_case(d, {m, n}), b = rope_case(d, {m + s, n + s});
    const golden::TensorMap oa = run_kernel(kernel, d, a), ob = run_kernel(kernel, d, b);
    const Budgets ba = budgets_of(a, "scores", profile), bb = budgets_of(b, "scores", profile);
    for (int hh = 0; hh < d.n_heads; ++hh) {
      auto score = [&](const golden::TensorMap& o) {
        const golden::Tensor& q = o.at("q_rot");
        const golden::Tensor& k = o.at("k_rot");
        double sum = 0;  // q at token 0, k at token 1 (its one kv head)
        for (int c = 0; c < h; ++c) sum += q.get_f64(hh * h + c) * k.get_f64(h + c);
        return sum;
      };
      const std::size_t j = static_cast<std::size_t>(hh * 4 + 1);  // scores[hh, 0, 1]
      const double sa = score(oa), sb = score(ob), tol = ba.budget[j] + bb.budget[j];
      if (!(std::fabs(sa - sb) <= tol)) {
        std::string f = judge(a, oa);
        if (f.empty()) f = judge(b, ob);
        return "head " + std::to_string(hh) + ": q.k at positions (" + std::to_string(m) + ", " +
               std::to_string(n) + ") = " + fmt(sa) + " but at (" + std::to_string(m + s) + ", " +
               std::to_string(n + s) + ") = " + fmt(sb) + " (exact " + fmt(ba.exact[j]) +
               "); |difference| " + fmt(std::fabs(sa - sb)) + " > the " + profile +
               " budget " + fmt(tol) + " of the two scores\n" + f;
      }
    }
    std::string f = judge(a, oa);
    return f.empty() ? judge(b, ob) : f;
  }
  // Composition: z = kernel(a, kernel(b, x)) vs w = kernel(a + b, x).
  const std::int64_t pb = d.positions[0], pa = d.shift;
  const golden::LoadedCase cb = rope_case(d, {pb});
  const golden::TensorMap ob = run_kernel(kernel, d, cb);
  const std::string fb = judge(cb, ob);
  if (!fb.empty()) return "the first rotation R(" + std::to_string(pb) + ") x fails\n" + fb;
  std::vector<double> yq = golden::tensor_to_f64(ob.at("q_rot"));
  std::vector<double> yk = golden::tensor_to_f64(ob.at("k_rot"));
  const golden::LoadedCase ca = rope_case(d, {pa}, yq, yk);
  const golden::TensorMap oa = run_kernel(kernel, d, ca);
  const golden::LoadedCase cab = rope_case(d, {pa + pb});
  const golden::TensorMap oab = run_kernel(kernel, d, cab);
  for (const char* name : {"q_rot", "k_rot"}) {
    const Budgets e1 = budgets_of(cb, name, profile), e2 = budgets_of(ca, name, profile),
                  e3 = budgets_of(cab, name, profile);
    const golden::Tensor &y = ob.at(name), &z = oa.at(name), &w = oab.at(name);
    const std::int64_t rows = y.numel() / h;
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::int64_t o = r * h;
      for (int i = 0; i < np; ++i) {
        const auto [a_, b_] = pair_channels(d, i);
        const double err1 = std::hypot(y.get_f64(o + a_) - e1.exact[o + a_],
                                       y.get_f64(o + b_) - e1.exact[o + b_]);
        const double tol = err1 + e2.budget[o + a_] + e2.budget[o + b_] + e3.budget[o + a_] +
                           e3.budget[o + b_];
        const double dist = std::hypot(z.get_f64(o + a_) - w.get_f64(o + a_),
                                       z.get_f64(o + b_) - w.get_f64(o + b_));
        if (!(dist <= tol)) {
          std::string f = judge(ca, oa);
          if (f.empty()) f = judge(cab, oab);
          return std::string(name) + " row " + std::to_string(r) + " pair " + std::to_string(i) +
                 ": R(" + std::to_string(pa) + ") R(" + std::to_string(pb) + ") x and R(" +
                 std::to_string(pa + pb) + ") x differ by " + fmt(dist) + " > the " + profile +
                 " budget " + fmt(tol) + " (both rotations' budgets + the first one's error)\n" +
                 f;
        }
      }
    }
  }
  std::string f = judge(ca, oa);
  return f.empty() ? judge(cab, oab) : f;
}


std::string diagnose_last(const LastFailure& last, const std::string& profile) {
  if (!last.lc) return "";
  try {
    const golden::Diagnosis dg = golden::diagnose_case(*last.lc, last.out, profile);
    return "posenc diagnose: " + dg.verdict + ": " + dg.summary;
  } catch (const std::exception& e) {
    return std::string("posenc diagnose: not available (") + e.what() + ")";
  }
}

std::vector<std::int64_t> hard_position_values(std::int64_t max_position) {
  std::vector<std::int64_t> v;
  for (const auto& hp : golden::hard_positions()) {
    if (hp.m >= 0 && hp.m <= max_position) v.push_back(hp.m);
  }
  return v;
}

}  // namespace posenc::check::detail
