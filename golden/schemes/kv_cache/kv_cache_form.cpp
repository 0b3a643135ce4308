// The manifest form of scheme kv_cache: KV-cache position traces.
// The params keys, tensors and shapes verify checks before it judges a case
// (golden/verify/manifest_form.hpp); compiled into posenc::verify, listed by CMake for
// golden/verify/manifest_check.cpp.
#include <set>
#include <string>
#include <vector>

#include "golden/verify/manifest_form.hpp"
#include "reference/common/mutant.hpp"

namespace posenc::golden {

using namespace form;
using Json = nlohmann::json;

namespace {

void check_kv_trace(const CaseSpec& c, const std::string& source);

// ---- kv_cache ---------------------------------------------------------------------------------

void kv_rules(const CaseSpec& c, const Json& p, const std::string& source) {
  attention_rules(c, p, source);
  const std::int64_t cap = pint(p, "capacity"), window = pint(p, "window"),
                     sinks = pint(p, "n_sink");
  const std::int64_t H = pint(p, "n_heads"), d = pint(p, "head_dim");
  if (cap > 0 && !POSENC_MUTANT("golden_trace_cache_rows_unchecked")) {
    rule(pint(p, "cache_rows") == cap, source, "params.cache_rows",
         "expected the capacity " + std::to_string(cap) + " (got " + p.at("cache_rows").dump() +
             ")");
  }
  rule(window == 0 || cap == 0 || cap >= window, source, "params.capacity",
       "expected >= window " + std::to_string(window) + " (got " + std::to_string(cap) + ")");
  if (sinks > 0) {
    rule(cap > sinks, source, "params.capacity",
         "expected > n_sink " + std::to_string(sinks) + " (got " + std::to_string(cap) + ")");
    rule(window == 0, source, "params.window",
         "expected 0 with attention sinks (got " + std::to_string(window) + ")");
    rule(!p.contains("chunk"), source, "params.chunk",
         "unexpected with attention sinks: a sink cache renumbers positions");
  }
  const Json& e = c.manifest.at("encoding");
  if (!e.is_object()) bad(source, "encoding", "expected an object (got " + e.dump() + ")");
  const Key kind = string("kind", "nope|rope|alibi|t5_bias|learned|sinusoidal");
  check_key(e, kind, source, "kv_cache", "encoding.");
  const std::string k = e.at("kind").get<std::string>();
  if (k == "rope") {
    rule(e.value("head_dim", Json()) == p.at("head_dim"), source, "encoding.head_dim",
         "expected params.head_dim " + p.at("head_dim").dump() + " (got " +
             e.value("head_dim", Json()).dump() + ")");
  }
  if (k == "t5_bias") {
    rule(e.value("num_buckets", Json()).is_number_integer(), source, "encoding.num_buckets",
         "expected an integer");
    Json q = {{"n", e.at("num_buckets")}, {"H", H}};
    check_shape(c, {"t5_table", {"n", "H"}, true}, q, source);
  }
  if (k == "learned") {
    rule(e.value("rows", Json()).is_number_integer(), source, "encoding.rows",
         "expected an integer");
    std::int64_t hd = 0;
    rule(!__builtin_mul_overflow(H, d, &hd), source, "params.head_dim",
         "n_heads * head_dim overflows");
    Json q = {{"n", e.at("rows")}, {"Hd", hd}};
    check_shape(c, {"learned_table", {"n", "Hd"}, true}, q, source);
  }
  check_shape(c, {"sink_logits", {"H"}, false}, Json{{"H", H}}, source);  // GPT-OSS, optional
  check_kv_trace(c, source);
}

std::string step_name(std::size_t s) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "s%02zu", s);
  return buf;
}

/// The "inputs" or "expected" list of a step: names of tensors of that manifest list, each of
/// its own step and listed once; returns the suffixes after "sNN.".
std::set<std::string> step_tensors(const CaseSpec& c, const Json& js, const char* list,
                                   const std::string& sn, const std::string& w,
                                   std::set<std::string>* claimed, const std::string& source) {
  const std::string key = w + "." + list;
  if (!js.contains(list) || !js.at(list).is_array())
    bad(source, key, "expected a list of tensor names");
  const auto& pool = std::string(list) == "inputs" ? c.inputs : c.expected;
  std::set<std::string> out;
  for (const auto& n : js.at(list)) {
    if (!n.is_string()) bad(source, key, "expected tensor names (got " + n.dump() + ")");
    const std::string name = n.get<std::string>();
    if (name.rfind(sn + ".", 0) != 0)
      bad(source, key, "\"" + name + "\" is not a tensor of step " + sn);
    bool listed = false;
    for (const auto& t : pool) listed |= t.name == name;
    if (!listed) bad(source, key, "\"" + name + "\" is not in the manifest's " + list);
    if (!claimed->insert(name).second) bad(source, key, "\"" + name + "\" is listed twice");
    out.insert(name.substr(sn.size() + 1));
  }
  return out;
}

