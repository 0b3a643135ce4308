# ctest python.constants: python/posenc/constants.json must be exactly what `posenc constants`
# prints, so the Python package never drifts from the C++ tables (hard positions, profiles,
# pipelines, schemes and mistake names). Run as
#   cmake -DPOSENC=<posenc> -DSRC=<source dir> -DWORK=<scratch dir> -P constants_test.cmake
# After changing one of those tables, regenerate the file:
#   build/posenc constants > python/posenc/constants.json
file(MAKE_DIRECTORY ${WORK})
execute_process(COMMAND ${POSENC} constants OUTPUT_FILE ${WORK}/constants.json RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "posenc constants exited ${rc}")
endif()
file(READ ${WORK}/constants.json printed)
file(READ ${SRC}/python/posenc/constants.json committed)
if(NOT printed STREQUAL committed)
  message(FATAL_ERROR "python/posenc/constants.json differs from `posenc constants` (printed in "
                      "${WORK}/constants.json): regenerate it with\n"
                      "  build/posenc constants > python/posenc/constants.json")
endif()
message(STATUS "python/posenc/constants.json matches posenc constants")
