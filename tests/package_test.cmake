# t600-package: install the build tree into a scratch prefix, move the prefix elsewhere (the package must
# be relocatable), then configure, build and run tests/consumer against it with find_package(pkrylov), and
# tests/consumer_fortran (pkrylov::pkrylov_fortran) when PK_FORTRAN_CONSUMER_SRC is given.
file(REMOVE_RECURSE ${PK_WORK_DIR})
file(MAKE_DIRECTORY ${PK_WORK_DIR})
execute_process(COMMAND ${CMAKE_COMMAND} --install ${PK_BUILD_DIR} --prefix ${PK_WORK_DIR}/prefix
                RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "install failed: ${rc}")
endif()
file(RENAME ${PK_WORK_DIR}/prefix ${PK_WORK_DIR}/moved-prefix)
execute_process(COMMAND ${CMAKE_COMMAND} -S ${PK_CONSUMER_SRC} -B ${PK_WORK_DIR}/build -G ${PK_GENERATOR}
                        -DCMAKE_PREFIX_PATH=${PK_WORK_DIR}/moved-prefix
                        "-DCMAKE_BUILD_RPATH=${PK_WORK_DIR}/moved-prefix/lib"
                RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "configuring the consumer failed: ${rc}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${PK_WORK_DIR}/build RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "building the consumer failed: ${rc}")
endif()
execute_process(COMMAND ${PK_WORK_DIR}/build/consumer RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "the consumer failed: ${rc}")
endif()
# Fortran: the module, its library and the .mod files come with the package; a consumer needs only
# find_package(pkrylov) and target_link_libraries(... pkrylov::pkrylov_fortran).
if(PK_FORTRAN_CONSUMER_SRC)
  file(GLOB mods ${PK_WORK_DIR}/moved-prefix/include/pkrylov/*/pkrylov_mod.mod)
  if(NOT mods)
    message(FATAL_ERROR "the package has no include/pkrylov/<compiler>-<version>/pkrylov_mod.mod")
  endif()
  execute_process(COMMAND ${CMAKE_COMMAND} -S ${PK_FORTRAN_CONSUMER_SRC} -B ${PK_WORK_DIR}/build-fortran
                          -G ${PK_GENERATOR} -DCMAKE_Fortran_COMPILER=${PK_Fortran_COMPILER}
                          -DCMAKE_PREFIX_PATH=${PK_WORK_DIR}/moved-prefix
                          "-DCMAKE_BUILD_RPATH=${PK_WORK_DIR}/moved-prefix/lib"
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(rc)
    message(FATAL_ERROR "configuring the Fortran consumer failed: ${rc}\n${out}")
  endif()
  if(out MATCHES "WARNING")
    message(FATAL_ERROR "configuring the Fortran consumer warned:\n${out}")
  endif()
  execute_process(COMMAND ${CMAKE_COMMAND} --build ${PK_WORK_DIR}/build-fortran
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(rc)
    message(FATAL_ERROR "building the Fortran consumer failed: ${rc}\n${out}")
  endif()
  execute_process(COMMAND ${PK_WORK_DIR}/build-fortran/consumer_fortran RESULT_VARIABLE rc
                  OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(rc)
    message(FATAL_ERROR "the Fortran consumer failed (${rc}): ${out}")
  endif()
endif()
# The installed command-line solver runs from the moved prefix (its RPATH is relative).
execute_process(COMMAND ${PK_WORK_DIR}/moved-prefix/bin/pkrylov-solve --problem thinshell:6,6,4 --json
                RESULT_VARIABLE rc OUTPUT_VARIABLE out)
if(rc)
  message(FATAL_ERROR "the installed pkrylov-solve failed (${rc}): ${out}")
endif()
message(STATUS "package test passed")
