// Golden cases for ALiBi. Formula: see reference/alibi.hpp.
//   slope tables: every head count 1..256 (level 3) and the real models' head counts (BLOOM-176B
//     112, BLOOM-560m 16, MPT-7B 32; 12, 20, 40, 96), f32, ulp check;
//   negative controls (result "invalid"): the naive 2^(-8k/n) rule and a sorted (monotone) order
//     for 12 heads; verify passes an engine only if it does NOT reproduce them;
//   attention: BLOOM-560m-shaped (16 heads) and 12-head causal attention with the paper, BLOOM
//     and MPT forms (equal probabilities), a decode step, and the symmetric bidirectional form;
//     one decode query over 4200 keys (f16: an f16 KQ mask rounds its distances; f32, keys
//     below 4000 padded: BLOOM's form m j rounds at |m j| up to 1050, which the fp32 budget's
//     form term covers).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "golden/cases/mistakes.hpp"
#include "golden/cases/attention_case.hpp"
#include "golden/cases/budgets.hpp"
#include "golden/cases/pipelines.hpp"
#include "golden/cases/oracle_tensors.hpp"
#include "golden/cases/registry.hpp"
#include "optimized/alibi.hpp"
#include "reference/alibi.hpp"
#include "reference/common/errors.hpp"
#include "reference/common/rounding.hpp"
#include "reference/common/scalar.hpp"
#include "reference/common/mutant.hpp"

