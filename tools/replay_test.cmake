# replay.learned: a property failure replays from what RapidCheck prints. Runs one property of a
# mutant binary with a mutant that makes it fail, then (1) again with the printed seed: the same
# run, counterexample and shrink count included; (2) with the printed RC_PARAMS="reproduce=...":
# the same counterexample at once. Run by ctest as
#   cmake -DBIN=<posenc_learned_test_mutant> -DMUTANT=<name> -DTEST=<Suite.Name> -DSEED=<seed>
#         -P tools/replay_test.cmake
cmake_minimum_required(VERSION 3.25)

# run(<out var> <RC_PARAMS>): the binary's output for the one property.
function(run out params)
  execute_process(COMMAND ${CMAKE_COMMAND} -E env POSENC_MUTANT=${MUTANT} "RC_PARAMS=${params}"
                          ${BIN} --gtest_filter=${TEST}
                  OUTPUT_VARIABLE o ERROR_VARIABLE e)
  set(${out} "${o}${e}" PARENT_SCOPE)
endfunction()

# failure(<out var> <text> <from>): the failure report from the line "Falsifiable after" (from =
# "Falsifiable", with the counts of tests and shrinks) or from the line after it (from = "case":
# the counterexample alone) up to gtest's "[  FAILED  ]"; fails the test when there is none.
function(failure out text from)
  string(FIND "${text}" "Falsifiable after" b)
  string(FIND "${text}" "[  FAILED  ]" e)
  if(b EQUAL -1 OR e EQUAL -1 OR e LESS b)
    message(FATAL_ERROR "${TEST} did not fail with mutant ${MUTANT}:\n${text}")
  endif()
  if(from STREQUAL "case")
    string(SUBSTRING "${text}" ${b} -1 rest)
    string(FIND "${rest}" "\n" nl)
    math(EXPR b "${b} + ${nl}")
  endif()
  math(EXPR n "${e} - ${b}")
  string(SUBSTRING "${text}" ${b} ${n} f)
  set(${out} "${f}" PARENT_SCOPE)
endfunction()

run(first "seed=${SEED}")
if(NOT first MATCHES "Using configuration: seed=([0-9]+)")
  message(FATAL_ERROR "no printed seed:\n${first}")
endif()
set(printed_seed ${CMAKE_MATCH_1})
if(NOT first MATCHES "RC_PARAMS=\"reproduce=([A-Za-z0-9_+/=-]+)\"")
  message(FATAL_ERROR "no printed reproduce string:\n${first}")
endif()
set(reproduce ${CMAKE_MATCH_1})
failure(want "${first}" Falsifiable)
failure(want_case "${first}" case)

run(again "seed=${printed_seed}")
failure(got "${again}" Falsifiable)
if(NOT got STREQUAL want)
  message(FATAL_ERROR "seed=${printed_seed} does not replay the run:\n--- first\n${want}\n--- replay\n${got}")
endif()
run(replayed "reproduce=${reproduce}")
failure(got_case "${replayed}" case)
if(NOT got_case STREQUAL want_case)
  message(FATAL_ERROR "reproduce= does not give the counterexample:\n--- first\n${want_case}\n--- replay\n${got_case}")
endif()
message(STATUS "${TEST} with ${MUTANT}: seed=${printed_seed} and reproduce= replay the counterexample")
