# t604-plugin:<mode>: run tests/plugin_probe.c (the program t604-plugin) (built without a run path) against the library of this build,
# the loader pointed at it by LD_LIBRARY_PATH (a test-only mechanism: the library reads no variable for it).
#   beside: the build tree, where the CUDA plugin sits beside libpkrylov.so
#   alone:  a scratch folder holding a copy of libpkrylov.so and nothing else: the plugin cannot be found
#   nocuda: the build tree of a build without CUDA
# -DPK_PROGRAM=<t604-plugin> -DPK_LIBRARY=<the library file> -DPK_SONAME=<its soname> -DPK_LIBDIR=<its folder>
# -DPK_WORK_DIR=<scratch> -DPK_MODE=beside|alone|nocuda
if(PK_MODE STREQUAL "alone")
  file(REMOVE_RECURSE "${PK_WORK_DIR}")
  file(MAKE_DIRECTORY "${PK_WORK_DIR}")
  file(COPY_FILE "${PK_LIBRARY}" "${PK_WORK_DIR}/${PK_SONAME}")
  set(dir "${PK_WORK_DIR}")
else()
  set(dir "${PK_LIBDIR}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E env "LD_LIBRARY_PATH=${dir}" ${PK_PROGRAM} ${PK_MODE}
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
message("${out}${err}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "t604-plugin ${PK_MODE} (LD_LIBRARY_PATH=${dir}): exit ${rc}")
endif()
