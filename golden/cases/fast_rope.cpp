// The fast RoPE table oracle: the error analysis is in fast_rope.hpp. This file is compiled
// with -ffp-contract=off (CMakeLists.txt): Dekker's exact products below need every product
// and sum rounded on its own.
#include "golden/cases/fast_rope.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "reference/common/errors.hpp"
#include "reference/common/rounding.hpp"

namespace posenc::golden {
namespace {

// ---- double-double arithmetic (Dekker, Knuth; no FMA) ----------------------------------------

DD fast_two_sum(double a, double b) {  // |a| >= |b|
  const double s = a + b;
  return {s, b - (s - a)};
}
DD two_sum(double a, double b) {
  const double s = a + b;
  const double bb = s - a;
  return {s, (a - (s - bb)) + (b - bb)};
}
void split(double a, double* hi, double* lo) {
  const double t = 134217729.0 * a;  // 2^27 + 1
  *hi = t - (t - a);
  *lo = a - *hi;
}
DD two_prod(double a, double b) {
  const double p = a * b;
  double ah, al, bh, bl;
  split(a, &ah, &al);
  split(b, &bh, &bl);
  return {p, ((ah * bh - p) + ah * bl + al * bh) + al * bl};
}
DD add(const DD& a, const DD& b) {
  DD s = two_sum(a.hi, b.hi);
  const DD t = two_sum(a.lo, b.lo);
  s.lo += t.hi;
  s = fast_two_sum(s.hi, s.lo);
  s.lo += t.lo;
  return fast_two_sum(s.hi, s.lo);
}
DD add(const DD& a, double b) { return add(a, DD{b, 0.0}); }
DD mul(const DD& a, const DD& b) {
  DD p = two_prod(a.hi, b.hi);
  p.lo += a.hi * b.lo + a.lo * b.hi;
  return fast_two_sum(p.hi, p.lo);
}
DD neg(const DD& a) { return {-a.hi, -a.lo}; }

template <class Real>
DD to_dd(const Real& x) {
  const double hi = round_to_f64(x);
  return {hi, round_to_f64(Real(x - Real(hi)))};
}

constexpr int kTableBits = 11;  // 2048 entries over one turn
constexpr int kTableSize = 1 << kTableBits;

struct Constants {
  DD two_pi, s3, c4;  // 2 pi, -1/6, 1/24
  std::array<DD, kTableSize> cos_k, sin_k;
};

const Constants& constants() {
  static const Constants c = [] {
    Constants k;
    const mp50 pi = 4 * atan(mp50(1));
    k.two_pi = to_dd(mp50(2 * pi));
    k.s3 = to_dd(mp50(-1) / 6);
    k.c4 = to_dd(mp50(1) / 24);
    for (int j = 0; j < kTableSize; ++j) {
      const mp50 ang = 2 * pi * j / kTableSize;
      k.cos_k[j] = to_dd(mp50(cos(ang)));
      k.sin_k[j] = to_dd(mp50(sin(ang)));
    }
    return k;
  }();
  return c;
}

/// The format of a target dtype: significant bits and the smallest normal exponent.
void dtype_format(DType t, int* p, int* emin) {
  switch (t) {
    case DType::kF32: *p = 24; *emin = -126; return;
    case DType::kBF16: *p = 8; *emin = -126; return;
    case DType::kF16: *p = 11; *emin = -14; return;
    default: throw_invalid("FastRopeTables", "target dtype must be f32, bf16 or f16", dtype_short(t));
  }
}

}  // namespace

bool dd_round_if_safe(const DD& v, double e, DType t, double* target, double* exact) {
  if (!(v.hi != 0) || !std::isfinite(v.hi) || std::fabs(v.hi) < 0x1p-1000) return false;
  const double sign = v.hi < 0 ? -1.0 : 1.0;
  const double hv = std::fabs(v.hi), lv = sign * v.lo;  // the value is sign (hv + lv)
  const double margin = 2 * e;
  // Double: hv is the nearest double; the boundaries are hv +- half a gap (half the gap below
  // a power of two).
  const int eh = std::ilogb(hv);
  const double q = std::ldexp(1.0, eh - 52);
  const double gap_dn = hv == std::ldexp(1.0, eh) ? q / 2 : q;
  if (!(q / 2 - lv > margin && gap_dn / 2 + lv > margin)) return false;
  // The target: c = hv rounded to p bits (hv / q exact, nearbyint rounds to nearest-even), then
  // the boundaries around c in c's own binade.
  int p = 0, emin = 0;
  dtype_format(t, &p, &emin);
  const int e0 = std::max(std::ilogb(hv), emin);
  const double q0 = std::ldexp(1.0, e0 - (p - 1));
  const double z = hv / q0;
  double n = std::nearbyint(z);
  if (z - std::floor(z) == 0.5 && lv != 0) n = lv > 0 ? std::ceil(z) : std::floor(z);  // hv on a tie: lv decides
  const double c = n * q0;
  if (c == 0) return false;
  const int ec = std::max(std::ilogb(c), emin);
  const double qc = std::ldexp(1.0, ec - (p - 1));
  const double up = qc, dn = (c == std::ldexp(1.0, ec) && ec > emin) ? qc / 2 : qc;
  if (!(((c + up / 2) - hv) - lv > margin && (hv - (c - dn / 2)) + lv > margin)) return false;
  *target = sign * c;
  *exact = v.hi;
  return true;
}

FastRopeTables::FastRopeTables(const std::vector<mp50>& w, const mp50& a) : w_(w), a_(a) {
  if (!(a > 0) || a > 1000) throw_invalid("FastRopeTables", "attention factor must be in (0, 1000]", a);
  const mp100 pi100 = 4 * atan(mp100(1));
  for (const mp50& wi : w) {
    if (!(wi > 0) || wi > 1000) throw_invalid("FastRopeTables", "frequencies must be in (0, 1000]", wi);
    mp100 r = mp100(wi) / (2 * pi100);
    r -= floor(r);
    unsigned __int128 fixed = 0;
    for (int chunk = 0; chunk < 4; ++chunk) {  // 32 bits at a time, each exact as a double
      r = ldexp(r, 32);
      const mp100 f = floor(r);
      r -= f;
      fixed = (fixed << 32) | static_cast<std::uint32_t>(round_to_f64(f));
    }
    turns_.push_back(fixed);
    w_dd_.push_back(to_dd(wi));
  }
  a_dd_ = to_dd(a);
  err_ = std::ldexp(std::max(a_dd_.hi, 1.0), -88);
  (void)constants();
}

double FastRopeTables::angle(std::int64_t m, int i) const {
  return mul(DD{static_cast<double>(m), 0.0}, w_dd_[static_cast<std::size_t>(i)]).hi;
}

void FastRopeTables::approx(std::int64_t m, int i, DD* c, DD* s) const {
  const Constants& k = constants();
  // 1. m w / 2 pi mod 1, exact in 128-bit fixed point (unsigned multiplication wraps mod 2^128).
  const unsigned __int128 turn = static_cast<unsigned __int128>(m) * turns_[static_cast<std::size_t>(i)];
  // 2. Table entry j and the rest g < 2^(128 - 11): x = 2 pi g 2^-128.
  const int j = static_cast<int>(turn >> (128 - kTableBits));
  const unsigned __int128 g = turn & ((static_cast<unsigned __int128>(1) << (128 - kTableBits)) - 1);
  const auto g_hi = static_cast<std::uint64_t>(g >> 64), g_lo = static_cast<std::uint64_t>(g);
  const DD f = fast_two_sum(std::ldexp(static_cast<double>(g_hi), -64),
                            std::ldexp(static_cast<double>(g_lo), -128));  // g_hi < 2^53: exact
  const DD x = mul(f, k.two_pi);
  // 3. Taylor: sin x = x + x y (-1/6 + tail), cos x = 1 - y/2 + y^2 (1/24 + tail), y = x^2.
  const DD y = mul(x, x);
  const double yh = y.hi;
  const double s_tail = yh * (1.0 / 120 - yh * (1.0 / 5040 - yh / 362880));
  const double c_tail = -yh * (1.0 / 720 - yh * (1.0 / 40320 - yh / 3628800));
  const DD sin_x = add(x, mul(mul(x, y), add(k.s3, s_tail)));
  const DD cos_x = add(add(mul(mul(y, y), add(k.c4, c_tail)), DD{-y.hi / 2, -y.lo / 2}), 1.0);
  // 4. cos(A + x) = C cos x - S sin x, sin(A + x) = S cos x + C sin x, times a.
  const DD& ck = k.cos_k[static_cast<std::size_t>(j)];
  const DD& sk = k.sin_k[static_cast<std::size_t>(j)];
  *c = mul(a_dd_, add(mul(ck, cos_x), neg(mul(sk, sin_x))));
  *s = mul(a_dd_, add(mul(sk, cos_x), mul(ck, sin_x)));
}

FastRopeTables::Value FastRopeTables::round_or_fallback(const DD& v, std::int64_t m, int i, bool is_sin,
                                                        DType t) const {
  Value r;
  if (dd_round_if_safe(v, err_, t, &r.target, &r.exact)) return r;
  // Too close to a boundary (or zero): the mp50 oracle's own expression (rope_kit.hpp, rope_oracle).
  ++fallbacks_;
  const mp50 phi = mp50(m) * w_[static_cast<std::size_t>(i)];
  const mp50 y = is_sin ? mp50(a_ * sin(phi)) : mp50(a_ * cos(phi));
  r.target = round_to_dtype(y, t);
  r.exact = round_to_f64(y);
  return r;
}

void FastRopeTables::eval(std::int64_t m, int i, DType t, Value* c, Value* s) const {
  if (m < 0 || m >= (std::int64_t{1} << 29)) throw_invalid("FastRopeTables::eval", "position must be in [0, 2^29)", m);
  if (i < 0 || i >= pairs()) throw_invalid("FastRopeTables::eval", "pair out of range", i);
  DD cd, sd;
  approx(m, i, &cd, &sd);
  *c = round_or_fallback(cd, m, i, false, t);
  *s = round_or_fallback(sd, m, i, true, t);
}

}  // namespace posenc::golden
