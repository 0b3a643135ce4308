// posenc's subcommands and their options (tools/posenc_cli.hpp).
#include "tools/posenc_cli.hpp"

#include "golden/format/profiles.hpp"
#include "tools/posenc_report.hpp"

namespace posenc::tools {

namespace {

// The output rule (golden/format/output_path.hpp, docs/bad-input.md): every subcommand that
// writes takes --force.
void add_force(CLI::App* sub, bool* force, const std::string& what) {
  sub->add_flag(
      "--force", *force,
      "Replace " + what +
          " even when it exists and is not posenc's own kind of "
          "output. Never: a FIFO, device, socket or directory, nor a file this command reads");
}

void add_selection(CLI::App* sub, golden::CaseSelection* sel) {
  sub->add_option("--scheme", sel->scheme, "Only cases of this scheme slug (e.g. rope)")
      ->check(kNonEmpty);
  sub->add_option("--case", sel->case_regex, "Only case ids matching this pattern (an RE2 regular expression searched in the id, at most 256 characters; matched in linear time)")
      ->check(kNonEmpty);
}

// --report of verify, diagnose and check, then its --force (replacing `force_what`). With
// `capped`, the help says how many failing cases the page diagnoses (verify and check: a run of
// many cases; diagnose diagnoses every case it is given).
void add_report(CLI::App* sub, std::string* report, bool* force, bool capped,
                const std::string& force_what) {
  std::string help =
      "Also write one self-contained HTML page (inline SVG, no script): the case table, and per "
      "failing tensor the error against position, a position x channel heat map, the worst "
      "elements and the diagnosis. Checked before the run: a FIFO, device, directory or a file "
      "this command reads is refused; an existing file that is not a posenc report needs --force";
  if (capped) {
    help +=
        " (failing cases: the first " + std::to_string(golden::kReportDiagnoses) + " diagnosed)";
  }
  sub->add_option("--report", *report, help)->check(kNonEmpty);
  add_force(sub, force, force_what);
}

}  // namespace

CLI::App* add_list_command(CLI::App& app, ListArgs* a) {
  auto* list = app.add_subcommand("list", "List the golden cases of every scheme");
  add_selection(list, &a->sel);
  list->add_option("--shard", a->shard,
                   "Only the cases `generate --shard i/n` of the same selection writes")->check(kNonEmpty);
  list->add_option("--format", a->format, "text or json (with each case's estimated cost)");
  list->add_option("--level", a->level,
                   "1 (default): the catalog; 2: the cases `generate --level 2` of the same "
                   "options writes (every RoPE and scaling preset, or --config's model)");
  list->add_option("--config", a->config, "With --level 2: only this model config's cases")->check(kNonEmpty);
  list->add_option("--dtype", a->dtype, "With --level 2: f32 (default), bf16 or f16");
  return list;
}

CLI::App* add_show_command(CLI::App& app, ShowArgs* a) {
  auto* show =
      app.add_subcommand("show", "Show one case: parameters, conventions, tensors, checks");
  show->add_option("CASE", a->which, "Case id or manifest path")->required();
  show->add_option("--data", a->data, "Golden data directory (default: the source tree's)")->check(kNonEmpty);
  show->add_option("--format", a->format, "text or json (json prints the manifest)");
  return show;
}

CLI::App* add_generate_command(CLI::App& app, GenerateArgs* a) {
  auto* gen = app.add_subcommand("generate",
                                 "Generate golden files (manifest + safetensors) from the oracle");
  add_selection(gen, &a->sel);
  a->out_option =
      gen->add_option("--out", a->out, "Output directory (default: the source tree's golden/data)")->check(kNonEmpty);
  gen->add_option(
      "--config", a->config,
      "A model's HF config.json (verbatim; rope_scaling or rope_parameters): golden cases "
      "for that model, plain or scaled RoPE, or M-RoPE for a Qwen2-VL / Qwen2.5-VL / Qwen3-VL / "
      "GLM-4.1V config, into --out (required) with its catalog.json")->check(kNonEmpty);
  gen->add_option("--positions", a->positions,
                  "With --config: one call at exactly these token positions (e.g. 0-15,4095,4096; "
                  "the call's seq_len is the largest + 1); default: the rule's standard calls over "
                  "the hard positions and its boundaries");
  gen->add_option("--layout", a->layout,
                  "With a vision-language --config: one case for this prompt layout (JSON: "
                  "{\"spans\": [{\"type\": \"text\", \"tokens\": n}, {\"type\": \"image\", "
                  "\"grid_thw\": [t, h, w]}, {\"type\": \"video\", \"grid_thw\": [t, h, w], "
                  "\"second_per_grid\": s}], \"decode\": n}); default: the standard layouts")->check(kNonEmpty);
  gen->add_option("--dtype", a->dtype, "With --config or --level 2: f32 (default), bf16 or f16");
  gen->add_option("--level", a->level,
                  "1 (default): the catalog (or --config's standard calls); 2: dense sweeps of every "
                  "RoPE and scaling preset (or of --config's model): tables at every position to "
                  "the context length, every position around each boundary, rotations and scores "
                  "at sampled tokens; into --out (required; never committed)");
  gen->add_option("--shard", a->shard,
                  "Generate only shard i of n (i/n, 0 <= i < n) for batch fan-out")->check(kNonEmpty);
  gen->add_flag("--no-catalog", a->no_catalog,
                "Do not rewrite catalog.json (use `posenc catalog` after all shards)");
  add_force(gen, &a->force, "a case file or catalog.json in --out");
  return gen;
}

CLI::App* add_catalog_command(CLI::App& app, CatalogArgs* a) {
  auto* cat = app.add_subcommand("catalog",
                                 "Rebuild catalog.json from the case files present in a directory");
  cat->add_option("--data", a->data, "Golden data directory")->check(kNonEmpty);
  add_force(cat, &a->force, "--data's catalog.json");
  return cat;
}

CLI::App* add_verify_command(CLI::App& app, VerifyArgs* a) {
  auto* ver = app.add_subcommand(
      "verify",
      "Check an engine's outputs against golden cases. Judges the cases with output in --actual "
      "and ends with a summary; per tensor it reports the worst element, the first failing "
      "position and the largest position up to which every element passes");
  ver->add_option("GOLDEN", a->golden,
                  "Manifests, case directories or a catalog (folder or catalog.json; its SHA-256 "
                  "of both files of every case is checked)")
      ->required();
  ver->add_option("--actual", a->actual,
                  "Engine output: a .safetensors or .npy file (one case), or a directory with "
                  "<case_id>.safetensors or <case_id>/<tensor>.npy (for a plan.json also "
                  "layers/NN/, each layer's own output); required unless --layer-table is given")->check(kNonEmpty);
  ver->add_option("--layer-table", a->layer_table,
                  "With a plan.json: the engine's layer table (schema posenc-layer-table: per "
                  "layer rope, base, scaling, mask, window, chunk, temperature, sinks, qk_norm) "
                  "checked exactly against the plan, naming each layer and key that differs "
                  "(docs/verifying-plans.md)")->check(kNonEmpty);
  ver->add_option("--profile", a->profile,
                  "The pipeline the engine claims: " + golden::profile_list_text() +
                      " (docs/profiles.md has each one's derivation and resolution)");
  ver->add_option("--format", a->format, "text or json");
  ver->add_option("--map", a->maps,
                  "Rename: golden_name=engine_name (repeatable; the engine file "
                  "must hold engine_name)");
  ver->add_flag(
      "--require-all", a->require_all,
      "Every case needs an output and every stage a tensor (exit 2 naming what is missing)");
  ver->add_flag("--by-position", a->by_position,
                "Print the worst ratio per position, flagging positions where the profile's "
                "budget admits any angle");
  ver->add_option("--max-position", a->max_position,
                  "Judge only elements at positions <= N (a model's context window)");
  ver->add_flag("-v,--verbose", a->verbose,
                "Print the worst element of passing tensors and cases "
                "without output too");
  add_report(ver, &a->report, &a->force, true, "the --report file");
  ver->footer(
      "Exit codes: 0 every judged case passes (negative controls: the output differs from the "
      "known-wrong convention), 1 at least one fails, 2 usage or input error or nothing judged, "
      "3 nothing judged but INCONCLUSIVE negative controls (the stages given are the same under "
      "the right and the known-wrong convention; the report names the stages that would tell).");
  return ver;
}

CLI::App* add_diagnose_command(CLI::App& app, DiagnoseArgs* a) {
  auto* dia = app.add_subcommand(
      "diagnose",
      "Say what an engine's output is: runs every emulated pipeline and every known mistake of "
      "the case's scheme through posenc's engine and ranks them by how well each explains the "
      "output (residual <= 1 of that pipeline's budget confirms it); a correct output gets no "
      "diagnosis");
  dia->add_option("GOLDEN", a->golden, "Manifests, case directories or a catalog")->required();
  dia->add_option("--actual", a->actual, "Engine output, as for verify")->check(kNonEmpty)->required();
  dia->add_option("--profile", a->profile, "The profile the engine claims (default strict)");
  dia->add_option("--format", a->format, "text or json");
  dia->add_flag("-v,--verbose", a->verbose, "List every hypothesis, not only the best five");
  add_report(dia, &a->report, &a->force, false, "the --report file");
  dia->footer(
      "Exit codes: 0 every diagnosed case is correct (passes the claimed profile), 1 at "
      "least one is not (explained or unexplained), 2 usage or input error, including no "
      "valid case with an engine output (negative controls are not diagnosed).");
  return dia;
}

CLI::App* add_check_command(CLI::App& app, CheckArgs* a) {
  auto* chk = app.add_subcommand(
      "check",
      "Run posenc's own kernels (or an emulated engine pipeline) on the catalog through "
      "files and verify them; prints the worst element's share of its budget");
  add_selection(chk, &a->sel);
  chk->add_option("--data", a->data, "Golden data directory")->check(kNonEmpty);
  chk->add_option("--pipeline", a->pipeline,
                  "exact (posenc's optimized kernels), fp32, fp32-recurrence, bf16 or f16 "
                  "(float emulations of the engines each profile models)");
  chk->add_option("--profile", a->profile, "Profile to judge by (default: the pipeline's own)");
  chk->add_option("--format", a->format, "text or json");
  chk->add_option("--keep", a->keep,
                  "Keep the engine output files in this directory "
                  "(<case_id>.safetensors; checked before the run)")->check(kNonEmpty);
  add_report(chk, &a->report, &a->force, true, "the --report file or a --keep file");
  return chk;
}

CLI::App* add_engine_command(CLI::App& app, EngineArgs* a) {
  auto* eng = app.add_subcommand(
      "engine", "Run posenc's optimized kernel on one case as an engine would; write its outputs");
  eng->add_option("CASE", a->which, "Case id or manifest path")->required();
  eng->add_option("--out", a->out,
                  "Output .safetensors file (or directory for --format npy); a FIFO, device, "
                  "directory or a file this command reads is refused, an existing file not "
                  "written by posenc engine needs --force")->check(kNonEmpty)
      ->required();
  eng->add_option("--data", a->data, "Golden data directory")->check(kNonEmpty);
  eng->add_option("--mistake", a->mistake,
                  "Deliberate bug, to see verify fail (per scheme; rope: pairing, offset, "
                  "double-rotation, sin-sign; an unknown name lists the scheme's)");
  eng->add_option("--pipeline", a->pipeline,
                  "Engine pipeline to emulate: exact (default, posenc's kernels), fp32, "
                  "fp32-recurrence, bf16, f16");
  eng->add_option("--format", a->format, "safetensors or npy");
  add_force(eng, &a->force, "the --out file");
  return eng;
}

void add_commands(CLI::App& app, CommandLine* c) {
  add_list_command(app, &c->list);
  add_show_command(app, &c->show);
  add_generate_command(app, &c->generate);
  add_catalog_command(app, &c->catalog);
  add_verify_command(app, &c->verify);
  add_diagnose_command(app, &c->diagnose);
  add_check_command(app, &c->check);
  add_engine_command(app, &c->engine);
  add_oracle_command(app, &c->oracle);
  add_constants_command(app, &c->constants);
  add_bench_subcommand(app, &c->bench);
}

}  // namespace posenc::tools
