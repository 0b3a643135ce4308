// The manifest form of scheme mrope: M-RoPE: text prompts, the vision tower and KV-cache traces.
// The params keys, tensors and shapes verify checks before it judges a case
// (golden/verify/manifest_form.hpp); compiled into posenc::verify, listed by CMake for
// golden/verify/manifest_check.cpp.
#include <set>
#include <string>
#include <vector>

#include "golden/verify/manifest_form.hpp"

namespace posenc::golden {

using namespace form;
using Json = nlohmann::json;

namespace {

/// M-RoPE: RoPE's keys, the map, the index rule, the prompt's spans and the decode count.
Form mrope_form() {
  return {"mrope",
          nullptr,
          true,
          rope_keys() + std::vector<Key>{object("map"), object("index"), object("prompt"),
                                         integer("n_prompt"), integer("n_decode")},
          {},
          {},
          {{"input_ids", {"n_tokens"}, true},
           {"q", {"n_tokens", "n_q_heads", "head_dim"}, true},
           {"k", {"n_tokens", "n_kv_heads", "head_dim"}},
           {"q_rot", {"n_tokens", "n_q_heads", "head_dim"}},
           {"k_rot", {"n_tokens", "n_kv_heads", "head_dim"}},
           {"cos", {"n_tokens", "rotary_dim/2"}},
           {"sin", {"n_tokens", "rotary_dim/2"}}},
          "q",
          rope_rules};
}

bool mrope_trace(const Json& m) { return m.value("variant", Json()) == Json("trace"); }

/// An M-RoPE KV-cache trace: RoPE's rotation keys, the map and index rule, the heads and cache
/// rows; the requests and steps in the "trace" block. Every step's tensors are listed by name,
/// steps are numbered 0, 1, 2, ... and each names a known request and kind.
void mrope_trace_rules(const CaseSpec& c, const Json& p, const std::string& source) {
  rope_rules(c, p, source);
  const Json& tr = c.manifest.at("trace");
  const bool ok = tr.is_object() && tr.contains("requests") && tr.at("requests").is_array() &&
                  !tr.at("requests").empty() && tr.contains("steps") && tr.at("steps").is_array() &&
                  !tr.at("steps").empty();
  rule(ok, source, "trace", "expected non-empty lists \"requests\" and \"steps\"");
  static const std::set<std::string> kinds = {"prefill", "decode",   "draft",
                                              "verify",  "truncate", "shift"};
  const std::int64_t n_requests = static_cast<std::int64_t>(tr.at("requests").size());
  const Json& steps = tr.at("steps");
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const Json& js = steps[i];
    const std::string w = "trace.steps[" + std::to_string(i) + "]";
    rule(js.is_object() && js.value("index", Json()) == Json(i), source, w + ".index",
         "expected " + std::to_string(i) + " (steps numbered from 0, none repeated or missing)");
    rule(js.contains("kind") && js.at("kind").is_string() &&
             kinds.count(js.at("kind").get<std::string>()),
         source, w + ".kind", "expected prefill, decode, draft, verify, truncate or shift");
    const Json r = js.value("request", Json());
    rule(r.is_number_integer() && r.get<std::int64_t>() >= 0 && r.get<std::int64_t>() < n_requests,
         source, w + ".request", "expected the index of one of trace.requests");
    for (const char* list : {"inputs", "expected"}) {
      rule(js.contains(list) && js.at(list).is_array(), source, w + "." + list,
           "expected a list of tensor names");
      for (const Json& name : js.at(list)) {
        rule(name.is_string() && find_tensor(c, name.get<std::string>()) != nullptr, source,
             w + "." + list, "names a tensor the manifest does not list: " + name.dump());
      }
    }
  }
}

bool mrope_vision(const Json& m) { return m.value("variant", Json()) == Json("vision"); }

/// A vision-tower case: 2D axial RoPE over an image's patches (no prompt, no input_ids).
Form mrope_vision_form() {
  return {"mrope vision tower (variant \"vision\")",
          mrope_vision,
          true,
          rope_keys() + std::vector<Key>{object("map"), object("grid")},
          {},
          {},
          {{"q", {"n_tokens", "n_q_heads", "head_dim"}, true},
           {"k", {"n_tokens", "n_kv_heads", "head_dim"}},
           {"q_rot", {"n_tokens", "n_q_heads", "head_dim"}},
           {"k_rot", {"n_tokens", "n_kv_heads", "head_dim"}},
           {"cos", {"n_tokens", "rotary_dim/2"}},
           {"sin", {"n_tokens", "rotary_dim/2"}}},
          "q",
          rope_rules};
}

Form mrope_trace_form() {
  return {"mrope trace (variant \"trace\")",
          mrope_trace,
          true,
          {integer("n_q_heads", 1), integer("n_kv_heads", 1), integer("head_dim", 2),
           integer("rotary_dim", 2), number("base", 1e-300), number("attention_factor", 1e-300),
           string("layout", "half_split|interleaved"), object("map"), object("index"),
           integer("cache_rows", 1), dtype_key()},
          {},
          {"trace"},
          {},
          "",
          mrope_trace_rules};
}

}  // namespace

std::vector<form::Form> mrope_forms() {
  return {mrope_trace_form(), mrope_vision_form(), mrope_form()};
}

}  // namespace posenc::golden
