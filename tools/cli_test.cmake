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
  expect(1 "FAIL.*worst=\\[token [0-9]+ \\(position [0-9]+\\)" verify "${DATA}/rope/${CASE}.json" --actual "${WORK}/${m}.safetensors")
endforeach()
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
