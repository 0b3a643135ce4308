// The RoPE generator's manifest: description, scaling rule, tables, mistake detection and
// resolution (golden/cases/rope_kit.hpp, RopeCaseGen::manifest_*).
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

namespace rope_kit {

void RopeCaseGen::manifest_describe() {
  // ---- the manifest ----
  const std::string layout = reference::rope_layout_name(p.layout);
  m = manifest_header(def.id, def.scheme, is_scaled ? reference::rope_scaling_type_name(es.type) : layout,
                           def.result, is_scaled ? 2 : 1);
  std::string desc = (is_scaled ? "RoPE scaling " + std::string(reference::rope_scaling_type_name(def.model.scaling.type)) + ", "
                                : "RoPE, ") +
                     def.model.id + " (" + layout + ", head_dim " + std::to_string(h) + ", rotary_dim " +
                     std::to_string(d) + ", base " + rope_base_tag(p.base) + "), target " + dtype_text(t);
  if (def.tables_only) {
    desc += ", level 2, tables only (inv_freq, cos, sin; q holds one head of inputs, no rotations, "
            "no scores), call \"" + def.call + "\": " + std::to_string(tn) + " positions up to " +
            std::to_string(pos.back()) + " (seq_len " + std::to_string(pos.back() + 1) + ")";
  } else if (def.dense) {
    desc += ", every position 0..511 and the hard positions above, one q head (no k, no scores)";
  } else if (!is_scaled && def.call.empty()) {
    desc += ", one token per hard position";
  } else {
    desc += ", call \"" + def.call + "\": " + std::to_string(tn) + " positions up to " +
            std::to_string(pos.back()) + " (seq_len " + std::to_string(pos.back() + 1) + ")";
  }
  if (!def.convention.empty()) desc += "; convention " + def.convention + " (" + def.result + ")";
  m["description"] = desc;
  m["citation"] = is_scaled ? "J. Su et al., RoFormer, arXiv:2104.09864v5; the scaling rule: see "
                              "reference/rope_scaling.hpp (PI arXiv:2306.15595, YaRN arXiv:2309.00071, "
                              "DeepSeek-V2 arXiv:2405.04434 App. B, Llama 3 apply_scaling, LongRoPE "
                              "arXiv:2402.13753)"
                            : "J. Su et al., RoFormer, arXiv:2104.09864v5, Sec. 3.2.2 and 3.4.2";
  m["preset"] = {{"name", def.model.id},
                 {"hf_model", def.model.hf_model},
                 {"source", def.model.source},
                 {"config", def.model.config}};
  if (!def.model.notes.empty()) m["preset"]["reader_notes"] = def.model.notes;
  m["conventions"] = {
      {"pairing", p.layout == RopeLayout::kInterleaved
                      ? "interleaved: pair i = channels (2i, 2i+1)"
                      : "half_split: pair i = channels (i, i + rotary_dim/2)"},
      {"rotation", "y_a = x_a cos - x_b sin, y_b = x_a sin + x_b cos (counter-clockwise)"},
      {"angle", "phi[t][i] = positions[t] * inv_freq[i], exact (no float32 rounding; the "
                "profiles budget for a pipeline's)"},
      {"inv_freq", is_scaled ? "the scaling rule's frequencies (\"scaling\" below) from base^(-2i/rotary_dim)"
                             : "inv_freq[i] = base^(-2i/rotary_dim), i < rotary_dim/2"},
      {"position_origin", "positions are absolute token indices; the first token is 0"},
      {"attention_factor", "multiplies both cos and sin tables (and so the rotated q, k)"},
      {"tail", "channels >= rotary_dim are copied unchanged (bit-identical)"},
      {"layout", "q, k, q_rot, k_rot are [tokens, heads, head_dim] (dense cases have q only); "
                 "cos, sin are [tokens, "
                 "rotary_dim/2] (HF's [tokens, rotary_dim] tables repeat each column twice); "
                 "scores are [q_heads, query token, key token]"},
      {"scores", "unscaled dot products q_rot . k_rot over all head_dim channels; kv head = "
                 "q head / (q_heads / kv_heads)"}};
  if (!def.model.layout_reason.empty() && is_scaled) m["conventions"]["pairing_source"] = def.model.layout_reason;
  Json params = {{"head_dim", h},
                 {"rotary_dim", d},
                 {"base", p.base},
                 {"layout", layout},
                 {"attention_factor", p.attention_factor},
                 {"n_tokens", tn},
                 {"n_q_heads", hq},
                 {"n_kv_heads", hk},
                 {"dtype", dtype_text(t)}};
  if (is_scaled) {
    // What an engine is told: the model's rule (for a negative control, not what the expected
    // values follow; for an accepted alternative, the alternative).
    params["scaling"] = rope_scaling_to_json(def.result == "invalid" ? def.model.scaling : es);
    if (softmax_stage) params["softmax_head_dim"] = def.model.softmax_head_dim;
  }
  m["params"] = params;
}

void RopeCaseGen::manifest_scaling() {
  if (is_scaled) {
    const auto st = reference::rope_scaling_tables<mp50>(p, es);
    Json derived = {{"attention_factor", round_to_f64(st.tables.attention_factor)},
                    {"softmax_scale_multiplier", round_to_f64(st.softmax_scale_multiplier)},
                    {"seq_len", es.seq_len}};
    // Two attention factors in the manifest: say which one the expected tables apply.
    const double a_rule = round_to_f64(st.tables.attention_factor);
    char a_text[96];
    std::snprintf(a_text, sizeof a_text, "%.9g", a_rule);
    std::string applied = std::string("scaling.derived.attention_factor (") + a_text +
                          ") multiplies both cos and sin tables (and so the rotated q, k); ";
    std::snprintf(a_text, sizeof a_text, "%.9g", p.attention_factor);
    applied += a_rule == p.attention_factor
                   ? std::string("it equals params.attention_factor")
                   : std::string("the scaling rule's factor replaces params.attention_factor (") +
                         a_text + "), which an engine does not apply as well";
    m["conventions"]["attention_factor"] = applied;
    if (es.type == RopeScalingType::kYarn) {
      derived["ramp_low"] = round_to_f64(st.ramp_low);
      derived["ramp_high"] = round_to_f64(st.ramp_high);
    }
    if (es.type == RopeScalingType::kYarn || es.type == RopeScalingType::kLlama3) {
      Json bands = {{"kept", Json::array()}, {"blended", Json::array()}, {"divided", Json::array()}};
      for (int i = 0; i < np; ++i) {
        bands[st.band[i] == 0 ? "kept" : (st.band[i] == 1 ? "blended" : "divided")].push_back(i);
      }
      derived["pairs"] = bands;
    }
    if (es.type == RopeScalingType::kLongRope) derived["factors"] = st.long_factors ? "long" : "short";
    if (es.type == RopeScalingType::kNtk || es.type == RopeScalingType::kDynamic) {
      // b' = b scale^(d/(d-2)), from theta_1 = b'^(-2/d)
      derived["base"] = round_to_f64(pow(st.tables.inv_freq[1], mp50(-d) / mp50(2)));
    }
    Json sc = {{"rule", rope_scaling_to_json(es)}, {"derived", derived}, {"call", def.call}};
    if (es.type == RopeScalingType::kDynamic) {
      sc["policy"] = "tables for this call's own seq_len (" + std::to_string(es.seq_len) +
                     "): run the call as the first of a fresh sequence. Later calls depend on the "
                     "engine's policy: HF 4.45+ keeps the tables of the largest seq_len seen until a "
                     "call is shorter than max_position_embeddings (grow and reset), v4.38 rebuilds "
                     "them per call (reference::DynamicPolicy)";
    }
    if (!def.convention.empty()) {
      sc["convention"] = def.convention;
      sc["reason"] = def.reason;
    }
    m["scaling"] = sc;
  }
}

void RopeCaseGen::manifest_tables() {
  m["oracle"] = mp_oracle_json();
  m["seed"] = def.seed;
  m["prng"] = "splitmix64 counter: value(seed, stream, i); stream 1 = q, 2 = k; q, k = "
              "integer * 2^-24 (f32), 2^-11 (f16) or 2^-8 (bf16), |integer| < 2^24, 2^11 or 2^8";
  Json why = Json::array();
  for (const auto& hp : def.positions) {
    if (def.dense && hp.m <= kRopeDenseLast && hp.m >= 2) continue;
    if (hp.m >= def.sweep_first && hp.m <= def.sweep_last && hp.why == kSweepWhy) continue;
    // A near-pi/2 position's distance in this case's own pair-0 frequency (scaled or not).
    why.push_back({{"position", hp.m},
                   {"why", is_near_half_pi_position(hp.m) ? near_half_pi_why(hp.m, o50.inv_freq[0])
                                                          : hp.why}});
  }
  m["positions"] = why;
  if (def.dense) m["positions_dense"] = {{"from", 0}, {"to", kRopeDenseLast}};
  if (def.sweep_last >= 0) {
    m["positions_sweep"] = {{"from", def.sweep_first},
                            {"to", def.sweep_last},
                            {"what", "every entry of the positions tensor in [from, to] (not listed above)"}};
  }
  Json inv = Json::array();
  for (int i = 0; i < np; ++i) {
    inv.push_back({{"i", i},
                   {"f32_hex", hex_bits_f32(round_to_f32(o50.inv_freq[i]))},
                   {"decimal", o50.inv_freq[i].str(25, std::ios_base::scientific)}});
  }
  m["tables"] = {{"inv_freq", inv}};
  Json pipe = Json::object();
  if (pe.count("fp32")) {
    pipe["fp32"] = {{"inv_freq_rel_error_max", pe["fp32"].table_rel_max},
                    {"model", is_scaled ? "HF's float32 rule (modeling_rope_utils) evaluated in interval "
                                          "arithmetic (faithful powf), phi = fl(fl(p) inv_freq), "
                                          "cosf/sinf within 2 ulp, cos * fl(attention factor)"
                                        : "inv_freq = 1/powf(base, fl(2i)/fl(d)) (every faithful powf), phi = "
                                          "fl(fl(p) inv_freq), cosf/sinf within 2 ulp"}};
  }
  if (pe.count("fp32-recurrence")) {
    pipe["fp32-recurrence"] = {
        {is_scaled ? "inv_freq_rel_error_max" : "theta_scale_rel_error",
         is_scaled ? pe["fp32-recurrence"].table_rel_max : bud::ggml_theta_scale_rel_error(p.base, p.rotary_dim)},
        {"model", is_scaled ? "ggml rope_ext: theta = fl(p) ts^i (float32 recurrence), freq_scale, YaRN mix "
                              "with float32 corr dims and ramp, rope_freqs factors, float32 mscale; "
                              "NTK and dynamic NTK: freq_base = the host's base' for the call "
                              "(double, then float32); interval arithmetic (faithful powf, logf)"
                            : "theta_0 = fl(p), theta_i = fl(theta_{i-1} * powf(base, "
                              "-2.0f/d)) (every faithful powf), cosf/sinf within 2 ulp"}};
    if (with_scores && bud::stored_product_rel_error(t) > 0) {
      pipe["fp32-recurrence"]["scores"] =
          "llama.cpp's " + dtype_text(t) + " KV cache: q_rot and k_rot rounded to " + dtype_text(t) +
          " before a float32-accumulated dot product (each product within (2 u_t + u_t^2) |q k|)";
    }
  }
  m["pipelines"] = pipe;
}

void RopeCaseGen::manifest_detection() {
  Json flags = {"PairingLayout", "AnglePrecision", "PositionOffset", "WrongBase"};
  if (d < h) flags.push_back("PartialRotary");
  if (hq != hk) flags.push_back("GroupedQueryHeads");
  if (is_scaled) {
    flags.push_back("ScalingRule");
    if (es.type == RopeScalingType::kYarn || es.type == RopeScalingType::kLongRope) flags.push_back("AttentionFactor");
    if (softmax_stage) flags.push_back("SoftmaxScale");
    if (es.type == RopeScalingType::kLongRope) flags.push_back("LongRopeSwitch");
    if (es.type == RopeScalingType::kLlama3 || es.type == RopeScalingType::kYarn) flags.push_back("BandEdges");
  }
  m["flags"] = flags;
  m["detection"] = Json::array(
      {{{"flag", "PositionOffset"}, {"stages", {"cos", "sin", "q_rot", "k_rot"}},
        {"blind", "a uniform position offset cancels in q.k, so scores cannot show it"}},
       {{"flag", "PairingLayout"}, {"stages", {"q_rot", "k_rot", "scores"}},
        {"blind", "cos, sin and inv_freq are per pair and do not show which channels pair up"}},
       {{"flag", "WrongBase"}, {"stages", {"inv_freq", "cos", "sin", "q_rot", "k_rot", "scores"}},
        {"blind", ""}}});
  if (d < h) {
    m["detection"].push_back({{"flag", "PartialRotary"}, {"stages", {"inv_freq", "q_rot", "k_rot", "scores"}},
                              {"blind", "cos and sin show the frequency denominator only through the angles"}});
  }
  if (is_scaled) {
    m["detection"].push_back({{"flag", "ScalingRule"}, {"stages", {"inv_freq", "cos", "sin", "q_rot", "k_rot", "scores"}},
                              {"blind", "at position 0 every angle is 0, whatever the frequencies"}});
    m["detection"].push_back({{"flag", "AttentionFactor"}, {"stages", {"attention_factor", "cos", "sin", "q_rot", "k_rot", "scores"}},
                              {"blind", "inv_freq does not carry it"}});
    if (softmax_stage) {
      m["detection"].push_back({{"flag", "SoftmaxScale"}, {"stages", {"softmax_scale"}},
                                {"blind", "the rotation stages do not carry the softmax multiplier"}});
    }
  }
}

void RopeCaseGen::manifest_resolution() {
  if (def.resolution && !def.dense) {
    // Resolution (docs/profiles.md): at each hard position and for each applicable profile,
    // the smallest perturbation whose exactly computed output (stored in the target dtype)
    // leaves the budget of some element of cos, sin, q_rot or k_rot at that position.
    Json res = Json::object();
    std::vector<long double> inv_ld;
    for (const auto& w : o50.inv_freq) inv_ld.push_back(static_cast<long double>(w));
    const Detector det{t, a};
    const auto cos64 = to_f64(o50.cos), sin64 = to_f64(o50.sin);
    const auto qr64 = to_f64(o50.q_rot);
    for (const auto& prof : profiles()) {
      const StageBudgets& b = sb[prof.name];
      if (!b.rotated.applies) continue;
      const bool angle = prof.name != "strict";
      Json rows = Json::array();
      for (std::int64_t tt = 0; tt < tn; ++tt) {
        TokenElements el;
        const double eps_t = dtype_eps(t);
        for (int i = 0; i < np; ++i) {
          const double ang = angle ? a * pe[prof.name].angle[tt * np + i] : 0.0;
          for (int kind = 0; kind < 2; ++kind) {
            const double y = kind == 0 ? cos64[tt * np + i] : sin64[tt * np + i];
            el.exact.push_back(y);
            el.budget.push_back(b.table.bound * eps_t * a + b.table.ulps * dtype_ulp(t, y) + ang);
            el.kind.push_back(kind);
            el.pair.push_back(i);
            el.xa.push_back(0);
            el.xb.push_back(0);
          }
        }
        // Head 0 of q: every rotated stage sees the same angles.
        const std::size_t off = static_cast<std::size_t>(tt * hq * h);
        for (int i = 0; i < np; ++i) {
          const int ca = reference::rope_pair_a(p, i), cb = reference::rope_pair_b(p, i);
          for (int kind = 2; kind < 4; ++kind) {
            const std::size_t j = off + (kind == 2 ? ca : cb);
            const double ang = angle ? qs.cond[j] * pe[prof.name].angle[tt * np + i] : 0.0;
            el.exact.push_back(qr64[j]);
            el.budget.push_back(b.rotated.bound * eps_t * qs.cond[j] + b.rotated.ulps * dtype_ulp(t, qr64[j]) + ang);
            el.kind.push_back(kind);
            el.pair.push_back(i);
            el.xa.push_back(q[off + ca]);
            el.xb.push_back(q[off + cb]);
          }
        }
        std::optional<std::int64_t> min_offset;
        for (std::int64_t o = 1; o <= 4096; ++o) {
          if (det.fails(el, pos[tt], static_cast<long double>(o), inv_ld)) {
            min_offset = o;
            break;
          }
        }
        auto scaled_inv = [&](auto f) {
          std::vector<long double> v(inv_ld.size());
          for (int i = 0; i < np; ++i) v[i] = f(i);
          return v;
        };
        const auto base_eps = smallest_failing([&](double e) {
          return det.fails(el, pos[tt], 0, scaled_inv([&](int i) {
            return inv_ld[i] * std::pow(1.0L + e, -2.0L * i / d);
          }));
        });
        const auto inv_eps = smallest_failing([&](double e) {
          return det.fails(el, pos[tt], 0, scaled_inv([&](int i) { return inv_ld[i] * (1.0L + e); }));
        });
        rows.push_back({{"position", pos[tt]},
                        {"min_offset", min_offset ? Json(*min_offset) : Json(nullptr)},
                        {"min_base_rel_error", sig2(base_eps)},
                        {"min_inv_freq_rel_error", sig2(inv_eps)}});
      }
      res[prof.name] = rows;
    }
    m["resolution"] = {
        {"what", "per profile and hard position: the smallest position offset (1..4096), "
                 "relative error of base, and relative error of every inv_freq entry whose "
                 "exactly computed cos, sin or q_rot (head 0; stored in the target dtype) leaves "
                 "the profile's budget at that position; null = none up to 4096 or 1.0"},
        {"profiles", res}};
  }
}

}  // namespace rope_kit

}  // namespace posenc::golden
