# End-to-end tests of the posenc program: exit codes, negative engines, bad files, sharded
# generation and catalog reproducibility. Run by ctest as
#   cmake -DPOSENC=<posenc> -DSRC=<source dir> -DWORK=<scratch dir> -P tools/cli_test.cmake
cmake_minimum_required(VERSION 3.25)
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")
set(DATA "${SRC}/golden/data")
set(CASE rope_half_d96_r24_b1e4_neox_20b_f32)
set(failures 0)

# expect(<exit code> <regex the output must match> <args...>)
function(expect code regex)
  execute_process(COMMAND "${POSENC}" ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE err)
  string(REPLACE ";" " " shown "${ARGN}")
  if(NOT rc STREQUAL "${code}")
    message(SEND_ERROR "posenc ${shown}: exit ${rc}, expected ${code}\n${out}\n${err}")
  elseif(NOT "${out}${err}" MATCHES "${regex}")
    message(SEND_ERROR "posenc ${shown}: output does not match '${regex}'\n${out}\n${err}")
  else()
    message(STATUS "ok: posenc ${shown} -> ${rc}")
  endif()
endfunction()

# The main job and the listing.
expect(0 "check: [0-9]+ passed, 0 failed" check --data "${DATA}")
expect(0 "check: [0-9]+ passed, 0 failed, [0-9]+ not applicable" check --data "${DATA}" --pipeline bf16 --scheme rope)
expect(0 "${CASE}" list --scheme rope)
expect(0 "half_split: pair i.*fp32-recurrence.*resolution" show ${CASE} --data "${DATA}")
expect(0 "Exit codes" --help)

# A correct engine passes; deliberate mistakes fail with exit 1 and name the worst element.
expect(0 "" engine ${CASE} --data "${DATA}" --out "${WORK}/good.safetensors")
expect(0 "verify: 1 checked: 1 passed, 0 failed" verify "${DATA}/rope/${CASE}.json" --actual "${WORK}/good.safetensors")
foreach(m pairing offset double-rotation sin-sign)
  expect(0 "" engine ${CASE} --data "${DATA}" --mistake ${m} --out "${WORK}/${m}.safetensors")
  expect(1 "FAIL.*worst=\\[token [0-9]+ \\(position [0-9]+\\).*what went wrong: posenc diagnose" verify "${DATA}/rope/${CASE}.json" --actual "${WORK}/${m}.safetensors")
  # ... and diagnose names the mistake (exit 1: the output is not correct).
  expect(1 "explained.*the rope mistake `${m}`" diagnose "${DATA}/rope/${CASE}.json" --actual "${WORK}/${m}.safetensors")
endforeach()
expect(0 "correct.*passes strict: nothing to diagnose" diagnose "${DATA}/rope/${CASE}.json" --actual "${WORK}/good.safetensors")
expect(0 "" engine ${CASE} --data "${DATA}" --pipeline fp32 --out "${WORK}/fp32.safetensors")
expect(1 "fp32 pipeline.*claim --profile fp32" diagnose "${DATA}/rope/${CASE}.json" --actual "${WORK}/fp32.safetensors")
expect(0 "\"verdict\": \"correct\"" diagnose "${DATA}/rope/${CASE}.json" --actual "${WORK}/fp32.safetensors" --profile fp32 --format json)
expect(2 "profile" diagnose "${DATA}/rope/${CASE}.json" --actual "${WORK}/fp32.safetensors" --profile fp64)
# diagnose's exit codes as its --help states them; 2 when only negative controls have output.
expect(0 "Exit codes: 0 every diagnosed case is correct.*1 at least one is not.*2 usage or input error" diagnose --help)
expect(2 "no valid case given has an engine output" diagnose "${DATA}/alibi/alibi_slopes_h12_naive_invalid_f32.json" --actual "${WORK}/good.safetensors")
# A scaled case with two attention factors says which one applies (show prints it).
expect(0 "attention_factor: scaling.derived.attention_factor \\([0-9.]+\\).*replaces params.attention_factor \\(1\\)" show rope_scaling_qwen2_5_7b_instruct_yarn_all_f32 --data "${DATA}")
# --report: the HTML page of diagnose and check (tools/browser_test.sh renders verify's in a
# browser); a page that cannot be written is exit 2 naming the path.
expect(1 "explained" diagnose "${DATA}/rope/${CASE}.json" --actual "${WORK}/offset.safetensors" --report "${WORK}/diagnose.html")
expect(1 "check: 0 passed, 1 failed" check --data "${DATA}" --case "^${CASE}$" --pipeline fp32 --profile strict --report "${WORK}/check.html")
foreach(page diagnose check)
  file(READ "${WORK}/${page}.html" html)
  if(NOT html MATCHES "<svg class=\"heat\"" OR NOT html MATCHES "diagnosis: explained")
    message(SEND_ERROR "${page} --report: the page has no heat map or no diagnosis")
  endif()
