# t600-package: install the build tree into a scratch prefix, move the prefix elsewhere (the package must
# be relocatable), then configure, build and run tests/consumer against it with find_package(pkrylov), and
# tests/consumer_fortran (pkrylov::pkrylov_fortran) when PK_FORTRAN_CONSUMER_SRC is given, and, in MPI builds
# (PK_MPI_CONSUMER_SRC, PK_MPIEXEC), tests/consumer_mpi (find_package(pkrylov COMPONENTS MPI),
# pkrylov::pkrylov_mpi) run on two ranks; the serial consumer must need no MPI (readelf -d), the MPI one
# libpkrylov_mpi.so (shared builds) and MPI. t602 includes this file for its static installation (PK_STATIC).
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
find_program(PK_READELF_PKG readelf)
if(PK_READELF_PKG) # a serial model links no MPI (and not the MPI part of pkrylov)
  execute_process(COMMAND ${PK_READELF_PKG} -d ${PK_WORK_DIR}/build/consumer OUTPUT_VARIABLE out)
  if(out MATCHES "\\[libp?mpi|libpkrylov_mpi")
    message(FATAL_ERROR "the serial consumer needs MPI:\n${out}")
  endif()
endif()
if(PK_MPI_CONSUMER_SRC)
  execute_process(COMMAND ${CMAKE_COMMAND} -S ${PK_MPI_CONSUMER_SRC} -B ${PK_WORK_DIR}/build-mpi -G ${PK_GENERATOR}
                          -DCMAKE_PREFIX_PATH=${PK_WORK_DIR}/moved-prefix
                          "-DCMAKE_BUILD_RPATH=${PK_WORK_DIR}/moved-prefix/lib"
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(rc)
    message(FATAL_ERROR "configuring the MPI consumer failed: ${rc}\n${out}")
  endif()
  execute_process(COMMAND ${CMAKE_COMMAND} --build ${PK_WORK_DIR}/build-mpi
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(rc)
    message(FATAL_ERROR "building the MPI consumer failed: ${rc}\n${out}")
  endif()
  execute_process(COMMAND ${CMAKE_COMMAND} -E env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
                          OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
                          ${PK_MPIEXEC} -n 2 ${PK_WORK_DIR}/build-mpi/consumer_mpi
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(rc OR NOT out MATCHES "consumer_mpi: [0-9]+ iterations, reason converged[a-z_]*, 2 ranks")
    message(FATAL_ERROR "the MPI consumer failed (${rc}): ${out}")
  endif()
  if(PK_READELF_PKG)
    execute_process(COMMAND ${PK_READELF_PKG} -d ${PK_WORK_DIR}/build-mpi/consumer_mpi OUTPUT_VARIABLE out)
    if(NOT PK_STATIC AND NOT out MATCHES "libpkrylov_mpi\\.so")
      message(FATAL_ERROR "the MPI consumer does not link libpkrylov_mpi.so:\n${out}")
    elseif(NOT out MATCHES "\\[libp?mpi")
      message(FATAL_ERROR "the MPI consumer does not link MPI:\n${out}")
    endif()
  endif()
  message(STATUS "MPI consumer: ok")
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
