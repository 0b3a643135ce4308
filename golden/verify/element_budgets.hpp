// Per-element budgets of an expected tensor under a profile, as verify computes them
// (golden/format/manifest.hpp: conditioned: bound * eps * cond + ulps * ulp(y*), 0 where cond is
// 0; ulp: bound * ulp(y*); plus the profile's extra companion), with the exact values. For code
// that derives a tolerance from the budgets (check/rope.hpp, `posenc oracle`), not a new one.
#pragma once
#include <string>
#include <vector>

#include "golden/format/manifest.hpp"
#include "golden/verify/verify.hpp"
#include "reference/common/dtype.hpp"
#include "reference/common/errors.hpp"

namespace posenc::golden {

struct ElementBudgets {
  std::vector<double> budget, exact;
};

/// InvalidArgument naming the tensor when the case has no such conditioned or ulp tensor.
inline ElementBudgets element_budgets(const CaseSpec& spec, const TensorMap& golden,
                                      const std::string& name, const std::string& profile) {
  for (const auto& t : spec.expected) {
    if (t.name != name || t.check.kind == CheckKind::kExact) continue;
    const ProfileBudget& b = t.check.profile(profile);
    const Tensor& ex = golden.at(t.exact);
    const Tensor* cond = t.cond.empty() ? nullptr : &golden.at(t.cond);
    const Tensor* extra = b.extra.empty() ? nullptr : &golden.at(b.extra);
    ElementBudgets r;
    const double eps = dtype_eps(t.dtype);
    for (std::int64_t j = 0; j < ex.numel(); ++j) {
      const double x = ex.get_f64(j);
      double v = 0;
      if (!b.applies) {
        v = 0;
      } else if (t.check.kind == CheckKind::kUlp) {
        v = b.bound * dtype_ulp(t.dtype, x);
      } else {
        const double c = cond ? cond->get_f64(j) : 0.0;
        v = c > 0 ? b.bound * eps * c + b.ulps * dtype_ulp(t.dtype, x) : 0.0;
      }
      if (extra) v += extra->get_f64(j);
      r.budget.push_back(v);
      r.exact.push_back(x);
    }
    return r;
  }
  throw_invalid("element_budgets", "the case has no conditioned or ulp tensor of this name", name);
}

}  // namespace posenc::golden
