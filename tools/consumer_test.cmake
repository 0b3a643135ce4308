# The installed package used out of tree: installs the build tree BUILD into PREFIX, then builds
# examples/consumer against it twice:
#   verify-only  find_package(posenc COMPONENTS verify) with Boost and Eigen3 made unfindable
#                (CMAKE_DISABLE_FIND_PACKAGE_*) and pkg-config looking in an empty folder (no
#                mpfr.pc, gmp.pc); builds rope_consumer_test (golden/gtest.hpp on a committed
#                case) and proves it holds posenc::verify alone: its link line (CMake's
#                link.txt) names libposenc_verify.a and no posenc_golden, posenc_optimized, MPFR
#                or GMP; its binary needs no libmpfr or libgmp (readelf -d) and refers to no mpfr_ or gmp
#                symbol (nm -u); then runs it (3 tests), and on a Gemma 2 plan.json the installed
#                posenc generates: the plan read, each type's case and every layer verified
#                (3 tests).
#   full         find_package(posenc COMPONENTS golden): rope_property_test (check/rope.hpp on
#                posenc::golden), run (4 tests).
# Run by ctest as
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
          lib/cmake/posenc/posencTargets.cmake lib/cmake/posenc/posencVerifyTargets.cmake
          include/posenc/golden/verify/verify.hpp
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
set(run_env "${CMAKE_COMMAND}" -E env "POSENC_DATA=${PREFIX}/share/posenc/data")

# ---- verify-only: posenc::verify alone --------------------------------------------------------
set(vb "${WORK}/verify")
# Makefiles (not Ninja): the link line is then CMake's link.txt, read below.
# pkg-config looks in an empty folder only (it finds no mpfr.pc, gmp.pc; FindOpenSSL falls back
# to its plain search), Boost and Eigen3 are unfindable: the verify component must not need them.
file(MAKE_DIRECTORY "${WORK}/no_pkgconfig")
step("configure examples/consumer, verify only, without MPFR, GMP, Boost, Eigen3"
     "${CMAKE_COMMAND}" -E env "PKG_CONFIG_LIBDIR=${WORK}/no_pkgconfig" --unset=PKG_CONFIG_PATH
     "${CMAKE_COMMAND}" -S "${SRC}/examples/consumer" -B "${vb}" -G "Unix Makefiles"
     -DCMAKE_BUILD_TYPE=Release "-DCMAKE_PREFIX_PATH=${PREFIX}" -DPOSENC_CONSUMER_PROPERTIES=OFF
     -DCMAKE_DISABLE_FIND_PACKAGE_Boost=ON -DCMAKE_DISABLE_FIND_PACKAGE_Eigen3=ON ${compiler})
step("build rope_consumer_test" "${CMAKE_COMMAND}" --build "${vb}")
set(bin "${vb}/rope_consumer_test")

file(READ "${vb}/CMakeFiles/rope_consumer_test.dir/link.txt" link)
string(STRIP "${link}" link)
if(NOT link MATCHES "libposenc_verify\\.a")
  message(FATAL_ERROR
          "consumer test: rope_consumer_test's link line lacks libposenc_verify.a:\n${link}")
endif()
string(REGEX MATCHALL "[^ ]*(posenc_golden|posenc_optimized|mpfr|gmp|boost)[^ ]*" bad "${link}")
if(bad)
  message(FATAL_ERROR "consumer test: the verify-only consumer's link line names ${bad}:\n${link}")
endif()
string(REGEX MATCHALL "lib(posenc|ssl|crypto|gomp|gtest)[^ /]*" named "${link}")
list(REMOVE_DUPLICATES named)
message(STATUS "link.txt of rope_consumer_test names: ${named}; "
               "no posenc_golden, posenc_optimized, mpfr, gmp")

find_program(READELF readelf REQUIRED)
step("readelf -d rope_consumer_test" "${READELF}" -d "${bin}")
string(REGEX MATCHALL "Shared library: \\[[^]]*\\]" needed "${STEP_OUTPUT}")
string(REGEX REPLACE "Shared library: \\[([^]]*)\\]" "\\1" needed "${needed}")
if(needed MATCHES "mpfr|gmp")
  message(FATAL_ERROR "consumer test: the verify-only consumer needs ${needed}")
endif()
message(STATUS "readelf -d rope_consumer_test NEEDED: ${needed}; no libmpfr, libgmp")
find_program(NM nm REQUIRED)
step("nm -u rope_consumer_test" "${NM}" -u "${bin}")
string(REGEX MATCHALL "[^ \n]*(mpfr_|__gmp)[^ \n]*" syms "${STEP_OUTPUT}")
if(syms)
  message(FATAL_ERROR "consumer test: the verify-only consumer refers to ${syms}")
endif()
string(REGEX MATCHALL "\n" lines "${STEP_OUTPUT}")
list(LENGTH lines n_undefined)
message(STATUS "nm -u rope_consumer_test: ${n_undefined} undefined symbols, none mpfr_ or __gmp")

# A model's plan (Gemma 2: two layer types, both unscaled RoPE) generated by the installed
# posenc, for the verify-only consumer to read and verify per type and per layer.
step("posenc generate --config gemma-2-9b (plan.json)" "${PREFIX}/bin/posenc" generate --config
     "${SRC}/golden/presets/gemma-2-9b.json" --out "${WORK}/plan")
# Run from the installed catalog (POSENC_DATA), not from the source tree.
step("run rope_consumer_test" ${run_env} "POSENC_CONSUMER_PLAN=${WORK}/plan/plan.json" "${bin}")
if(NOT STEP_OUTPUT MATCHES "\\[  PASSED  \\] 6 tests")
  message(FATAL_ERROR "consumer test: expected 6 passing tests (3 on a case, 3 on a plan)\n${STEP_OUTPUT}")
endif()

# ---- full: posenc::golden (the properties need the oracle) -----------------------------------
set(fb "${WORK}/full")
step("configure examples/consumer" "${CMAKE_COMMAND}" -S "${SRC}/examples/consumer"
     -B "${fb}" -G Ninja -DCMAKE_BUILD_TYPE=Release "-DCMAKE_PREFIX_PATH=${PREFIX}" ${compiler})
step("build rope_property_test" "${CMAKE_COMMAND}" --build "${fb}" --target rope_property_test)
step("run rope_property_test" ${run_env} "${fb}/rope_property_test")
if(NOT STEP_OUTPUT MATCHES "\\[  PASSED  \\] 4 tests")
  message(FATAL_ERROR "consumer test: expected 4 passing property tests\n${STEP_OUTPUT}")
endif()
message(STATUS "consumer test passed")