endforeach()
expect(2 "cannot create directory" verify "${DATA}/rope/${CASE}.json" --actual "${WORK}/good.safetensors" --report "${WORK}/check.html/x.html")
# KV-cache traces: a scheduler mistake fails at its step, named with position and slot (text
# and JSON); the correct engine passes the trace and its negative control.
set(KV kv_cache_rope_window8_ring_wrap_f32)
expect(0 "" engine ${KV} --data "${DATA}" --out "${WORK}/kv_good.safetensors")
expect(0 "trace: every checked step passes.*profile=fp32  PASS" verify "${DATA}/kv_cache/${KV}.json" --actual "${WORK}/kv_good.safetensors" --profile fp32)
expect(0 "" engine ${KV} --data "${DATA}" --mistake cache-length-position --out "${WORK}/kv_cl.safetensors")
expect(1 "first failing step: s04 \\(decode, step 4 of 8\\).*at position 9, slot 1 \\(the engine gave position 8\\)" verify "${DATA}/kv_cache/${KV}.json" --actual "${WORK}/kv_cl.safetensors")
expect(1 "\"first_failing_step\": 4" verify "${DATA}/kv_cache/${KV}.json" --actual "${WORK}/kv_cl.safetensors" --format json)
# Its diagnosis has hypotheses with an infinite residual (JSON null): the HTML page shows them.
expect(1 "explained" diagnose "${DATA}/kv_cache/${KV}.json" --actual "${WORK}/kv_cl.safetensors" --report "${WORK}/kv_diagnose.html")
expect(0 "" engine kv_cache_rope_window8_cache_length_invalid_f32 --data "${DATA}" --out "${WORK}/kv_neg.safetensors")
expect(0 "negative control: the output differs" verify "${DATA}/kv_cache/kv_cache_rope_window8_cache_length_invalid_f32.json" --actual "${WORK}/kv_neg.safetensors")
# A negative control given only stages that are the same under the right and the known-wrong
# convention (DeepSeek-V3's softmax factor without softmax_scale): INCONCLUSIVE, exit 3 alone.
set(SM rope_scaling_deepseek_v3_all_softmax_factor_missing_f32)
expect(0 "" engine ${SM} --data "${DATA}" --format npy --out "${WORK}/inconclusive/${SM}")
file(REMOVE "${WORK}/inconclusive/${SM}/softmax_scale.npy")
expect(3 "profile=strict  INCONCLUSIVE.*give one of: softmax_scale.*1 inconclusive" verify "${DATA}/rope_scaling/${SM}.json" --actual "${WORK}/inconclusive")
file(COPY_FILE "${WORK}/good.safetensors" "${WORK}/inconclusive/${CASE}.safetensors")
expect(0 "1 checked: 1 passed, 0 failed; 1 inconclusive" verify "${DATA}/rope_scaling/${SM}.json" "${DATA}/rope/${CASE}.json" --actual "${WORK}/inconclusive")
expect(2 "unknown mistake" engine ${KV} --data "${DATA}" --mistake typo --out "${WORK}/kv_typo.safetensors")
expect(2 "is a pipeline now: use --pipeline fp32" engine ${CASE} --data "${DATA}" --mistake fp32-angles --out "${WORK}/x.safetensors")
# The float32 pipelines fail strict and pass the profile they claim (fp32-angles is an alias).
expect(0 "" engine ${CASE} --data "${DATA}" --pipeline fp32 --out "${WORK}/f32.safetensors")
expect(1 "first_fail_position=[0-9]+ passes_up_to_position=" verify "${DATA}/rope/${CASE}.json" --actual "${WORK}/f32.safetensors")
expect(0 "profile=fp32  PASS" verify "${DATA}/rope/${CASE}.json" --actual "${WORK}/f32.safetensors" --profile fp32)
expect(0 "profile=fp32  PASS" verify "${DATA}/rope/${CASE}.json" --actual "${WORK}/f32.safetensors" --profile fp32-angles)
expect(0 "" engine ${CASE} --data "${DATA}" --pipeline fp32-recurrence --out "${WORK}/rec.safetensors")
expect(0 "PASS" verify "${DATA}/rope/${CASE}.json" --actual "${WORK}/rec.safetensors" --profile fp32-recurrence)
expect(2 "pipeline computes in bf16" engine ${CASE} --data "${DATA}" --pipeline bf16 --out "${WORK}/x.safetensors")
# Per-position answers: by position, with the positions where the budget admits any angle.
expect(0 "position 16777217 .*admit any angle" verify "${DATA}/rope/${CASE}.json" --actual "${WORK}/f32.safetensors" --profile fp32 --by-position)
expect(1 "\"first_fail_position\": [0-9]+" verify "${DATA}/rope/${CASE}.json" --actual "${WORK}/f32.safetensors" --format json)
expect(1 "skipped=" verify "${DATA}/rope/${CASE}.json" --actual "${WORK}/f32.safetensors" --max-position 0)
# A profile that does not apply says so; nothing checked is exit 2.
expect(2 "does not apply" verify "${DATA}/rope/${CASE}.json" --actual "${WORK}/good.safetensors" --profile bf16)
# JSON output and .npy directories.
expect(1 "\"status\": \"FAIL\"" verify "${DATA}/rope/${CASE}.json" --actual "${WORK}/pairing.safetensors" --format json)
expect(0 "" engine ${CASE} --data "${DATA}" --format npy --out "${WORK}/npy/${CASE}")
expect(0 "1 passed" verify "${DATA}/rope/${CASE}.json" --actual "${WORK}/npy")

