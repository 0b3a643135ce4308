// The per-scheme schema of a golden manifest, checked before a case is judged (load_case and
// open_case run it after case_spec_from_json's scheme-free checks; golden/format knows no scheme).
//
// A scheme has one or more forms (e.g. t5_bias: the bucket table, or attention with a bias); the
// manifest's form is chosen by a discriminating key and must then have:
//   - every required "params" key, of its type and in its range; no key the form does not know
//     (a manifest relabelled with another scheme's slug is refused here);
//   - the form's top-level blocks ("scaling", "alibi", "encoding", "trace", ...);
//   - its required tensors, and every tensor the form names with the shape its params give
//     (a RoPE q is [n_tokens, n_q_heads, head_dim]) and the dtype of params.dtype;
//   - cross-key rules (rotary_dim even and <= head_dim, n_heads a multiple of n_kv_heads, ...).
// The "trace" block of a kv_cache manifest, against its params and tensors (GoldenFileError
// "<source>: trace.steps[i].<key>: ..." naming the first broken invariant):
//   - steps is a non-empty list; step i has "index" i (strictly increasing from 0, none
//     missing or repeated) and "name" sNN (two digits at least: s00, s01, ...);
//   - kind is prefill (step 0 only), batch, decode, verify or shift; step 0 appends;
//   - an appending step has "columns" T >= 1 (a decode exactly 1); its inputs are sNN.q
//     [B, T, H, d], sNN.k [B, T, Hkv, d], sNN.v [B, T, Hkv, dv] and, optionally, sNN.valid
//     [B, T] i32; its expected sNN.positions [B, T] i64, optionally sNN.slots [B, T] i64,
//     sNN.out [B, T, H, dv], sNN.cache_positions [B, C] i64 and sNN.cache_k [B, C, Hkv, d];
//   - a shift step has n_keep >= 0, n_discard >= 1, n_keep + n_discard <= C, no columns, no
//     inputs, and expects the cache only;
//   - every name a step lists is a manifest tensor of that list, and every sNN.* tensor of the
//     manifest belongs to its step;
//   - C = params.cache_rows is the capacity when there is one, else the sum of the columns.
// A manifest of a scheme not in the table is refused ("scheme must be one of: ..."), so verify
// knows every scheme without the generators' registry (properties/verify_test.cpp checks that
// the two list the same slugs).
#pragma once
#include <string>
#include <vector>

#include "golden/format/manifest.hpp"
#include "golden/verify/tensor_source.hpp"

namespace posenc::golden {

/// GoldenFileError "<source>: <key>: <what was expected>" unless the manifest fits its scheme
/// (a scheme verify does not know included).
void check_manifest_schema(const CaseSpec& spec, const std::string& source);
/// The schemes verify knows (those with a manifest form), sorted.
std::vector<std::string> manifest_schemes();

/// The values of a kv_cache trace's integer tensors (after check_manifest_schema; nothing for
/// another scheme), as the generator writes them: per sequence, sNN.cache_positions holds the
/// cached positions first, in ascending order (strictly in a valid trace; a negative control
/// may cache two keys at one position), then -1 for the empty rows; sNN.valid is 0 or 1;
/// sNN.positions is >= 0 at a valid column and -1 at padding; sNN.slots is in [0, cache_rows)
/// at a valid column and -1 at padding. GoldenFileError "<source>: tensor \"sNN.x\" [b, i]:
/// expected ... (got v)".
void check_kv_trace_values(const CaseSpec& spec, TensorSource& golden, const std::string& source);

}  // namespace posenc::golden
