// RoPE golden cases, plain and scaled: the generator. Formulas: reference/rope.hpp,
// reference/rope_scaling.hpp. Expected values: the mp50 oracle, rounded once to the target
// dtype; mp100 must round the same. The manifest's parts: rope_manifest.cpp.
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

// ---- the generator ---------------------------------------------------------------------------

namespace rope_kit {

FastTables fast_tables(const std::string& id, const RopeOracle<mp50>& o50, const RopeOracle<mp100>& o100,
                       const std::vector<std::int64_t>& pos, DType t) {
  const FastRopeTables f(o50.inv_freq, o50.a);
  const int np = f.pairs();
  const auto n = static_cast<std::int64_t>(pos.size()) * np;
  FastTables r;
  for (auto* v : {&r.cos_t, &r.cos_x, &r.sin_t, &r.sin_x}) v->resize(static_cast<std::size_t>(n));
#pragma omp parallel for schedule(static)
  for (std::int64_t j = 0; j < n; ++j) {
    FastRopeTables::Value c, s;
    f.eval(pos[static_cast<std::size_t>(j / np)], static_cast<int>(j % np), t, &c, &s);
    r.cos_t[j] = c.target;
    r.cos_x[j] = c.exact;
    r.sin_t[j] = s.target;
    r.sin_x[j] = s.exact;
  }
  for (std::int64_t j = 0; j < n; ++j) {
    if (j % 997 != 0 && j != n - 1) continue;
    const mp100 phi = mp100(pos[static_cast<std::size_t>(j / np)]) * o100.inv_freq[static_cast<std::size_t>(j % np)];
    const mp100 yc = o100.a * cos(phi), ys = o100.a * sin(phi);
    for (auto [name, y, tv, xv] : {std::tuple{"cos", yc, r.cos_t[j], r.cos_x[j]}, std::tuple{"sin", ys, r.sin_t[j], r.sin_x[j]}}) {
      const double y64 = round_to_f64(y);
      if (round_to_dtype(y, t) != tv || (y64 != xv && std::nextafter(xv, y64) != y64)) {
        throw std::runtime_error("generate: " + id + ": the fast oracle and mp100 round " + name + "[" +
                                 std::to_string(j) + "] differently (" + y.str(60) + ")");
      }
    }
  }
  return r;
}

/// The condition scales of q_rot or k_rot.

ExpectedTensor RopeCaseGen::inv_freq_tensor() {
  ExpectedTensor e_inv = expected_tensor("inv_freq", "table", DType::kF32, {np}, CheckKind::kUlp);
  e_inv.values = o50.inv_freq;
  for (const auto& al : alts) add_alternative(e_inv, al, al.o.inv_freq, {});
  e_inv.spec.axes = {{"pair", "", identity_pairs, {}}};
  for (const auto& prof : profiles()) {
    const ProfileBudget b = sb[prof.name].inv_freq;
    // The f32 inv_freq of a bf16 / f16 pipeline is the fp32 one; in an f32 case the eager
    // profiles stay not applicable, as for every other stage.
    e_inv.spec.check.profiles[prof.name] = b;
    if (prof.name == "strict" || !b.applies) continue;
    e_inv.extra[prof.name] = pe[prof.name].inv_freq;
  }
  return e_inv;
}

void RopeCaseGen::build_inputs() {
  reference::rope_scaling_check(p, es, "rope_case_generate");
  q.assign(static_cast<std::size_t>(tn * hq * h), 0.0);
  k.assign(static_cast<std::size_t>(tn * hk * h), 0.0);
  for (std::size_t i = 0; i < q.size(); ++i) q[i] = input_value(t, def.seed, 1, i);
  for (std::size_t i = 0; i < k.size(); ++i) k[i] = input_value(t, def.seed, 2, i);
  auto given = [&](const std::vector<double>& v, std::vector<double>* x, const char* name) {
    if (v.empty()) return;
    if (v.size() != x->size()) {
      throw_invalid("rope_case_generate", std::string(name) + " must have tokens * heads * head_dim = " +
                                              std::to_string(x->size()) + " entries", v.size());
    }
    *x = v;
  };
  given(def.q_values, &q, "q_values");
  given(def.k_values, &k, "k_values");
}

void RopeCaseGen::run_oracle() {
  // The scores ([Hq, T, T]) are never held: computed element by element below and streamed to
  // disk (StreamedExpected), each cross-checked as it comes.
  o50 = rope_oracle<mp50>(p, es, oracle_pos, hq, hk, q, k, false);
  o100 = rope_oracle<mp100>(p, es, oracle_pos, hq, hk, q, k, false);
  cross_check(def.id, "inv_freq", DType::kF32, o50.inv_freq, o100.inv_freq);
  cross_check(def.id, "cos", t, o50.cos, o100.cos);
  cross_check(def.id, "sin", t, o50.sin, o100.sin);
  cross_check(def.id, "q_rot", t, o50.q_rot, o100.q_rot);
  cross_check(def.id, "k_rot", t, o50.k_rot, o100.k_rot);
  o100.cos = o100.sin = {};
  softmax50 = pow(mp50(def.model.softmax_head_dim), mp50(-0.5)) * o50.softmax_multiplier;
  cross_check(def.id, "attention_factor", DType::kF32, {o50.a}, {o100.a});
  cross_check(def.id, "softmax_scale", DType::kF32, {softmax50},
              {pow(mp100(def.model.softmax_head_dim), mp100(-0.5)) * o100.softmax_multiplier});

  a = round_to_f64(o50.a);
  inv64 = to_f64(o50.inv_freq);
  phi_signed = signed_angles(o50.inv_freq);
  if (def.tables_only) {
    ft = fast_tables(def.id, o50, o100, pos, t);
    phi = phi_signed;  // every angle is >= 0
    return;
  }
  phi.assign(static_cast<std::size_t>(tn * np), 0.0);
  for (std::int64_t tt = 0; tt < tn; ++tt) {
    for (int i = 0; i < np; ++i) phi[tt * np + i] = static_cast<double>(abs(mp50(pos[tt]) * o50.inv_freq[i]));
  }
}

void RopeCaseGen::run_alternatives() {
  // Declared alternative conventions: their oracle values (cross-checked as the default's), and
  // below their pipeline errors, merged into the budgets so that a float engine following one
  // passes too.
  for (const auto& al : def.alternatives) {
    RopeScaling r = al.rule;
    r.seq_len = es.seq_len;
    reference::rope_scaling_check(p, r, "rope_case_generate");
    AltOracle x{&al, r, rope_oracle<mp50>(p, r, oracle_pos, hq, hk, q, k, false), 0, 0, {}, {}};
    auto y = rope_oracle<mp100>(p, r, oracle_pos, hq, hk, q, k, false);
    const std::string aid = def.id + " (alternative " + al.name + ")";
    if (def.tables_only) {
      FastTables at = fast_tables(aid, x.o, y, pos, t);
      x.cos64 = std::move(at.cos_x);
      x.sin64 = std::move(at.sin_x);
    }
    cross_check(aid, "inv_freq", DType::kF32, x.o.inv_freq, y.inv_freq);
    cross_check(aid, "cos", t, x.o.cos, y.cos);
    cross_check(aid, "sin", t, x.o.sin, y.sin);
    cross_check(aid, "q_rot", t, x.o.q_rot, y.q_rot);
    cross_check(aid, "k_rot", t, x.o.k_rot, y.k_rot);
    x.softmax = pow(mp50(def.model.softmax_head_dim), mp50(-0.5)) * x.o.softmax_multiplier;
    x.a = round_to_f64(x.o.a);
    alts.push_back(std::move(x));
    y.cos = y.sin = {};
    alts100.push_back(std::move(y));
  }
}

void RopeCaseGen::pipeline_budgets() {
  for (const auto& prof : profiles()) {
    if (prof.name == "strict") {
      sb[prof.name] = rope_stage_budgets(prof.name, t, 0.0, h);
      continue;
    }
    PipelineErrors e = is_scaled ? scaled_errors(prof.name, p, es, pos, phi_signed, inv64, a,
                                                 round_to_f64(softmax50), def.model.softmax_head_dim)
                                 : plain_errors(prof.name, p, pos, phi, inv64);
    if (softmax_stage && !es.mla) {
      // A control whose softmax scale lacks the MLA multiplier: the pipelines computing it
      // round the double 1/sqrt(q head) once to float32.
      const double v = round_to_f64(softmax50);
      e.softmax_abs = distance(pipelines::hf_softmax_scale<F32Interval>(v), v) * kSecondOrder * inflation();
    }
    for (const auto& al : alts) {  // the larger error of either convention, element by element
      const PipelineErrors x = scaled_errors(prof.name, p, al.rule, pos, signed_angles(al.o.inv_freq),
                                             to_f64(al.o.inv_freq), al.a, round_to_f64(al.softmax),
                                             def.model.softmax_head_dim);
      for (std::size_t j = 0; j < e.angle.size(); ++j) e.angle[j] = std::max(e.angle[j], x.angle[j]);
      for (std::size_t j = 0; j < e.inv_freq.size(); ++j) e.inv_freq[j] = std::max(e.inv_freq[j], x.inv_freq[j]);
      e.a_rel = std::max(e.a_rel, x.a_rel);
      e.softmax_abs = std::max(e.softmax_abs, x.softmax_abs);
      e.A = std::max(e.A, x.A);
    }
    sb[prof.name] = rope_stage_budgets(prof.name, t, e.A, h);
    if (sb[prof.name].table.applies) angle_profiles.push_back(prof.name);
    pe[prof.name] = std::move(e);
  }
}

void RopeCaseGen::condition_scales() {
  identity_pairs.resize(static_cast<std::size_t>(np));
  for (int i = 0; i < np; ++i) identity_pairs[i] = i;
  channel_pairs.resize(static_cast<std::size_t>(h));
  for (int c = 0; c < h; ++c) channel_pairs[c] = reference::rope_pair_of_channel(p, c);
  qs = pair_scales(q, hq, a);
  ks = pair_scales(k, hk, a);
  for (const auto& al : alts) {
    alt_qs.push_back(pair_scales(q, hq, al.a));
    alt_ks.push_back(pair_scales(k, hk, al.a));
  }
}

void RopeCaseGen::stream_scores() {
  // scores: streamed (rope_scores below), then the mp100 rotations are no longer needed
  if (with_scores) {
    const int group = hq / hk;
    ExpectedTensor es0 = expected_tensor("scores", "scores", t, {hq, tn, tn}, CheckKind::kConditioned);
    es0.spec.axes = {{"head", "", {}, {}}, {"query", "positions", {}, {}}, {"key", "positions", {}, {}}};
    for (const auto& prof : profiles()) es0.spec.check.profiles[prof.name] = sb[prof.name].scores;
    std::vector<std::pair<std::string, std::string>> alt_names;
    for (const auto& al : alts) alt_names.emplace_back(al.def->name, al.def->description);
    StreamedExpected e(std::move(es0.spec), angle_profiles, alt_names);
    const std::size_t na = angle_profiles.size(), nalt = alts.size();
    std::vector<double> x(na), alt_exact(nalt), alt_cond(nalt);
    // q_rot . k_rot of one (head, query, key) in precision Real, from rotations q and k
    auto dot = [&](const auto& qr, const auto& kr, int hh, std::int64_t i, std::int64_t j) {
      typename std::decay_t<decltype(qr)>::value_type sum = 0;
      for (int c = 0; c < h; ++c) sum += qr[(i * hq + hh) * h + c] * kr[(j * hk + hh / group) * h + c];
      return sum;
    };
    // fp32-recurrence on a 16-bit target: the KV-cache rounding's subnormal floor eta_t / 2 per
    // rotated component (a pair's |x_a| + |x_b| <= sqrt(2) a |x_pair| <= sqrt(2) pair_sum, for
    // the largest attention factor of the conventions)
    const auto rec_at = std::find(angle_profiles.begin(), angle_profiles.end(), "fp32-recurrence");
    const std::size_t rec = static_cast<std::size_t>(rec_at - angle_profiles.begin());
    double a_ratio = 1;
    for (const auto& al : alts) a_ratio = std::max(a_ratio, al.a / a);
    const double floor_scale = std::sqrt(2.0) * a_ratio * bud::stored_rounding_abs_floor(t) * kSecondOrder * inflation();
    RopeScoresProgress progress(def.id, static_cast<std::int64_t>(hq) * tn);
    for (int hh = 0; hh < hq; ++hh) {
      for (std::int64_t i = 0; i < tn; ++i) {
        for (std::int64_t j = 0; j < tn; ++j) {
          const std::size_t flat = static_cast<std::size_t>((hh * tn + i) * tn + j);
          const mp50 v = dot(o50.q_rot, o50.k_rot, hh, i, j);
          cross_check_one(def.id, "scores", t, flat, v, dot(o100.q_rot, o100.k_rot, hh, i, j));
          double c = 0, amp = 0;
          const std::int64_t qr = i * hq + hh, kr = j * hk + hh / group;
          std::fill(x.begin(), x.end(), 0.0);
          double l1 = 0;  // sum of the pairs' a (|q_a| + |q_b|) + a (|k_a| + |k_b|)
          for (int pi = 0; pi < np; ++pi) {
            const double w = qs.pair_sum[qr * np + pi] * ks.pair_sum[kr * np + pi];
            c += w;
            amp += qs.pair_norm[qr * np + pi] * ks.pair_norm[kr * np + pi];
            l1 += qs.pair_sum[qr * np + pi] + ks.pair_sum[kr * np + pi];
            for (std::size_t pr = 0; pr < na; ++pr) {
              const auto& angle = pe[angle_profiles[pr]].angle;
              x[pr] += w * (angle[i * np + pi] + angle[j * np + pi]);
            }
          }
          if (rec < na) x[rec] += floor_scale * l1;
          for (int ch = d; ch < h; ++ch) c += std::fabs(q[qr * h + ch] * k[kr * h + ch]);
          if (POSENC_MUTANT("gold_rope_scores_extra_dropped")) std::fill(x.begin(), x.end(), 0.0);
          for (std::size_t ai = 0; ai < nalt; ++ai) {
            const mp50 av = dot(alts[ai].o.q_rot, alts[ai].o.k_rot, hh, i, j);
            cross_check_one(def.id + " (alternative " + alts[ai].def->name + ")", "scores", t, flat, av,
                            dot(alts100[ai].q_rot, alts100[ai].k_rot, hh, i, j));
            alt_exact[ai] = round_to_f64(av);
            double ac = 0;
            for (int pi = 0; pi < np; ++pi) ac += alt_qs[ai].pair_sum[qr * np + pi] * alt_ks[ai].pair_sum[kr * np + pi];
            for (int ch = d; ch < h; ++ch) ac += std::fabs(q[qr * h + ch] * k[kr * h + ch]);
            alt_cond[ai] = ac;
          }
          e.add(v, c, amp, std::max(pos[i], pos[j]), x.data(), alt_exact.data(), alt_cond.data());
        }
        progress.row_done();
      }
    }
    scores_spec = e.finish(&g.spilled);
  }
  o100 = {};
  alts100.clear();
}

void RopeCaseGen::build_tensors() {
  tensors.push_back(tensor_from_i64("positions", {tn}, pos));
  tensors.push_back(input_tensor("q", t, {tn, hq, h}, q));
  if (hk > 0) tensors.push_back(input_tensor("k", t, {tn, hk, h}, k));
  for (const auto& tensor : tensors) inputs.push_back(input_spec(tensor));

  expected.push_back(add_expected(&tensors, inv_freq_tensor()));
  if (is_scaled) {
    ExpectedTensor ea = scalar_tensor("attention_factor", o50.a, false);
    for (const auto& al : alts) add_alternative(ea, al, {al.o.a}, {});
    expected.push_back(add_expected(&tensors, std::move(ea)));
    if (softmax_stage) {
      ExpectedTensor esm = scalar_tensor("softmax_scale", softmax50, true);
      for (const auto& al : alts) add_alternative(esm, al, {al.softmax}, {});
      expected.push_back(add_expected(&tensors, std::move(esm)));
    }
  }
  std::vector<std::pair<const AltOracle*, const std::vector<mp50>*>> alt_cos, alt_sin;
  for (const auto& al : alts) {
    alt_cos.emplace_back(&al, &al.o.cos);
    alt_sin.emplace_back(&al, &al.o.sin);
  }
  if (def.tables_only) {
    expected.push_back(add_expected(&tensors, fast_table_tensor("cos", ft.cos_t, ft.cos_x, false)));
    expected.push_back(add_expected(&tensors, fast_table_tensor("sin", ft.sin_t, ft.sin_x, true)));
    ft = {};
    return;
  }
  expected.push_back(add_expected(&tensors, table_tensor("cos", o50.cos, alt_cos)));
  expected.push_back(add_expected(&tensors, table_tensor("sin", o50.sin, alt_sin)));
  expected.push_back(add_expected(&tensors, rotated_tensor("q_rot", o50.q_rot, qs, hq, true)));
  if (hk > 0) expected.push_back(add_expected(&tensors, rotated_tensor("k_rot", o50.k_rot, ks, hk, false)));

  if (with_scores) expected.push_back(std::move(scores_spec));
}


}  // namespace rope_kit