# Part of a catalog: only the cases with output are judged; exit from them; a summary.
file(MAKE_DIRECTORY "${WORK}/partial")
file(COPY "${WORK}/offset.safetensors" DESTINATION "${WORK}/partial")
file(RENAME "${WORK}/partial/offset.safetensors" "${WORK}/partial/${CASE}.safetensors")
expect(1 "verify: 1 checked: 0 passed, 1 failed; [0-9]+ without output" verify "${DATA}" --actual "${WORK}/partial")
expect(2 "no engine output for this case" verify "${DATA}" --actual "${WORK}/partial" --require-all)
# Outputs that cannot see a bug class say so (scores alone cannot see a position offset).
expect(0 "" engine ${CASE} --data "${DATA}" --format npy --out "${WORK}/scores_only/${CASE}")
foreach(t inv_freq cos sin q_rot k_rot)
  file(REMOVE "${WORK}/scores_only/${CASE}/${t}.npy")
endforeach()
expect(0 "cannot detect PositionOffset" verify "${DATA}/rope/${CASE}.json" --actual "${WORK}/scores_only")
expect(2 "lacks stage.*q_rot" verify "${DATA}/rope/${CASE}.json" --actual "${WORK}/scores_only" --require-all)
# --map: renames must name tensors the engine file has and the cases expect.
expect(2 "has no tensor \"qq\"" verify "${DATA}/rope/${CASE}.json" --actual "${WORK}/good.safetensors" --map q_rot=qq)
expect(2 "no case given expects a tensor \"nothing\"" verify "${DATA}/rope/${CASE}.json" --actual "${WORK}/good.safetensors" --map nothing=q_rot)

# Bad input: exit 2 with a message, never a crash.
execute_process(COMMAND head -c 300 "${WORK}/good.safetensors" OUTPUT_FILE "${WORK}/truncated.safetensors")
expect(2 "truncated|header" verify "${DATA}/rope/${CASE}.json" --actual "${WORK}/truncated.safetensors")
file(WRITE "${WORK}/garbage.safetensors" "this is not a safetensors file at all")
expect(2 "garbage.safetensors" verify "${DATA}/rope/${CASE}.json" --actual "${WORK}/garbage.safetensors")
file(WRITE "${WORK}/bad.json" "{ \"schema\": \"posenc-golden\", ")
expect(2 "bad.json: invalid JSON" verify "${WORK}/bad.json" --actual "${WORK}/good.safetensors")
expect(2 "no such" verify "${WORK}/missing.json" --actual "${WORK}/good.safetensors")
expect(2 "profile must be one of" verify "${DATA}/rope/${CASE}.json" --actual "${WORK}/good.safetensors" --profile loose)
expect(2 "shard" generate --shard 3/2 --out "${WORK}/x")
expect(2 "no case" show no_such_case --data "${DATA}")
expect(2 "unknown mistake" engine ${CASE} --data "${DATA}" --mistake typo --out "${WORK}/typo.safetensors")
# Wrong dtype: a bf16 case answered with f32 tensors.
set(BF16CASE rope_half_d96_r24_b1e4_neox_20b_bf16)
expect(2 "dtype is f32, the case expects bf16" verify "${DATA}/rope/${BF16CASE}.json" --actual "${WORK}/good.safetensors")
# A manifest may not name a tensor file outside its folder, nor an unknown scheme.
file(READ "${DATA}/rope/${CASE}.json" manifest)
string(REPLACE "\"tensors_file\": \"${CASE}.safetensors\"" "\"tensors_file\": \"../../etc/passwd\"" escaping "${manifest}")
file(WRITE "${WORK}/escape/${CASE}.json" "${escaping}")
expect(2 "tensors_file.*plain file name" verify "${WORK}/escape/${CASE}.json" --actual "${WORK}/good.safetensors")
string(REPLACE "\"scheme\": \"rope\"" "\"scheme\": \"ropes\"" unknown "${manifest}")
file(WRITE "${WORK}/unknown/${CASE}.json" "${unknown}")
file(COPY "${DATA}/rope/${CASE}.safetensors" DESTINATION "${WORK}/unknown")
expect(2 "scheme must be one of" verify "${WORK}/unknown/${CASE}.json" --actual "${WORK}/good.safetensors")