/// The step tensor sNN.<role>: shape and dtype.
void step_shape(const CaseSpec& c, const std::string& name, const std::vector<std::int64_t>& shape,
                const char* dims, const std::string& dtype, const std::string& source) {
  const TensorSpec* t = find_tensor(c, name);
  if (t == nullptr) return;  // step_tensors has checked that every listed name exists
  if (t->shape != shape) {
    bad(source, "tensor \"" + name + "\" shape",
        std::string("expected ") + dims + " = " + shape_text(shape) +
            " from params and the step's columns, got " + shape_text(t->shape));
  }
  if (dtype_short(t->dtype) != dtype) {
    bad(source, "tensor \"" + name + "\" dtype",
        "expected \"" + dtype + "\", got \"" + std::string(dtype_short(t->dtype)) + "\"");
  }
}

std::int64_t step_int(const Json& js, const char* key, std::int64_t lo, const std::string& w,
                      const std::string& source) {
  const Json v = js.value(key, Json());
  if (!v.is_number_integer() ||
      (v.is_number_unsigned() && v.get<std::uint64_t>() > (std::uint64_t{1} << 62)) ||
      v.get<std::int64_t>() < lo) {
    bad(source, w + "." + key,
        "expected an integer >= " + std::to_string(lo) + " (got " + v.dump() + ")");
  }
  return v.get<std::int64_t>();
}

