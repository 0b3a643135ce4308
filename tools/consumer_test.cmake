# The installed package used out of tree: installs the build tree BUILD into PREFIX, configures
# examples/consumer against it (find_package(posenc), GoogleTest helper golden/gtest.hpp), builds
# it and runs its test. Run by ctest as
#   cmake -DBUILD=<build dir> -DSRC=<source dir> -DWORK=<scratch dir> -DPREFIX=<install prefix>
#         [-DCXX=<C++ compiler>] -P tools/consumer_test.cmake
cmake_minimum_required(VERSION 3.25)
foreach(v BUILD SRC WORK PREFIX)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "consumer_test.cmake: -D${v}=... is required")
  endif()
endforeach()
file(REMOVE_RECURSE "${WORK}" "${PREFIX}")
file(MAKE_DIRECTORY "${WORK}")

# step(<name> <command...>): runs it; a failure stops the test with the step's output.
function(step name)
  string(TIMESTAMP t0 "%s")
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  string(TIMESTAMP t1 "%s")
  math(EXPR dt "${t1} - ${t0}")
  string(REPLACE ";" " " shown "${ARGN}")
  if(NOT rc STREQUAL "0")
    message(FATAL_ERROR "consumer test: step '${name}' failed (exit ${rc}): ${shown}\n${out}\n${err}")
  endif()
  message(STATUS "ok (${dt} s): ${name}")
  set(STEP_OUTPUT "${out}${err}" PARENT_SCOPE)
endfunction()

step("install the build into ${PREFIX}" "${CMAKE_COMMAND}" --install "${BUILD}" --prefix "${PREFIX}")
foreach(f lib/cmake/posenc/posencConfig.cmake lib/cmake/posenc/posencConfigVersion.cmake
          lib/cmake/posenc/posencTargets.cmake include/posenc/golden/verify/verify.hpp
          include/posenc/golden/gtest.hpp include/posenc/reference/rope.hpp
          include/posenc/check/rope.hpp
          share/posenc/data/catalog.json share/posenc/presets)
  if(NOT EXISTS "${PREFIX}/${f}")
    message(FATAL_ERROR "consumer test: the install lacks ${PREFIX}/${f}")
  endif()
endforeach()
file(GLOB_RECURSE stray RELATIVE "${PREFIX}/include/posenc" "${PREFIX}/include/posenc/*")
list(FILTER stray EXCLUDE REGEX "\\.hpp$")
if(stray)
  message(FATAL_ERROR "consumer test: non-header files installed under include/posenc: ${stray}")
endif()

set(compiler)
if(CXX)
  set(compiler "-DCMAKE_CXX_COMPILER=${CXX}")
endif()
step("configure examples/consumer" "${CMAKE_COMMAND}" -S "${SRC}/examples/consumer"
     -B "${WORK}/build" -G Ninja -DCMAKE_BUILD_TYPE=Release "-DCMAKE_PREFIX_PATH=${PREFIX}"
     ${compiler})
step("build examples/consumer" "${CMAKE_COMMAND}" --build "${WORK}/build")
# Run from the installed catalog (POSENC_DATA), not from the source tree.
step("run the consumer test" "${CMAKE_COMMAND}" -E env "POSENC_DATA=${PREFIX}/share/posenc/data"
     "${WORK}/build/rope_consumer_test")
if(NOT STEP_OUTPUT MATCHES "\\[  PASSED  \\] 7 tests")
  message(FATAL_ERROR "consumer test: expected 7 passing tests (3 golden, 4 properties)\n${STEP_OUTPUT}")
endif()
message(STATUS "consumer test passed")