# Sharded generation + catalog rebuild reproduces the committed catalog byte for byte.
expect(0 "" generate --shard 0/2 --no-catalog --out "${WORK}/gen")
expect(0 "" generate --shard 1/2 --no-catalog --out "${WORK}/gen")
expect(0 "" catalog --data "${WORK}/gen")
execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files "${WORK}/gen/catalog.json" "${DATA}/catalog.json"
                RESULT_VARIABLE same)
if(NOT same EQUAL 0)
  message(SEND_ERROR "sharded generation did not reproduce golden/data/catalog.json")
endif()
if(EXISTS "${WORK}/gen/.posenc-shards")
  message(SEND_ERROR "the merge left the shard records in ${WORK}/gen/.posenc-shards")
endif()

# Shards balanced by cost (`list [--level 2] --shard i/n --format json` gives each case's
# estimated cost): check_shards(<max %> <list options>) checks, for n = 2, 4, 8, that the shards
# are disjoint, that their union is `list <options>`, that the heaviest exceeds the lightest by at
# most the costliest case (what greedy assignment to the lightest keeps; round robin breaks it at
# n = 8) and that the heaviest is within <max %> of the mean.
function(check_shards max_pct)
  execute_process(COMMAND "${POSENC}" list ${ARGN} --format json OUTPUT_VARIABLE all_json RESULT_VARIABLE rc)
  string(JSON all_n LENGTH "${all_json}")
  set(all_ids "")
  set(top 0)
  set(total 0)
  math(EXPR last "${all_n} - 1")
  foreach(k RANGE ${last})
    string(JSON id GET "${all_json}" ${k} id)
    string(JSON cost GET "${all_json}" ${k} cost)
    list(APPEND all_ids "${id}")
    math(EXPR total "${total} + ${cost}")
    if(cost GREATER top)
      set(top ${cost})
    endif()
  endforeach()
  list(SORT all_ids)
  string(REPLACE ";" " " shown "${ARGN}")
  string(STRIP "list ${shown}" shown)
  foreach(n 2 4 8)
    set(ids "")
    set(loads "")
    math(EXPR n1 "${n} - 1")
    foreach(i RANGE ${n1})
      execute_process(COMMAND "${POSENC}" list ${ARGN} --shard ${i}/${n} --format json OUTPUT_VARIABLE js)
      string(JSON m LENGTH "${js}")
      set(load 0)
      if(m GREATER 0)
        math(EXPR mlast "${m} - 1")
        foreach(k RANGE ${mlast})
          string(JSON id GET "${js}" ${k} id)
          string(JSON cost GET "${js}" ${k} cost)
          list(APPEND ids "${id}")
          math(EXPR load "${load} + ${cost}")
        endforeach()
      endif()
      list(APPEND loads ${load})
    endforeach()
    list(SORT ids)
    if(NOT ids STREQUAL all_ids)
      message(SEND_ERROR "the ${n} shards of ${shown} --shard i/${n} are not a partition of its cases")
    endif()
    list(SORT loads COMPARE NATURAL)
    list(GET loads 0 lightest)
    list(GET loads -1 heaviest)
    math(EXPR spread "${heaviest} - ${lightest}")
    math(EXPR ratio_pct "100 * ${heaviest} * ${n} / ${total}")  # heaviest / mean, in %
    if(spread GREATER top OR ratio_pct GREATER max_pct)
      message(SEND_ERROR "${shown}: ${n} shards unbalanced: loads ${loads}, spread ${spread} (costliest case ${top}), heaviest ${ratio_pct} % of the mean (at most ${max_pct} %)")
    else()
      message(STATUS "ok: ${shown}: ${n} shards, estimated loads ${loads} (costliest case ${top}; heaviest ${ratio_pct} % of the mean)")
    endif()
  endforeach()
endfunction()
check_shards(105)
# Level 2 over every preset (204 cases, estimated from their shapes: rope_case_estimate).
check_shards(105 --level 2)