namespace posenc::golden {

namespace {

/// The mistakes this file branches on (golden/cases/mistakes.hpp).
enum class MistakeId { kNone, kOther, kNaiveSlopes, kNoBiasInDecode, kSignFlipped, kSlopeIndexOffByOne, kSlopesReversed, kSortedSlopes };
const MistakeTable<MistakeId, 6> kMistakes(
    {"alibi"},
    {{
     {MistakeId::kNaiveSlopes, "naive-slopes"},
     {MistakeId::kNoBiasInDecode, "no-bias-in-decode"},
     {MistakeId::kSignFlipped, "sign-flipped"},
     {MistakeId::kSlopeIndexOffByOne, "slope-index-off-by-one"},
     {MistakeId::kSlopesReversed, "slopes-reversed"},
     {MistakeId::kSortedSlopes, "sorted-slopes"}}});

}  // namespace

namespace {

using Json = nlohmann::json;
using reference::AlibiForm;
using reference::AlibiParams;
using reference::AttentionParams;
using reference::AttentionScale;

const char* kCitation = "O. Press, N. A. Smith, M. Lewis, arXiv:2108.12409v2, Sec. 3";

// ---- slope tables ------------------------------------------------------------------------------

enum class SlopeRule { kCorrect, kNaive, kSorted };

struct SlopeCase {
  std::string id, description, model;
  std::vector<int> head_counts;
  SlopeRule rule = SlopeRule::kCorrect;  // kNaive / kSorted: negative controls
};

std::vector<SlopeCase> slope_cases() {
  std::vector<SlopeCase> v;
  std::vector<int> all(256);
  for (int n = 1; n <= 256; ++n) all[n - 1] = n;
  v.push_back({"alibi_slopes_h1_to_256_f32", "ALiBi slopes for every head count 1..256 (level 3)",
               "", all, SlopeRule::kCorrect});
  struct Model { int n; const char* tag; const char* model; };
  for (const Model& m : {Model{112, "bloom_176b", "bigscience/bloom"},
                         Model{16, "bloom_560m", "bigscience/bloom-560m"},
                         Model{32, "mpt_7b", "mosaicml/mpt-7b"}, Model{12, "h12", ""},
                         Model{20, "h20", ""}, Model{40, "h40", ""}, Model{96, "h96", ""}}) {
    const std::string tag = m.tag;
    v.push_back({"alibi_slopes_h" + std::to_string(m.n) + (tag.rfind("h", 0) == 0 ? "" : "_" + tag) + "_f32",
                 "ALiBi slopes, " + std::to_string(m.n) + " heads" +
                     (std::string(m.model).empty() ? "" : std::string(" (") + m.model + ")"),
                 m.model, {m.n}, SlopeRule::kCorrect});
  }
  v.push_back({"alibi_slopes_h12_naive_invalid_f32",
               "negative control: the power-of-2 rule 2^(-8k/n) applied to 12 heads (mlx #343)", "",
               {12}, SlopeRule::kNaive});
  v.push_back({"alibi_slopes_h12_sorted_invalid_f32",
               "negative control: 12-head slopes sorted into a monotone order (the paper's order is "
               "not monotone)", "", {12}, SlopeRule::kSorted});
  return v;
}

template <class Real>
std::vector<Real> rule_slopes(int n, SlopeRule rule) {
  using std::pow;
  if (rule == SlopeRule::kNaive) {
    std::vector<Real> m;
    for (int k = 1; k <= n; ++k) m.push_back(pow(Real(2), -Real(8 * k) / Real(n)));
    return m;
  }
  std::vector<Real> m = reference::alibi_slopes<Real>(AlibiParams{n, AlibiForm::kPaper});
  if (rule == SlopeRule::kSorted) std::sort(m.begin(), m.end(), [](const Real& a, const Real& b) { return a > b; });
  return m;
}

Json base_manifest(const std::string& id, const std::string& description, const std::string& result,
                   int level) {
  Json m = manifest_header(id, "alibi", "", result, level, description);
  m.erase("variant");  // set by the caller
  m["citation"] = kCitation;
  m["oracle"] = mp_oracle_json("correct rounding to nearest-even, once");
  return m;
}

// ---- budgets (docs/profiles.md) ---------------------------------------------------------
// Slopes are float32 tables in every pipeline (HF builds them in float32 whatever the model
// dtype), so every profile applies to them:
//   strict   correctly rounded: 0.5 ulp (+ 2^-28: long double exp2, then float)
//   fp32     BLOOM (a float32 base fl32(2^(-8/c)) raised to k = h + 1 by torch.pow) or MPT
//            (1 / powf(2, k 8/P)): extra = the worst relative error over every faithful powf
//            and both float32 neighbours of the base, times |m| (golden/cases/budgets.hpp):
//            up to 32 ulp, which a 0.5-ulp check would call a bug
//   fp32-recurrence  ggml (m0 = powf(2, -8/c), powf(m0, h + 1)): the same enumeration
//   bf16, f16  as fp32
// A negative control's stored values follow its wrong rule, so its extras are that rule's own
// float32 errors: the naive rule 2^(-8k/n) computed by the same pipelines with c = n (BLOOM and
// ggml: a float32 base fl32(2^(-8/n)) or powf(2, fl32(-8/n)) raised to k; MPT: 1/powf(2,
// fl32(fl32(k) fl32(8/n))), the exponent rounded twice), the sorted rule the error of the
// correct slope each entry came from; and every profile also allows strict's rounding (0.5 ulp
// + 2^-28), so an engine that computes the wrong rule correctly rounded, or with any faithful
// float32 pipeline, reproduces the control under every profile.
// In attention, a relative slope error rho moves the bias m d by rho |m d| (the extras of
// golden/cases/attention_case.cpp); an f16 KQ mask (llama.cpp with a 16-bit cache) rounds the
// distance itself, a further relative error |fl16(d) - d| / |d| that fp32-recurrence accepts
// for 16-bit targets.

ProfileBudget slope_budget(const std::string& profile, SlopeRule rule) {
  if (POSENC_MUTANT("gold_alibi_budgets_inflated")) return profile == "strict" ? bound_of(4.0) : bound_of(4.0);
  if (profile == "strict") return bound_of(0.5 + 0x1p-28);
  // A negative control: a correctly rounded engine of the wrong rule reproduces it too.
  // (Redundant with the enumerated extras today, which hold the correctly rounded value too.)
  if (rule != SlopeRule::kCorrect) {
    return bound_of(0.5 + 0x1p-28);
  }
  return bound_of(0.0);
}

/// The worst relative slope error of every profile but strict, for head h of n.
std::map<std::string, double> slope_rel_errors(int n, int h) {
  const double mpt = budgets::alibi_slope_rel_error_mpt(n, h);
  double powers = budgets::alibi_slope_rel_error_powers(n, h);
  if (POSENC_MUTANT("gold_alibi_slope_powers_term_dropped")) powers = mpt;
  const double fp32 = std::max(powers, mpt);
  return {{"fp32", fp32}, {"fp32-recurrence", powers}, {"bf16", fp32}, {"f16", fp32}};
}

/// The same for entry h of a rule's table (negative controls: the wrong rule's own errors).
std::map<std::string, double> rule_slope_rel_errors(int n, int h, SlopeRule rule) {
  if (POSENC_MUTANT("gold_alibi_control_extra_of_correct_rule")) rule = SlopeRule::kCorrect;
  if (rule == SlopeRule::kSorted) {  // entry h holds the correct slope of head perm[h]
    const auto m = reference::alibi_slopes<double>(AlibiParams{n, AlibiForm::kPaper});
    std::vector<int> perm(static_cast<std::size_t>(n));
    for (int x = 0; x < n; ++x) perm[x] = x;
    std::stable_sort(perm.begin(), perm.end(), [&](int a, int b) { return m[a] > m[b]; });
    return slope_rel_errors(n, perm[static_cast<std::size_t>(h)]);
  }
  if (rule == SlopeRule::kNaive) {
    const double powers = budgets::alibi_naive_slope_rel_error_powers(n, h);
    const double fp32 = std::max(powers, budgets::alibi_naive_slope_rel_error_mpt(n, h));
    return {{"fp32", fp32}, {"fp32-recurrence", powers}, {"bf16", fp32}, {"f16", fp32}};
  }
  return slope_rel_errors(n, h);
}

/// The fp32 profile's score error from the bias form (HF BLOOM m j, MPT m (j - (Tk-1)) or the
/// paper's -m (i - j): the same softmax, each a float32 product and a float32 add at its own
/// magnitude): fl32(m x) is within u |m x| and the add fl32(s + b) within u (|s| + |b|); the
/// case's condition scale holds |s| and its own |b|, so the budget adds 2u (1 + u) |m| times
/// the largest |x| of the three forms for query position i and key j.
double form_rounding_error(double m, std::int64_t i, std::int64_t j, std::int64_t tk) {
  const double x = static_cast<double>(std::max({std::llabs(j), std::llabs(i - j), std::llabs(tk - 1 - j)}));
  return 2 * budgets::kU32 * (1 + budgets::kU32) * std::fabs(m) * x;
}

/// |fl16(d) - d| / |d|: the distance rounding of an f16 KQ mask.
double f16_distance_rel_error(std::int64_t d) {
  if (d == 0) return 0.0;
  const double r = f16_to_double(double_to_f16(static_cast<double>(d)));
  return std::fabs(r - static_cast<double>(d)) / std::fabs(static_cast<double>(d));
}

GoldenCase slope_generate(const SlopeCase& c) {
  std::vector<std::int64_t> entry_n, entry_h;
  std::vector<mp50> s50;
  for (int n : c.head_counts) {
    const auto a = rule_slopes<mp50>(n, c.rule);
    const auto b = rule_slopes<mp100>(n, c.rule);
    for (int h = 0; h < n; ++h) {
      if (round_to_f32(a[h]) != round_to_f32(b[h]) || round_to_f64(a[h]) != round_to_f64(b[h])) {
        throw std::runtime_error("alibi slope_generate: " + c.id + ": mp50 and mp100 disagree");
      }
      entry_n.push_back(n);
      entry_h.push_back(h);
      s50.push_back(a[h]);
    }
  }
  const std::int64_t ne = static_cast<std::int64_t>(s50.size());
  std::vector<float> f;
  for (const auto& x : s50) f.push_back(round_to_f32(x));
  std::vector<Tensor> tensors = {tensor_from_i64("n_heads", {ne}, entry_n),
                                 tensor_from_i64("head", {ne}, entry_h)};
  std::vector<TensorSpec> inputs = {input_spec(tensors[0]), input_spec(tensors[1])};
  ExpectedTensor sl = expected_tensor("slopes", "table", DType::kF32, {ne}, CheckKind::kUlp);
  sl.spec.axes = {{"entry", "", {}, {"n_heads", "head"}}};
  sl.values = s50;
  for (const auto& prof : profiles()) sl.spec.check.profiles[prof.name] = slope_budget(prof.name, c.rule);
  std::map<std::string, std::vector<double>> extra;
  for (std::int64_t e = 0; e < ne; ++e) {
    const auto rho = rule_slope_rel_errors(static_cast<int>(entry_n[e]), static_cast<int>(entry_h[e]), c.rule);
    const double inflate = POSENC_MUTANT("gold_alibi_budgets_inflated") ? 8.0 : 1.0001;
    for (const auto& [prof, r] : rho) extra[prof].push_back(r * std::fabs(static_cast<double>(s50[e])) * inflate);
  }
  sl.extra = std::move(extra);
  std::vector<TensorSpec> expected = {add_expected(&tensors, std::move(sl))};
  const std::string result = c.rule == SlopeRule::kCorrect ? "valid" : "invalid";
  Json m = base_manifest(c.id, c.description, result, c.head_counts.size() > 1 ? 3 : 1);
  m["variant"] = "slopes";
  m["alibi_case"] = "slopes";
  m["conventions"] = {
      {"slopes", "m_h = 2^(-8(h+1)/c) for h < c = 2^floor(log2 n); m_h = 2^(-4(2(h-c)+1)/c) for "
                 "h >= c; heads 0-based"},
      {"layout", "one entry per (n_heads, head) pair, in order of n then head; inputs n_heads and "
                 "head give the pair of each entry"}};
  if (c.rule == SlopeRule::kNaive) m["wrong_convention"] = "m_h = 2^(-8(h+1)/n) for every n";
  if (c.rule == SlopeRule::kSorted) m["wrong_convention"] = "the correct slopes sorted descending";
  if (!c.model.empty()) m["preset"] = {{"hf_model", c.model}};
  if (c.rule != SlopeRule::kCorrect) {
    m["control_budget"] = "every profile: strict's 0.5 ulp + 2^-28 and, but for strict, the extra "
                          "of the wrong rule computed by that profile's float32 pipelines (posenc "
                          "engine --mistake " + std::string(c.rule == SlopeRule::kNaive ? "naive" : "sorted") +
                          "-slopes --pipeline PL reproduces it under each profile)";
  }
  Json sj = Json::array();
  if (c.head_counts.size() == 1) {
    for (std::size_t h = 0; h < s50.size(); ++h) {
      sj.push_back({{"head", h}, {"f32_hex", hex_bits_f32(f[h])},
                    {"decimal", s50[h].str(25, std::ios_base::scientific)}});
    }
    m["tables"] = {{"slopes", sj}};
  }
  m["flags"] = {"AlibiSlopes", "NonPowerOfTwoHeads"};
  m["pipelines"] = {
      {"fp32", "BLOOM: base = fl32(2^(-8/c)), torch.pow(base, k); MPT: 1/powf(2, k 8/P) (both "
               "enumerated over every faithful powf and either neighbour of the base)"},
      {"fp32-recurrence", "ggml: m0 = powf(2, -8/c), slope = powf(m0, h + 1) (m1 = powf(2, "
                          "-4/c) for the extra heads), every faithful powf"}};
  manifest_add_tensors(m, c.id, inputs, expected);
  return GoldenCase{m, std::move(tensors)};
}

// ---- attention with the ALiBi bias -------------------------------------------------------------

struct AlibiAttentionCase {
  AttentionCaseDef def;
  AlibiForm form;
};

std::vector<AlibiAttentionCase> attention_cases() {
  struct Shape {
    std::string name, description;
    int heads, kv_heads, head_dim;
    AlibiForm form;
    bool causal;
    std::int64_t tq, tk, offset;
    std::vector<DType> dtypes;
    std::int64_t padded_below = 0;  // keys j < padded_below are hidden by key_padding
  };
  const std::vector<Shape> shapes = {
      {"paper_causal_h16_d64_t16", "BLOOM-560m shape, paper form -m(i-j), causal", 16, 16, 64,
       AlibiForm::kPaper, true, 16, 16, 0, {DType::kF32, DType::kBF16}},
      {"bloom_causal_h16_d64_t16", "BLOOM-560m shape, BLOOM form m*j, causal", 16, 16, 64,
       AlibiForm::kBloom, true, 16, 16, 0, {DType::kF32}},
      {"mpt_causal_h12_d64_t16", "12 heads, MPT form m(j-(Tk-1)), causal", 12, 12, 64,
       AlibiForm::kMpt, true, 16, 16, 0, {DType::kF32}},
      {"paper_decode_h12_d64_q4_k40", "12 heads, paper form, 4 decode queries at 36..39", 12, 12,
       64, AlibiForm::kPaper, true, 4, 40, 36, {DType::kF32, DType::kBF16}},
      {"symmetric_h12_d64_t16", "12 heads, symmetric -m|i-j|, bidirectional", 12, 12, 64,
       AlibiForm::kSymmetric, false, 16, 16, 0, {DType::kF32}},
      {"paper_decode_h4_kv1_d16_q1_k4200",
       "4 heads (slopes 2^-2 .. 2^-8) sharing one kv head, paper form, one decode query at "
       "position 4199 over 4200 keys: distances up to 4199, beyond f16's exact integers (an f16 "
       "KQ mask stores them with spacing 2 above 2048 and 4 above 4096)",
       4, 1, 16, AlibiForm::kPaper, true, 1, 4200, 4199, {DType::kF16}},
      {"paper_decode_h4_kv1_d16_q1_k4200_pad4000",
       "4 heads sharing one kv head, paper form, one decode query at position 4199 over 4200 "
       "keys of which 0..3999 are padding: BLOOM's equivalent form m j rounds at |m j| up to "
       "1050 in float32 (the fp32 budget's form term; the visible keys' probabilities stay "
       "normal float32 numbers)",
       4, 1, 16, AlibiForm::kPaper, true, 1, 4200, 4199, {DType::kF32}, 4000},
  };
  std::vector<AlibiAttentionCase> v;
  std::uint64_t seed = 0xa11b0000;
  for (const auto& s : shapes) {
    for (DType t : s.dtypes) {
      AlibiAttentionCase c;
      c.form = s.form;
      AttentionCaseDef& d = c.def;
      d.id = "alibi_" + s.name + "_" + std::string(dtype_short(t));
      d.scheme = "alibi";
      d.variant = reference::alibi_form_name(s.form);
      d.description = "ALiBi attention: " + s.description + ", value dim 16, target " + std::string(dtype_short(t));
      d.params = AttentionParams{s.heads, s.kv_heads, s.head_dim, 16,
                                 AttentionScale::kInvSqrtHeadDim, 1.0, s.causal, 0, s.offset};
      d.tq = s.tq;
      d.tk = s.tk;
      d.dtype = t;
      d.seed = seed++;
      d.value_range = 2.0;
      if (s.padded_below > 0) {
        d.key_padding.assign(static_cast<std::size_t>(s.tk), 0);
        std::fill(d.key_padding.begin(), d.key_padding.begin() + s.padded_below, std::uint8_t{1});
      }
      const AlibiParams ap{s.heads, s.form};
      const auto m50 = reference::alibi_slopes<mp50>(ap);
      const auto m100 = reference::alibi_slopes<mp100>(ap);
      const std::int64_t off = s.offset, tk = s.tk;
      const AlibiForm form = s.form;
      d.bias50 = [m50, off, tk, form](int h, std::int64_t i, std::int64_t j) {
        return reference::alibi_bias<mp50>(form, m50[h], off, i, j, tk);
      };
      d.bias100 = [m100, off, tk, form](int h, std::int64_t i, std::int64_t j) {
        return reference::alibi_bias<mp100>(form, m100[h], off, i, j, tk);
      };
      const bool narrow = t != DType::kF32;
      std::map<std::string, std::vector<double>> rho_h;  // per profile and head
      for (int h = 0; h < s.heads; ++h) {
        for (const auto& [prof, r] : slope_rel_errors(s.heads, h)) rho_h[prof].push_back(r);
      }
      rho_h["strict"].assign(static_cast<std::size_t>(s.heads), 0.0);
      d.bias_rel_error = [rho_h, narrow, off, tk, form](const std::string& prof, int h, std::int64_t i,
                                                        std::int64_t j) {
        double rho = rho_h.at(prof)[static_cast<std::size_t>(h)];
        if (prof == "fp32-recurrence" && narrow && !POSENC_MUTANT("gold_alibi_f16_mask_term_dropped")) {
          const double dist = reference::alibi_bias<double>(form, 1.0, off, i, j, tk);
          rho += f16_distance_rel_error(static_cast<std::int64_t>(std::llround(dist)));
        }
        return rho;
      };
      if (form != AlibiForm::kSymmetric) {
        std::vector<double> m64;
        for (int h = 0; h < s.heads; ++h) m64.push_back(static_cast<double>(m50[h]));
        d.bias_abs_error = [m64, off, tk](const std::string& prof, int h, std::int64_t i, std::int64_t j) {
          if (prof != "fp32" || POSENC_MUTANT("gold_alibi_bloom_form_term_dropped")) return 0.0;
          return form_rounding_error(m64[static_cast<std::size_t>(h)], off + i, j, tk);
        };
      }
      Json slopes = Json::array();
      for (int h = 0; h < s.heads; ++h) {
        slopes.push_back({{"head", h}, {"f32_hex", hex_bits_f32(round_to_f32(m50[h]))},
                          {"decimal", m50[h].str(25, std::ios_base::scientific)}});
      }
      d.extra = {{"citation", kCitation},
                 {"alibi_case", "attention"},
                 {"alibi", {{"form", reference::alibi_form_name(s.form)},
                            {"n_heads", s.heads},
                            {"bias", s.form == AlibiForm::kPaper ? "-m_h (query_position - j)"
                                     : s.form == AlibiForm::kBloom ? "m_h j"
                                     : s.form == AlibiForm::kMpt ? "m_h (j - (Tk - 1))"
                                                                 : "-m_h |query_position - j|"},
                            {"scaled", "the bias is added after the 1/sqrt(d) scaling, unscaled"},
                            {"slopes", slopes}}},
                 {"flags", {"AlibiSlopes", "AlibiBiasForm", "KvCacheOffset"}}};
      if (narrow) {
        d.extra["distance_rounding"] =
            "an f16 KQ mask (llama.cpp with a 16-bit cache) stores the distance in f16: above "
            "2048 it is rounded to a spacing of 2, above 4096 of 4. Accepted by the "
            "fp32-recurrence and " + std::string(dtype_short(t)) + " profiles (their budgets hold "
            "one 16-bit rounding of the bias); rejected by strict and fp32, which compute the "
            "bias in float32 from exact distances";
      }
      v.push_back(std::move(c));
    }
  }
  return v;
}

// ---- registry hooks ------------------------------------------------------------------------------

std::vector<CaseRow> alibi_cases() {
  std::vector<CaseRow> rows;
  for (const auto& c : slope_cases()) rows.push_back({c.id, c.description});
  for (const auto& c : attention_cases()) rows.push_back({c.def.id, c.def.description});
  return rows;
}

GoldenCase alibi_generate(const std::string& id) {
  for (const auto& c : slope_cases()) {
    if (c.id == id) return slope_generate(c);
  }
  for (const auto& c : attention_cases()) {
    if (c.def.id == id) return attention_case_generate(c.def);
  }
  throw_invalid("alibi_generate", "no alibi case has this id", id);
}

std::vector<std::string> alibi_mistakes() {
  return {"naive-slopes",           "sorted-slopes", "slopes-reversed",
          "slope-index-off-by-one", "sign-flipped",  "no-bias-in-decode"};
}

/// The mistakes of the slope rule, which a float pipeline can also make (its own float32
/// powers of the wrong rule).
bool is_slope_mistake(const std::string& m) {
  return m == "naive-slopes" || m == "sorted-slopes" || m == "slopes-reversed" ||
         m == "slope-index-off-by-one";
}

/// A slope table reordered as a mistake says (sorted-slopes: descending, slopes-reversed), or
/// with the closed form's power index starting at 0 instead of 1 (slope-index-off-by-one:
/// BLOOM's arange(1, c + 1) and arange(1, 1 + 2 r, 2) started at 0, c the largest power of two
/// <= n: head k of the first c gets 2^(-8 (k - 1) / c), so head 1 slope 1, every slope times
/// fl(2^(8/c)); the extra heads the even powers of 2^(-4/c), times fl(2^(4/c))).
void reorder_slopes(std::vector<float>& m, const std::string& mistake) {
  if (kMistakes.is(mistake, MistakeId::kSortedSlopes)) std::stable_sort(m.begin(), m.end(), [](float a, float b) { return a > b; });
  if (kMistakes.is(mistake, MistakeId::kSlopesReversed)) std::reverse(m.begin(), m.end());
  if (kMistakes.is(mistake, MistakeId::kSlopeIndexOffByOne)) {
    int c = 1;
    while (2 * c <= static_cast<int>(m.size())) c *= 2;
    const float step = static_cast<float>(std::exp2(8.0L / c)),
                extra = static_cast<float>(std::exp2(4.0L / c));
    for (std::size_t h = 0; h < m.size(); ++h) m[h] *= static_cast<int>(h) < c ? step : extra;
  }
}

AlibiForm form_from(const std::string& s) {
  if (s == "bloom") return AlibiForm::kBloom;
  if (s == "mpt") return AlibiForm::kMpt;
  if (s == "symmetric") return AlibiForm::kSymmetric;
  return AlibiForm::kPaper;
}

/// The engine's slopes for n heads, with a deliberate mistake if asked.
std::vector<float> engine_slopes(int n, const std::string& mistake) {
  std::vector<float> m = optimized::alibi_slopes(AlibiParams{n, AlibiForm::kPaper});
  if (kMistakes.is(mistake, MistakeId::kNaiveSlopes)) {
    for (int k = 1; k <= n; ++k) m[k - 1] = static_cast<float>(std::exp2(-8.0L * k / n));
  }
  reorder_slopes(m, mistake);
  return m;
}

/// ALiBi bias with engine slopes and mistakes.
class EngineBias : public optimized::AttentionBias {
 public:
  EngineBias(std::vector<float> slopes, AlibiForm form, std::int64_t offset, std::int64_t tk, bool flip)
      : slopes_(std::move(slopes)), form_(form), offset_(offset), tk_(tk), flip_(flip) {}
  void fill(int head, std::int64_t q0, int nq, std::int64_t k0, int nk, float* tile) const override {
    const float m = slopes_[static_cast<std::size_t>(head)] * (flip_ ? -1.0f : 1.0f);
    for (int r = 0; r < nq; ++r) {
      const std::int64_t qpos = offset_ + q0 + r;
      for (int c = 0; c < nk; ++c) {
        const std::int64_t j = k0 + c;
        float b = 0;
        switch (form_) {
          case AlibiForm::kPaper: b = m * static_cast<float>(j - qpos); break;
          case AlibiForm::kBloom: b = m * static_cast<float>(j); break;
          case AlibiForm::kMpt: b = m * static_cast<float>(j - (tk_ - 1)); break;
          case AlibiForm::kSymmetric: b = -m * static_cast<float>(std::llabs(qpos - j)); break;
        }
        tile[static_cast<std::size_t>(r) * nk + c] = b;
      }
    }
  }