void check_kv_trace(const CaseSpec& c, const std::string& source) {
  // params, encoding and the block's presence are checked (check_form, kv_rules) before
  const Json& m = c.manifest;
  const Json& p = m.at("params");
  const std::int64_t B = pint(p, "batch"), H = pint(p, "n_heads"), Hkv = pint(p, "n_kv_heads");
  const std::int64_t d = pint(p, "head_dim"), dv = pint(p, "value_dim"), C = pint(p, "cache_rows");
  const std::string dt = p.at("dtype").get<std::string>();
  const Json& tr = m.at("trace");
  if (!tr.is_object() || !tr.contains("steps") || !tr.at("steps").is_array() ||
      tr.at("steps").empty()) {
    bad(source, "trace.steps", "expected a non-empty list of steps");
  }
  const Json& steps = tr.at("steps");
  std::set<std::string> claimed;
  std::int64_t columns = 0;
  static const std::set<std::string> kinds = {"prefill", "batch", "decode", "verify", "shift"};
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const Json& js = steps[i];
    const std::string w = "trace.steps[" + std::to_string(i) + "]";
    if (!js.is_object()) bad(source, w, "expected an object");
    const Json idx = js.value("index", Json());
    if ((!idx.is_number_integer() || idx.get<std::int64_t>() != static_cast<std::int64_t>(i)) &&
        !POSENC_MUTANT("golden_trace_step_order_unchecked")) {
      bad(source, w + ".index",
          "expected " + std::to_string(i) +
              " (step indexes increase by one from 0: none "
              "repeated, reversed or missing; got " +
              idx.dump() + ")");
    }
    const std::string sn = step_name(i);
    if (js.value("name", Json()) != Json(sn)) {
      bad(source, w + ".name",
          "expected \"" + sn + "\" (got " + js.value("name", Json()).dump() + ")");
    }
    const Json kj = js.value("kind", Json());
    const std::string kind = kj.is_string() ? kj.get<std::string>() : "";
    if (!kinds.count(kind) && !POSENC_MUTANT("golden_trace_step_kind_unchecked")) {
      bad(source, w + ".kind",
          "expected prefill, batch, decode, verify or shift (got " + kj.dump() + ")");
    }
    if (i == 0 && kind != "prefill" && kind != "batch") {
      bad(source, w + ".kind",
          "expected prefill or batch: the first step appends (got " + kj.dump() + ")");
    }
    if (i > 0 && kind == "prefill") bad(source, w + ".kind", "a prefill is the first step only");
    if (js.contains("note") && !js.at("note").is_string())
      bad(source, w + ".note", "expected a string");
    const auto ins = step_tensors(c, js, "inputs", sn, w, &claimed, source);
    const auto exs = step_tensors(c, js, "expected", sn, w, &claimed, source);
    for (const char* r : {"cache_positions", "cache_k"}) {
      if (!exs.count(r)) bad(source, w + ".expected", "missing " + sn + "." + r);
    }
    step_shape(c, sn + ".cache_positions", {B, C}, "[batch, cache_rows]", "i64", source);
    step_shape(c, sn + ".cache_k", {B, C, Hkv, d}, "[batch, cache_rows, n_kv_heads, head_dim]", dt,
               source);
    if (kind == "shift") {
      const std::int64_t keep = step_int(js, "n_keep", 0, w, source);
      const std::int64_t discard = step_int(js, "n_discard", 1, w, source);
      if (keep > C || discard > C - keep) {
        bad(source, w + ".n_discard",
            "expected n_keep + n_discard <= cache_rows " + std::to_string(C) + " (got " +
                std::to_string(keep) + " + " + std::to_string(discard) + ")");
      }
      if (js.contains("columns"))
        bad(source, w + ".columns", "unexpected: a shift step appends no columns");
      if (!ins.empty()) bad(source, w + ".inputs", "expected none: a shift step has no inputs");
      if (exs.size() != 2)
        bad(source, w + ".expected", "expected the cache only (cache_positions, cache_k)");
      continue;
    }
    const std::int64_t T = step_int(
        js, "columns", POSENC_MUTANT("golden_trace_columns_unchecked") ? -1000 : 1, w, source);
    if (kind == "decode" && T != 1)
      bad(source, w + ".columns", "expected 1 for a decode step (got " + std::to_string(T) + ")");
    if (js.contains("n_keep") || js.contains("n_discard"))
      bad(source, w, "unexpected n_keep / n_discard: not a shift step");
    if (js.contains("first_position")) step_int(js, "first_position", 0, w, source);
    if (__builtin_add_overflow(columns, T, &columns))
      bad(source, w + ".columns", "the columns add up beyond 2^63");
    for (const char* r : {"q", "k", "v"}) {
      if (!ins.count(r)) bad(source, w + ".inputs", "missing " + sn + "." + r);
    }
    for (const char* r : {"positions", "out"}) {
      if (!exs.count(r)) bad(source, w + ".expected", "missing " + sn + "." + r);
    }
    for (const auto& r : ins) {
      if (r != "q" && r != "k" && r != "v" && r != "valid")
        bad(source, w + ".inputs", "unexpected " + sn + "." + r);
    }
    for (const auto& r : exs) {
      if (r != "positions" && r != "slots" && r != "out" && r != "cache_positions" &&
          r != "cache_k") {
        bad(source, w + ".expected", "unexpected " + sn + "." + r);
      }
    }
    step_shape(c, sn + ".q", {B, T, H, d}, "[batch, columns, n_heads, head_dim]", dt, source);
    step_shape(c, sn + ".k", {B, T, Hkv, d}, "[batch, columns, n_kv_heads, head_dim]", dt, source);
    step_shape(c, sn + ".v", {B, T, Hkv, dv}, "[batch, columns, n_kv_heads, value_dim]", dt,
               source);
    step_shape(c, sn + ".valid", {B, T}, "[batch, columns]", "i32", source);
    step_shape(c, sn + ".positions", {B, T}, "[batch, columns]", "i64", source);
    step_shape(c, sn + ".slots", {B, T}, "[batch, columns]", "i64", source);
    step_shape(c, sn + ".out", {B, T, H, dv}, "[batch, columns, n_heads, value_dim]", dt, source);
  }
  if (pint(p, "capacity") == 0 && columns != C) {
    bad(source, "params.cache_rows",
        "expected the steps' columns in all, " + std::to_string(columns) +
            ", for a cache without capacity (got " + std::to_string(C) + ")");
  }
  for (const auto* list : {&c.inputs, &c.expected}) {
    for (const auto& t : *list) {
      const bool step_like =
          t.name.size() > 1 && t.name[0] == 's' && t.name[1] >= '0' && t.name[1] <= '9';
      if (step_like && !claimed.count(t.name))
        bad(source, "tensor \"" + t.name + "\"", "belongs to no trace step");
    }
  }
}

}  // namespace

std::vector<form::Form> kv_cache_forms() {
  return {{"kv_cache",
           nullptr,
           true,
           {integer("batch", 1), integer("n_heads", 1), integer("n_kv_heads", 1),
            integer("head_dim", 1), integer("value_dim", 1), integer("window"), integer("capacity"),
            integer("n_sink"), integer("cache_rows", 1),
            string("scale_kind", "inv_sqrt_head_dim|none"), dtype_key()},
           {integer("chunk", 1)},
           {"encoding", "trace"},
           {},
           "",
           kv_rules}};
}

}  // namespace posenc::golden