# The merge refuses a batch whose shards did not all run (exit 2, naming the shard and the
# command that reruns it; no catalog.json); the shard rerun alone completes it, and the folder
# is then the one-process run's.
expect(0 "" generate --scheme learned --out "${WORK}/learned_one")
expect(0 "" generate --scheme learned --shard 0/3 --no-catalog --out "${WORK}/learned_sharded")
expect(0 "" generate --scheme learned --shard 2/3 --no-catalog --out "${WORK}/learned_sharded")
expect(2 "incomplete, no catalog.json written.*shard 1/3 of `generate --scheme learned`.*posenc generate --scheme learned --shard 1/3 --no-catalog"
       catalog --data "${WORK}/learned_sharded")
if(EXISTS "${WORK}/learned_sharded/catalog.json")
  message(SEND_ERROR "a refused merge wrote ${WORK}/learned_sharded/catalog.json")
endif()
# verify of the folder before the merge reads its cases, not the shard records beside them.
file(GLOB shard_manifests "${WORK}/learned_sharded/learned/*.json")
foreach(m ${shard_manifests})
  get_filename_component(id "${m}" NAME_WE)
  execute_process(COMMAND "${POSENC}" engine "${m}" --out "${WORK}/learned_out/${id}.safetensors"
                  OUTPUT_QUIET ERROR_QUIET)
endforeach()
expect(0 "verify: 3 checked: 3 passed, 0 failed" verify "${WORK}/learned_sharded" --actual "${WORK}/learned_out")
expect(0 "" generate --scheme learned --shard 1/3 --no-catalog --out "${WORK}/learned_sharded")
expect(0 "catalog: 6 cases" catalog --data "${WORK}/learned_sharded")
execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files "${WORK}/learned_sharded/catalog.json"
                        "${WORK}/learned_one/catalog.json" RESULT_VARIABLE same)
if(NOT same EQUAL 0 OR EXISTS "${WORK}/learned_sharded/.posenc-shards")
  message(SEND_ERROR "3 learned shards + merge differ from one generate (or left their records)")
endif()
# A shard record that is not one (or of an unknown level) is refused, naming the file.
file(WRITE "${WORK}/bad_record/.posenc-shards/x-0-of-2.json" "{\"schema\": \"posenc-shard\", \"level\": 3, \"shard\": \"0/2\", \"options\": [], \"cases\": []}")
expect(2 "x-0-of-2.json: \"level\" is 3" catalog --data "${WORK}/bad_record")
# A record without its case list, or with a case of a shard out of range.
file(WRITE "${WORK}/bad_record2/.posenc-shards/x-0-of-2.json" "{\"schema\": \"posenc-shard\", \"level\": 2, \"shard\": \"0/2\", \"options\": [\"--level\", \"2\"]}")
expect(2 "x-0-of-2.json: not a shard record of posenc: \"cases\" must be an array" catalog --data "${WORK}/bad_record2")
file(WRITE "${WORK}/bad_record3/.posenc-shards/x-0-of-2.json" "{\"schema\": \"posenc-shard\", \"level\": 2, \"shard\": \"0/2\", \"options\": [], \"cases\": [[\"rope\", \"a\", 2]]}")
expect(2 "x-0-of-2.json: not a shard record of posenc: each of \"cases\" must be \\[scheme, id, shard\\] with 0 <= shard < 2" catalog --data "${WORK}/bad_record3")
# A corrupted golden file is refused by check and by verify of the catalog (exit 2).
file(COPY "${WORK}/gen/" DESTINATION "${WORK}/corrupt")
file(APPEND "${WORK}/corrupt/rope/${CASE}.json" " ")
expect(2 "SHA-256 differs" check --data "${WORK}/corrupt" --case ${CASE})
expect(2 "SHA-256 differs from catalog.json" verify "${WORK}/corrupt" --actual "${WORK}/partial")
# A catalog listing a case twice is refused.
file(READ "${WORK}/gen/catalog.json" catalog)
string(REGEX MATCH "  {\n   \"id\": \"${CASE}\"[^}]*}" entry "${catalog}")
string(REPLACE "\"cases\": [\n" "\"cases\": [\n${entry},\n" twice "${catalog}")
file(WRITE "${WORK}/twice/catalog.json" "${twice}")
expect(2 "listed twice" verify "${WORK}/twice" --actual "${WORK}/partial")

# Golden cases for the user's own model: every committed preset through --config, checked by
# posenc's kernels; the scaled presets' files are byte-identical to the catalog's (one code path;
# except DeepSeek-V2's, whose catalog cases also declare DeepSeek's own code as an alternative,
# which the HF config cannot tell).
file(GLOB presets "${SRC}/golden/presets/*.json")
foreach(p IN LISTS presets)
  expect(0 "generated [0-9]+ cases" generate --config "${p}" --out "${WORK}/models")