GoldenCase rope_case_generate(const RopeCaseDef& def) {
  if (def.sweep_lazy) {  // the chunk's positions, as level2_chunks would have listed them
    RopeCaseDef d = def;
    d.sweep_lazy = false;
    d.sweep_list = nullptr;
    std::vector<HardPosition> hp;
    hp.reserve(def.sweep_end - def.sweep_begin + def.positions.size());
    for (std::size_t j = def.sweep_begin; j < def.sweep_end; ++j) {
      hp.push_back({def.sweep_list ? (*def.sweep_list)[j] : static_cast<std::int64_t>(j), kSweepWhy});
    }
    hp.insert(hp.end(), def.positions.begin(), def.positions.end());
    d.positions = std::move(hp);
    return rope_case_generate(d);
  }
  RopeCaseGen c{def};
  c.build_inputs();
  c.run_oracle();
  c.run_alternatives();
  c.pipeline_budgets();
  c.condition_scales();
  c.stream_scores();
  c.build_tensors();
  c.manifest_describe();
  c.manifest_scaling();
  c.manifest_tables();
  c.manifest_detection();
  c.manifest_resolution();
  manifest_add_tensors(c.m, def.id, c.inputs, c.expected);
  c.g.manifest = std::move(c.m);
  c.g.tensors = std::move(c.tensors);
  return std::move(c.g);
}

}  // namespace posenc::golden
