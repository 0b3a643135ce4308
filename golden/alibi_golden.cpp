// Golden cases for ALiBi. Formula: see reference/alibi.hpp.
//   slope tables: every head count 1..256 (level 3) and the real models' head counts (BLOOM-176B
//     112, BLOOM-560m 16, MPT-7B 32; 12, 20, 40, 96), f32, ulp check;
//   negative controls (result "invalid"): the naive 2^(-8k/n) rule and a sorted (monotone) order
//     for 12 heads; verify passes an engine only if it does NOT reproduce them;
//   attention: BLOOM-560m-shaped (16 heads) and 12-head causal attention with the paper, BLOOM
//     and MPT forms (equal probabilities), a decode step, and the symmetric bidirectional form.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "golden/attention_case.hpp"
#include "golden/oracle_tensors.hpp"
#include "golden/registry.hpp"
#include "optimized/alibi.hpp"
#include "reference/alibi.hpp"
#include "reference/common/errors.hpp"
#include "reference/common/rounding.hpp"
#include "reference/common/scalar.hpp"

namespace posenc::golden {
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

GoldenCase slope_generate(const SlopeCase& c) {
  std::vector<std::int64_t> entry_n, entry_h;
  std::vector<mp50> s50;
  std::vector<mp100> s100;
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
  std::vector<double> ex;
  for (const auto& x : s50) {
    f.push_back(round_to_f32(x));
    ex.push_back(round_to_f64(x));
  }
  std::vector<Tensor> tensors = {tensor_from_i64("n_heads", {ne}, entry_n),
                                 tensor_from_i64("head", {ne}, entry_h),
                                 tensor_from_f32("slopes", {ne}, f),
                                 tensor_from_f64("slopes.exact", {ne}, ex)};
  TensorSpec in_n{"n_heads", "input", DType::kI64, {ne}, sha256_hex(tensors[0].data), {}, {}, "", "", ""};
  TensorSpec in_h{"head", "input", DType::kI64, {ne}, sha256_hex(tensors[1].data), {}, {}, "", "", ""};
  TensorSpec sl;
  sl.name = "slopes";
  sl.stage = "table";
  sl.dtype = DType::kF32;
  sl.shape = {ne};
  sl.sha256 = sha256_hex(tensors[2].data);
  sl.check.kind = "ulp";
  sl.check.bounds = {{"strict", 2.0}};
  sl.exact = "slopes.exact";
  sl.axes = {{"entry", "", {}, {"n_heads", "head"}}};
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
  Json sj = Json::array();
  if (c.head_counts.size() == 1) {
    for (std::size_t h = 0; h < s50.size(); ++h) {
      sj.push_back({{"head", h}, {"f32_hex", hex_bits_f32(f[h])},
                    {"decimal", s50[h].str(25, std::ios_base::scientific)}});
    }
    m["tables"] = {{"slopes", sj}};
  }
  m["flags"] = {"AlibiSlopes", "NonPowerOfTwoHeads"};
  m["tensors_file"] = c.id + ".safetensors";
  m["inputs"] = {tensor_spec_to_json(in_n, false), tensor_spec_to_json(in_h, false)};
  m["expected"] = {tensor_spec_to_json(sl, true)};
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
    int heads;
    AlibiForm form;
    bool causal;
    std::int64_t tq, tk, offset;
    std::vector<DType> dtypes;
  };
  const std::vector<Shape> shapes = {
      {"paper_causal_h16_d64_t16", "BLOOM-560m shape, paper form -m(i-j), causal", 16,
       AlibiForm::kPaper, true, 16, 16, 0, {DType::kF32, DType::kBF16}},
      {"bloom_causal_h16_d64_t16", "BLOOM-560m shape, BLOOM form m*j, causal", 16, AlibiForm::kBloom,
       true, 16, 16, 0, {DType::kF32}},
      {"mpt_causal_h12_d64_t16", "12 heads, MPT form m(j-(Tk-1)), causal", 12, AlibiForm::kMpt, true,
       16, 16, 0, {DType::kF32}},
      {"paper_decode_h12_d64_q4_k40", "12 heads, paper form, 4 decode queries at 36..39", 12,
       AlibiForm::kPaper, true, 4, 40, 36, {DType::kF32, DType::kBF16}},
      {"symmetric_h12_d64_t16", "12 heads, symmetric -m|i-j|, bidirectional", 12,
       AlibiForm::kSymmetric, false, 16, 16, 0, {DType::kF32}},
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
      d.params = AttentionParams{s.heads, s.heads, 64, 16, AttentionScale::kInvSqrtHeadDim, 1.0,
                                 s.causal, 0, s.offset};
      d.tq = s.tq;
      d.tk = s.tk;
      d.dtype = t;
      d.seed = seed++;
      d.value_range = 2.0;
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
  return {"naive-slopes", "slopes-reversed", "sign-flipped", "no-bias-in-decode"};
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
  if (mistake == "naive-slopes") {
    for (int k = 1; k <= n; ++k) m[k - 1] = static_cast<float>(std::exp2(-8.0L * k / n));
  }
  if (mistake == "slopes-reversed") std::reverse(m.begin(), m.end());
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

TensorMap alibi_run_engine(const CaseSpec& spec, const TensorMap& golden, const EngineOptions& o) {
  const auto mk = alibi_mistakes();
  if (!o.mistake.empty() && std::find(mk.begin(), mk.end(), o.mistake) == mk.end()) {
    throw_invalid("alibi_run_engine",
                  "unknown mistake (known: naive-slopes, slopes-reversed, sign-flipped, no-bias-in-decode)",
                  o.mistake);
  }
  const std::string kind = spec.manifest.value("alibi_case", std::string());
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
  if (o.mistake.empty()) {  // the product path: optimized::AlibiBias
    const optimized::AlibiBias bias(AlibiParams{p.n_heads, form}, p, tk);
    return attention_case_run_engine(spec, golden, &bias, p);
  }
  // no-bias-in-decode: a decode step (query_offset > 0) runs without ALiBi (keras-hub #2861).
  // A position offset alone would be invisible: the paper form shifts each row by a constant.
  if (o.mistake == "no-bias-in-decode" && p.query_offset > 0) {
    return attention_case_run_engine(spec, golden, nullptr, p);
  }
  const EngineBias bias(engine_slopes(p.n_heads, o.mistake), form, p.query_offset, tk,
                        o.mistake == "sign-flipped");
  return attention_case_run_engine(spec, golden, &bias, p);
}

}  // namespace

SchemeEntry alibi_scheme() {
  return SchemeEntry{"alibi", "attention with linear biases (slopes incl. non-power-of-2 heads)",
                     &alibi_cases, &alibi_generate, &alibi_run_engine, &alibi_mistakes};
}

}  // namespace posenc::golden