endforeach()
expect(0 "check: [0-9]+ passed, 0 failed; worst" check --data "${WORK}/models")
expect(0 "check: [0-9]+ passed, 0 failed; worst" check --data "${WORK}/models" --pipeline fp32)
file(GLOB from_config RELATIVE "${WORK}/models/rope_scaling" "${WORK}/models/rope_scaling/*")
set(identical 0)
foreach(f IN LISTS from_config)
  if(EXISTS "${DATA}/rope_scaling/${f}" AND NOT f MATCHES "^rope_scaling_deepseek_v2_all_")
    execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files "${WORK}/models/rope_scaling/${f}"
                            "${DATA}/rope_scaling/${f}" RESULT_VARIABLE differ)
    if(differ)
      message(SEND_ERROR "generate --config wrote ${f} unlike the catalog's")
    endif()
    math(EXPR identical "${identical} + 1")
  endif()
endforeach()
if(identical LESS 28)
  message(SEND_ERROR "only ${identical} files of --config output are also in the catalog")
endif()
# A config written by hand: HF v5 keys (rope_parameters), YaRN, partial rotary, given positions,
# bf16; posenc's engine passes, an engine that forgets the scaling fails.
file(WRITE "${WORK}/mine/config.json" [=[{
  "_name_or_path": "my-org/tiny-yarn", "model_type": "qwen2", "hidden_size": 256,
  "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 32768,
  "partial_rotary_factor": 0.5,
  "rope_parameters": {"rope_type": "yarn", "rope_theta": 1000000.0, "factor": 4.0,
                      "original_max_position_embeddings": 8192}
}]=])
expect(0 "rotary_dim 32.*rule yarn.*given: 9 positions up to 32767" generate --config "${WORK}/mine/config.json"
       --positions 0-3,8191,8192,16000,32766,32767 --dtype bf16 --out "${WORK}/mine/out")
expect(0 "check: 1 passed, 0 failed" check --data "${WORK}/mine/out")
expect(0 "check: 1 passed, 0 failed" check --data "${WORK}/mine/out" --pipeline bf16)
# The case name: the basename of _name_or_path and the first 8 hex digits of the config's SHA-256.
file(SHA256 "${WORK}/mine/config.json" mine_hash)
string(SUBSTRING "${mine_hash}" 0 8 mine_hash)
set(MINE rope_scaling_tiny_yarn_${mine_hash}_given_bf16)
expect(0 "" engine ${MINE} --data "${WORK}/mine/out" --out "${WORK}/mine/good.safetensors")
expect(0 "1 passed" verify "${WORK}/mine/out" --actual "${WORK}/mine/good.safetensors")
expect(0 "" engine ${MINE} --data "${WORK}/mine/out" --mistake unscaled --out "${WORK}/mine/${MINE}.safetensors")
expect(1 "0 passed, 1 failed" verify "${WORK}/mine/out" --actual "${WORK}/mine")
# A vision-language config with the user's own prompt layout (--layout): posenc's engine passes
# under strict and fp32, an engine that drops rope_deltas fails, and diagnose names the mistake.
file(WRITE "${WORK}/vl/layout.json" [=[{"spans": [{"type": "text", "tokens": 4},
  {"type": "image", "grid_thw": [1, 4, 4]}, {"type": "text", "tokens": 2},
  {"type": "video", "grid_thw": [2, 4, 4], "second_per_grid": 0.5}, {"type": "text", "tokens": 2}],
  "decode": 2}]=])
file(SHA256 "${WORK}/vl/layout.json" vl_hash)
string(SUBSTRING "${vl_hash}" 0 8 vl_hash)
set(VL mrope_qwen2_5_vl_7b_instruct_layout_${vl_hash}_f32)
expect(0 "layout_${vl_hash}: 22 tokens" generate --config "${SRC}/golden/presets/qwen2.5-vl-7b-instruct.json"
       --layout "${WORK}/vl/layout.json" --out "${WORK}/vl/out")
expect(0 "check: 1 passed, 0 failed" check --data "${WORK}/vl/out")
expect(0 "check: 1 passed, 0 failed" check --data "${WORK}/vl/out" --pipeline fp32)
expect(0 "" engine ${VL} --data "${WORK}/vl/out" --pipeline fp32 --mistake no-rope-deltas --out "${WORK}/vl/bad.safetensors")
expect(1 "FAIL" verify "${WORK}/vl/out/mrope/${VL}.json" --actual "${WORK}/vl/bad.safetensors" --profile fp32)
expect(1 "explained.*`no-rope-deltas`" diagnose "${WORK}/vl/out/mrope/${VL}.json" --actual "${WORK}/vl/bad.safetensors"
       --profile fp32)