 private:
  std::vector<float> slopes_;
  AlibiForm form_;
  std::int64_t offset_, tk_;
  bool flip_;
};

/// A pipeline's float32 slopes: BLOOM's for fp32 and the eager pipelines, ggml's for
/// fp32-recurrence; with a slope mistake, that pipeline's code following the wrong rule
/// (naive-slopes: the power-of-two rule with c = n).
std::vector<float> pipeline_slopes(const std::string& pipeline, int n, const std::string& mistake = "") {
  if (POSENC_MUTANT("engine_alibi_pipeline_exact_slopes")) return optimized::alibi_slopes(AlibiParams{n, AlibiForm::kPaper});
  const int c = kMistakes.is(mistake, MistakeId::kNaiveSlopes) ? n : 0;
  std::vector<float> m = pipelines::of(pipeline) == Pipeline::kFp32Recurrence ? pipelines::ggml_slopes(n, c) : pipelines::bloom_slopes(n, c);
  reorder_slopes(m, mistake);
  return m;
}

TensorMap alibi_run_engine(const CaseSpec& spec, const TensorMap& golden, const EngineOptions& o) {
  const auto mk = alibi_mistakes();
  if (!o.mistake.empty() && std::find(mk.begin(), mk.end(), o.mistake) == mk.end()) {
    throw_invalid("alibi_run_engine",
                  "unknown mistake (known: naive-slopes, sorted-slopes, slopes-reversed, "
                  "slope-index-off-by-one, sign-flipped, "
                  "no-bias-in-decode)",
                  o.mistake);
  }
  if (pipelines::of(o.pipeline) != Pipeline::kExact && !o.mistake.empty() && !is_slope_mistake(o.mistake)) {
    throw_invalid("alibi_run_engine",
                  "this mistake runs on the exact pipeline only (a float pipeline runs the slope "
                  "mistakes: naive-slopes, sorted-slopes, slopes-reversed, slope-index-off-by-one)",
                  o.mistake);
  }
  const std::string kind = spec.manifest.value("alibi_case", std::string());
  if (kind == "slopes" && pipelines::of(o.pipeline) != Pipeline::kExact) {
    const Tensor& tn = golden.at("n_heads");
    std::vector<float> out;
    for (std::int64_t i = 0; i < tn.numel();) {
      const int n = static_cast<int>(tn.get_i64(i));
      const auto m = pipeline_slopes(o.pipeline, n, o.mistake);
      out.insert(out.end(), m.begin(), m.end());
      i += n;
    }
    TensorMap r;
    r.emplace("slopes", tensor_from_f32("slopes", {tn.numel()}, out));
    return r;
  }
  if (kind == "slopes") {
    const Tensor& tn = golden.at("n_heads");
    std::vector<float> out;
    std::int64_t i = 0;
    while (i < tn.numel()) {
      const int n = static_cast<int>(tn.get_i64(i));
      const auto m = o.mistake.empty() ? optimized::alibi_slopes(AlibiParams{n, AlibiForm::kPaper})
                                       : engine_slopes(n, o.mistake);
      out.insert(out.end(), m.begin(), m.end());
      i += n;
    }
    TensorMap r;
    r.emplace("slopes", tensor_from_f32("slopes", {tn.numel()}, out));
    return r;
  }
  AttentionParams p = attention_params_from_manifest(spec.manifest);
  const Json& aj = spec.manifest.at("alibi");
  const AlibiForm form = form_from(aj.at("form").get<std::string>());
  const std::int64_t tk = spec.manifest.at("params").at("tk").get<std::int64_t>();
  if (pipelines::of(o.pipeline) != Pipeline::kExact) {
    // fp32 (HF BLOOM): bias = fl32(m * j), the key index, whatever the case's form (paper and
    // MPT differ from it by a constant per query row, the same softmax); the symmetric form
    // has no such equivalent. ggml: fl32(m * d) with the distance as the KQ mask holds it (f16
    // when the case's tensors are 16-bit). Eager bf16 / f16: the case's form.
    const auto m = pipeline_slopes(o.pipeline, p.n_heads, o.mistake);
    const bool f16_mask = pipelines::of(o.pipeline) == Pipeline::kFp32Recurrence && golden.at("q").dtype != DType::kF32;
    const AlibiForm pform = pipelines::of(o.pipeline) == Pipeline::kFp32 && form != AlibiForm::kSymmetric &&
                                    !POSENC_MUTANT("engine_alibi_fp32_case_form")
                                ? AlibiForm::kBloom
                                : form;
    const std::int64_t off = p.query_offset;
    const PipelineBias bias = [m, f16_mask, off, tk, pform](int h, std::int64_t i, std::int64_t j) {
      float dist = static_cast<float>(reference::alibi_bias<double>(pform, 1.0, off, i, j, tk));
      if (f16_mask) dist = pipelines::fl(dist, DType::kF16);
      return m[static_cast<std::size_t>(h)] * dist;
    };
    return attention_case_run_pipeline(spec, golden, o.pipeline, bias, p);
  }
  if (o.mistake.empty()) {  // the product path: optimized::AlibiBias
    const optimized::AlibiBias bias(AlibiParams{p.n_heads, form}, p, tk);
    return attention_case_run_engine(spec, golden, &bias, p);
  }
  // no-bias-in-decode: a decode step (query_offset > 0) runs without ALiBi (keras-hub #2861).
  // A position offset alone would be invisible: the paper form shifts each row by a constant.
  if (kMistakes.is(o.mistake, MistakeId::kNoBiasInDecode) && p.query_offset > 0) {
    return attention_case_run_engine(spec, golden, nullptr, p);
  }
  const EngineBias bias(engine_slopes(p.n_heads, o.mistake), form, p.query_offset, tk,
                        kMistakes.is(o.mistake, MistakeId::kSignFlipped));
  return attention_case_run_engine(spec, golden, &bias, p);
}

}  // namespace

SchemeEntry alibi_scheme() {
  SchemeEntry e{"alibi", "attention with linear biases (slopes incl. non-power-of-2 heads)",
                &alibi_cases, &alibi_generate, &alibi_run_engine, &alibi_mistakes};
  e.order = 70;  // its place in `posenc list` and the catalog
  return e;
}

}  // namespace posenc::golden
