// libFuzzer target: the plan manifest's reader (plan_manifest_read) and an engine's layer table
// against a plan (plan_layer_table_check), on arbitrary text. The first byte picks the file: even
// a plan.json (bit 1 set: its types' case hashes are refreshed to the real files', so the checks
// past the hashes are reached), odd a layer table against the Gemma 3 plan of
// fuzz/plan_gemma3.json. The plan's case files are the committed catalog's Gemma 3 cases, copied
// into a scratch folder.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "fuzz/fuzz_common.hpp"
#include "golden/verify/plan_verify.hpp"
#include "golden/format/limits.hpp"

using namespace posenc;
using namespace posenc::golden;
namespace fs = std::filesystem;
using Json = nlohmann::json;

namespace {

const fs::path kSource = POSENC_SOURCE_DIR;

void write(const fs::path& p, const std::string& text) {
  if (std::FILE* f = std::fopen(p.c_str(), "wb")) {
    if (!text.empty()) std::fwrite(text.data(), 1, text.size(), f);
    std::fclose(f);
  }
}

/// types[].manifest_sha256 / tensors_sha256 set to the files' own where they name a file here.
void refresh_hashes(Json& j, const fs::path& dir) {
  if (!j.is_object() || !j.contains("types") || !j["types"].is_array()) return;
  for (Json& t : j["types"]) {
    if (!t.is_object()) continue;
    for (const char* f : {"manifest", "tensors"}) {
      if (!t.contains(f) || !t[f].is_string()) continue;
      const std::string rel = t[f].get<std::string>();
      if (rel.rfind("plan/", 0) != 0 || rel.find("..") != std::string::npos) continue;
      std::error_code ec;
      if (fs::is_regular_file(dir / rel, ec))
        t[std::string(f) + "_sha256"] = sha256_file(dir / rel);
    }
  }
}

struct Scratch {
  fs::path dir;
  PlanManifest plan;  // the good plan, for the table mode
};

const Scratch& scratch() {
  static const Scratch s = [] {
    Scratch x;
    x.dir = fs::temp_directory_path() / ("posenc_fuzz_plan." + std::to_string(getpid()));
    fs::create_directories(x.dir / "plan");
    for (const char* t : {"sliding_attention", "full_attention"}) {
      for (const char* ext : {".json", ".safetensors"}) {
        const std::string name = std::string("plan_gemma_3_4b_it_") + t + "_f32" + ext;
        fs::copy_file(kSource / "golden" / "data" / "plan" / name, x.dir / "plan" / name,
                      fs::copy_options::overwrite_existing);
      }
    }
    Json j = Json::parse(read_json_text(kSource / "fuzz" / "plan_gemma3.json"));
    refresh_hashes(j, x.dir);
    write(x.dir / "good.json", j.dump(1));
    x.plan = plan_manifest_read(x.dir / "good.json");
    return x;
  }();
  return s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const Scratch& s = scratch();
  if (size == 0) return 0;
  std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  const std::uint8_t mode = data[0];
  if (mode % 2 == 0) {
    if (mode & 2) {
      try {
        Json j = Json::parse(text);
        refresh_hashes(j, s.dir);
        text = j.dump();
      } catch (const std::exception&) {
      }
    }
    write(s.dir / "plan.json", text);
    fuzz::expect_clean("plan_manifest_read", [&] {
      const PlanManifest p = plan_manifest_read(s.dir / "plan.json");
      fuzz::require(p.n_layers >= 1 && static_cast<int>(p.layers.size()) == p.n_layers &&
                        static_cast<int>(p.layer_type.size()) == p.n_layers,
                    "an accepted plan lists every layer once");
      for (const auto& t : p.types) {
        fuzz::require(t.manifest.parent_path() == s.dir / "plan",
                      "an accepted plan names case files inside its plan/ folder");
      }
    });
  } else {
    write(s.dir / "table.json", text);
    fuzz::expect_clean("plan_layer_table_check", [&] {
      for (const auto& d : plan_layer_table_check(s.plan, s.dir / "table.json")) {
        fuzz::require(d.layer >= 0 && d.layer < s.plan.n_layers && !d.key.empty(),
                      "a difference names a layer of the plan and a key");
      }
    });
  }
  return 0;
}