# A model with several layer types (Gemma 3 4B: 29 sliding layers, 5 global): one case per type and
# plan.json; verify PLAN names each type's layers, and a failure the layers it affects.
set(PL plan_gemma_3_4b_it)
expect(0 "plan: .*plan.json \\(34 layers" generate --config "${SRC}/golden/presets/gemma-3-4b-it.json" --out "${WORK}/plan/out")
foreach(t sliding_attention full_attention)
  expect(0 "" engine ${PL}_${t}_f32 --data "${WORK}/plan/out" --pipeline fp32 --out "${WORK}/plan/good/${PL}_${t}_f32.safetensors")
endforeach()
expect(0 "sliding_attention  PASS: layers 0-4, 6-10, 12-16, 18-22, 24-28, 30-33.*full_attention     PASS: layers 5, 11, 17, 23, 29.*PASS, every layer"
       verify "${WORK}/plan/out/plan.json" --actual "${WORK}/plan/good" --profile fp32)
file(COPY "${WORK}/plan/good/${PL}_full_attention_f32.safetensors" DESTINATION "${WORK}/plan/bad")
expect(0 "" engine ${PL}_sliding_attention_f32 --data "${WORK}/plan/out" --pipeline fp32 --mistake global-rope-on-sliding
       --out "${WORK}/plan/bad/${PL}_sliding_attention_f32.safetensors")
expect(1 "sliding_attention  FAIL: layers 0-4, 6-10, 12-16, 18-22, 24-28, 30-33 \\(29 layers.*full_attention     PASS.*29 of 34 layers affected"
       verify "${WORK}/plan/out/plan.json" --actual "${WORK}/plan/bad" --profile fp32)
expect(1 "explained.*`global-rope-on-sliding`.*layer type sliding_attention of gemma_3_4b_it: layers 0-4"
       diagnose "${WORK}/plan/out/plan.json" --actual "${WORK}/plan/bad" --profile fp32)
file(WRITE "${WORK}/plan/broken.json" [=[{"schema": "posenc-plan", "version": 2, "model": "m", "n_layers": 2,
  "types": [{"name": "a", "case": "plan_x", "manifest": "plan/plan_x.json", "manifest_sha256": "",
  "tensors": "plan/plan_x.safetensors", "tensors_sha256": "", "layers": [0], "type": {}}], "layers": []}]=])
expect(2 "broken.json: types: layer 1 has no type" verify "${WORK}/plan/broken.json" --actual "${WORK}/plan/good")
# Bad configs and options: exit 2, naming the file and the key.
file(WRITE "${WORK}/bad/unknown_key.json" [=[{"num_attention_heads": 4, "hidden_size": 256,
  "rope_scaling": {"rope_type": "linear", "factor": 2.0, "low_freq_factor": 1.0}}]=])
expect(2 "unknown_key.json: \"rope_scaling\" of type linear has unknown key \"low_freq_factor\""
       generate --config "${WORK}/bad/unknown_key.json" --out "${WORK}/bad/out")
file(WRITE "${WORK}/bad/odd.json" [=[{"num_attention_heads": 4, "head_dim": 64, "rotary_dim": 33}]=])
expect(2 "odd.json: rotary_dim = 33: must be an even integer" generate --config "${WORK}/bad/odd.json" --out "${WORK}/bad/out")
expect(2 "missing.json: cannot open: No such file" generate --config "${WORK}/bad/missing.json" --out "${WORK}/bad/out")
if(EXISTS "${WORK}/bad/out")
  message(SEND_ERROR "a refused config left files in ${WORK}/bad/out")
endif()
expect(2 "needs --out" generate --config "${WORK}/mine/config.json")
expect(2 "--positions: bad entry \"x\"" generate --config "${WORK}/mine/config.json" --positions 1,x --out "${WORK}/bad/out")
expect(2 "--positions: range \"9-3\" ends before it starts" generate --config "${WORK}/mine/config.json" --positions 9-3 --out "${WORK}/bad/out")
# More than 2048 positions: level-2 cases (tables-only calls of 8192 positions, each holding the
# last one, and a full case at 48 sampled positions), which posenc's own engine passes.
expect(0 "given_000008192_f32 \\(given_000008192: 1809 positions up to 20000\\).*given_sampled: 48 positions"
       generate --config "${WORK}/mine/config.json" --positions 0-9999,20000 --out "${WORK}/given")
expect(0 "check: 3 passed, 0 failed" check --data "${WORK}/given")
# generate --level 2 of one small preset (its windows and its first sweep call): posenc's engine
# passes them, its offset mistake fails.
expect(0 "generated 2 level-2 cases" generate --level 2 --config "${SRC}/golden/presets/llama-2-7b.json"
       --case "_l2_(windows|sweep_000000000)_" --out "${WORK}/l2")
