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
expect(0 "${CASE}" list --scheme rope)
expect(0 "half_split: pair i" show ${CASE} --data "${DATA}")
expect(0 "Exit codes" --help)

# A correct engine passes; deliberate mistakes fail with exit 1 and name the worst element.
expect(0 "" engine ${CASE} --data "${DATA}" --out "${WORK}/good.safetensors")
expect(0 "verify: 1 passed, 0 failed" verify "${DATA}/rope/${CASE}.json" --actual "${WORK}/good.safetensors")
foreach(m pairing offset double-rotation sin-sign)
  expect(0 "" engine ${CASE} --data "${DATA}" --mistake ${m} --out "${WORK}/${m}.safetensors")
  expect(1 "FAIL.*worst=\\[token [0-9]+ \\(position [0-9]+\\)" verify "${DATA}/rope/${CASE}.json" --actual "${WORK}/${m}.safetensors")
endforeach()
# A float32-angle pipeline fails strict and passes the fp32-angles profile it claims.
expect(0 "" engine ${CASE} --data "${DATA}" --mistake fp32-angles --out "${WORK}/f32.safetensors")
expect(1 "FAIL" verify "${DATA}/rope/${CASE}.json" --actual "${WORK}/f32.safetensors")
expect(0 "PASS" verify "${DATA}/rope/${CASE}.json" --actual "${WORK}/f32.safetensors" --profile fp32-angles)
# JSON output and .npy directories.
expect(1 "\"status\": \"FAIL\"" verify "${DATA}/rope/${CASE}.json" --actual "${WORK}/pairing.safetensors" --format json)
expect(0 "" engine ${CASE} --data "${DATA}" --format npy --out "${WORK}/npy/${CASE}")
expect(0 "1 passed" verify "${DATA}/rope/${CASE}.json" --actual "${WORK}/npy")

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

# Sharded generation + catalog rebuild reproduces the committed catalog byte for byte.
expect(0 "" generate --shard 0/2 --no-catalog --out "${WORK}/gen")
expect(0 "" generate --shard 1/2 --no-catalog --out "${WORK}/gen")
expect(0 "" catalog --data "${WORK}/gen")
execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files "${WORK}/gen/catalog.json" "${DATA}/catalog.json"
                RESULT_VARIABLE same)
if(NOT same EQUAL 0)
  message(SEND_ERROR "sharded generation did not reproduce golden/data/catalog.json")
endif()
# A corrupted golden file is refused by check (exit 2), not silently used.
file(COPY "${WORK}/gen/" DESTINATION "${WORK}/corrupt")
file(APPEND "${WORK}/corrupt/rope/${CASE}.json" " ")
expect(2 "SHA-256 differs" check --data "${WORK}/corrupt" --case ${CASE})