expect(0 "check: 2 passed, 0 failed" check --data "${WORK}/l2")
expect(0 "" engine rope_llama_2_7b_l2_windows_f32 --data "${WORK}/l2" --mistake offset --out "${WORK}/l2_offset.safetensors")
expect(1 "rope_llama_2_7b_l2_windows_f32  profile=strict  FAIL" verify "${WORK}/l2/rope/rope_llama_2_7b_l2_windows_f32.json"
       --actual "${WORK}/l2_offset.safetensors")
# generate --level 2 --shard i/n: each shard writes exactly the cases `list --level 2 --shard i/n`
# names (balanced by estimated cost), and the shards merged by `posenc catalog` are the
# one-process run, file for file (Code Llama: two sweep calls, the windows, the sampled case).
set(L2CFG "${SRC}/golden/presets/codellama-7b-hf.json")
expect(0 "generated 4 level-2 cases" generate --level 2 --config "${L2CFG}" --out "${WORK}/l2_one")
file(GLOB_RECURSE one_files RELATIVE "${WORK}/l2_one" "${WORK}/l2_one/*")
list(FILTER one_files EXCLUDE REGEX "^\\.posenc\\.lock$")  # the folder's lock (bad-input.md)
foreach(n 2 3)
  math(EXPR n1 "${n} - 1")
  foreach(i RANGE ${n1})
    set(dir "${WORK}/l2_shard_${n}_${i}")
    expect(0 "shard ${i}/${n}, balanced by estimated cost" generate --level 2 --config "${L2CFG}" --shard ${i}/${n} --no-catalog --out "${dir}")
    execute_process(COMMAND "${POSENC}" list --level 2 --config "${L2CFG}" --shard ${i}/${n} --format json OUTPUT_VARIABLE js)
    string(JSON m LENGTH "${js}")
    set(listed "")
    math(EXPR mlast "${m} - 1")
    foreach(k RANGE ${mlast})
      string(JSON id GET "${js}" ${k} id)
      string(JSON scheme GET "${js}" ${k} scheme)
      list(APPEND listed "${scheme}/${id}.json" "${scheme}/${id}.safetensors")
    endforeach()
    list(SORT listed)
    file(GLOB_RECURSE written RELATIVE "${dir}" "${dir}/*")
    list(FILTER written EXCLUDE REGEX "^\\.posenc\\.lock$")
    list(FILTER written EXCLUDE REGEX "^\\.posenc-shards/")  # the shard's record (below)
    list(SORT written)
    if(NOT written STREQUAL listed)
      message(SEND_ERROR "level-2 shard ${i}/${n} wrote ${written}, listed ${listed}")
    endif()
    file(COPY "${dir}/" DESTINATION "${WORK}/l2_merged_${n}")
  endforeach()
  expect(0 "catalog: 4 cases" catalog --data "${WORK}/l2_merged_${n}")
  if(EXISTS "${WORK}/l2_merged_${n}/.posenc-shards")
    message(SEND_ERROR "catalog left the level-2 shard records in ${WORK}/l2_merged_${n}")
  endif()
  file(GLOB_RECURSE merged_files RELATIVE "${WORK}/l2_merged_${n}" "${WORK}/l2_merged_${n}/*")
  list(FILTER merged_files EXCLUDE REGEX "^\\.posenc\\.lock$")
  if(NOT merged_files STREQUAL one_files)
    message(SEND_ERROR "${n} level-2 shards merged hold ${merged_files}, one run ${one_files}")
  endif()
  foreach(f ${one_files})
    file(SHA256 "${WORK}/l2_one/${f}" h1)
    file(SHA256 "${WORK}/l2_merged_${n}/${f}" h2)
    if(NOT h1 STREQUAL h2)
      message(SEND_ERROR "${n} level-2 shards merged: ${f} differs from the one-process run")
    endif()
  endforeach()
endforeach()
# A level-2 batch with a shard missing (each shard recorded the whole run's cases): catalog
# refuses it naming the shard and the command that reruns it; no catalog.json is written.
foreach(i 0 2)
  file(COPY "${WORK}/l2_shard_3_${i}/" DESTINATION "${WORK}/l2_partial")
endforeach()
expect(2 "incomplete, no catalog.json written.*shard 1/3 of `generate --level 2 --config [^ ]*codellama-7b-hf.json`.*posenc generate --level 2 --config [^ ]*codellama-7b-hf.json --shard 1/3 --no-catalog"
       catalog --data "${WORK}/l2_partial")
if(EXISTS "${WORK}/l2_partial/catalog.json")
  message(SEND_ERROR "a refused level-2 merge wrote ${WORK}/l2_partial/catalog.json")
endif()
expect(2 "--dtype must be f32, bf16 or f16" generate --config "${WORK}/mine/config.json" --dtype f64 --out "${WORK}/bad/out")
expect(2 "need --config" generate --positions 1,2 --out "${WORK}/bad/out")
