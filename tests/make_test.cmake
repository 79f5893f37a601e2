# t601-make, t602-static: pkrylov in a model built with make. Installs pkrylov into a scratch prefix, moves
# the prefix (the .pc files and pkrylov-config must follow it), checks what pkrylov-config says against the
# build's configuration, then builds the C and the Fortran consumer with the plain Makefile of
# tests/consumer_make through pkrylov-config and through pkg-config, and runs them.
# PK_STATIC=ON (t602) first configures and builds the source tree again with -DBUILD_SHARED_LIBS=OFF (CPU
# backend: the CUDA objects would take minutes more) and checks that the installation holds the static
# archives only, that the consumers carry no dependency on a pkrylov shared library, and that a CMake
# consumer (tests/package_test.cmake) links them through find_package.
# Variables: PK_WORK_DIR, PK_SOURCE_DIR, PK_BUILD_DIR (the tree to install when not static), PK_VERSION,
# PK_HAS_CUDA, PK_HAS_MPI, PK_HAS_NCCL, PK_HAS_OPENMP, PK_HAS_FORTRAN (yes/no), PK_C_COMPILER,
# PK_Fortran_COMPILER, PK_MAKE, PK_GENERATOR, PK_STATIC, PK_MPI (ON/OFF), PK_OPENMP (ON/OFF).
file(REMOVE_RECURSE ${PK_WORK_DIR})
file(MAKE_DIRECTORY ${PK_WORK_DIR})

function(pk_run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(rc)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}")
  endif()
  set(pk_out "${out}" PARENT_SCOPE)
endfunction()

if(PK_STATIC)
  set(PK_BUILD_DIR ${PK_WORK_DIR}/static-build)
  set(fortran_args -DPKRYLOV_ENABLE_FORTRAN=OFF)
  if(PK_HAS_FORTRAN STREQUAL "yes")
    set(fortran_args -DPKRYLOV_ENABLE_FORTRAN=ON -DCMAKE_Fortran_COMPILER=${PK_Fortran_COMPILER})
  endif()
  pk_run("configuring the static build"
    ${CMAKE_COMMAND} -S ${PK_SOURCE_DIR} -B ${PK_BUILD_DIR} -G ${PK_GENERATOR} -DCMAKE_BUILD_TYPE=Release
    -DBUILD_SHARED_LIBS=OFF -DPKRYLOV_ENABLE_CUDA=OFF -DPKRYLOV_BUILD_TESTS=OFF -DPKRYLOV_BUILD_BENCH=OFF
    -DPKRYLOV_ENABLE_MPI=${PK_MPI} -DPKRYLOV_ENABLE_OPENMP=${PK_OPENMP} -DCMAKE_C_COMPILER=${PK_C_COMPILER}
    ${fortran_args})
  set(targets pkrylov pkrylov-solve pkrylov-demo)
  if(PK_HAS_FORTRAN STREQUAL "yes")
    list(APPEND targets pkrylov_fortran)
  endif()
  pk_run("building the static library" ${CMAKE_COMMAND} --build ${PK_BUILD_DIR} --target ${targets})
  set(PK_HAS_CUDA no) # what the static build has
  set(PK_HAS_NCCL no)
endif()

pk_run("install" ${CMAKE_COMMAND} --install ${PK_BUILD_DIR} --prefix ${PK_WORK_DIR}/prefix)
file(RENAME ${PK_WORK_DIR}/prefix ${PK_WORK_DIR}/moved-prefix)
set(prefix ${PK_WORK_DIR}/moved-prefix)
set(config ${prefix}/bin/pkrylov-config)

# ---- the libraries installed ------------------------------------------------------------------------
file(GLOB shared_libs ${prefix}/lib*/libpkrylov*.so*)
file(GLOB static_libs ${prefix}/lib*/libpkrylov*.a)
set(want_static libpkrylov.a)
if(PK_HAS_FORTRAN STREQUAL "yes")
  list(APPEND want_static libpkrylov_fortran.a)
endif()
if(PK_STATIC)
  if(shared_libs)
    message(FATAL_ERROR "a static build installed shared libraries: ${shared_libs}")
  endif()
  foreach(lib IN LISTS want_static)
    if(NOT EXISTS ${prefix}/lib/${lib})
      message(FATAL_ERROR "the static build did not install lib/${lib} (found: ${static_libs})")
    endif()
  endforeach()
  set(PK_SHARED no)
else()
  if(NOT EXISTS ${prefix}/lib/libpkrylov.so)
    message(FATAL_ERROR "no lib/libpkrylov.so in ${prefix}/lib")
  endif()
  set(PK_SHARED yes)
endif()

# ---- pkrylov-config -------------------------------------------------------------------------------
pk_run("pkrylov-config --version" ${config} --version)
if(NOT pk_out STREQUAL "pkrylov ${PK_VERSION}\n")
  message(FATAL_ERROR "pkrylov-config --version printed '${pk_out}', the project version is ${PK_VERSION}")
endif()
pk_run("pkrylov-config --has-*"
       ${config} --has-cuda --has-mpi --has-nccl --has-openmp --has-fortran --has-shared)
set(want "${PK_HAS_CUDA}\n${PK_HAS_MPI}\n${PK_HAS_NCCL}\n${PK_HAS_OPENMP}\n${PK_HAS_FORTRAN}\n${PK_SHARED}\n")
if(NOT pk_out STREQUAL want)
  message(FATAL_ERROR "pkrylov-config --has-cuda/mpi/nccl/openmp/fortran/shared printed\n${pk_out}"
                      "expected\n${want}")
endif()
pk_run("pkrylov-config --prefix" ${config} --prefix)
if(NOT pk_out STREQUAL "${prefix}\n")
  message(FATAL_ERROR "pkrylov-config --prefix printed '${pk_out}' for the moved prefix ${prefix}")
endif()
file(CREATE_LINK ${config} ${PK_WORK_DIR}/pkrylov-config-link SYMBOLIC)
pk_run("pkrylov-config through a link" ${PK_WORK_DIR}/pkrylov-config-link --prefix)
if(NOT pk_out STREQUAL "${prefix}\n")
  message(FATAL_ERROR "a link to pkrylov-config printed --prefix '${pk_out}', the installation is ${prefix}")
endif()
pk_run("pkrylov-config --libs" ${config} --libs)
if(PK_STATIC AND NOT pk_out MATCHES "-lm")
  message(FATAL_ERROR "pkrylov-config --libs of a static installation lacks the dependencies: ${pk_out}")
endif()
pk_run("pkrylov-config --help" ${config} --help)
if(NOT pk_out MATCHES "--fflags" OR NOT pk_out MATCHES "--has-mpi")
  message(FATAL_ERROR "pkrylov-config --help: ${pk_out}")
endif()
execute_process(COMMAND ${config} --frobnicate RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 2 OR NOT err MATCHES "--frobnicate")
  message(FATAL_ERROR "pkrylov-config --frobnicate: exit ${rc} (expected 2), '${err}'")
endif()
execute_process(COMMAND ${config} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 2 OR NOT err MATCHES "usage")
  message(FATAL_ERROR "pkrylov-config without options: exit ${rc} (expected 2), '${err}'")
endif()
if(PK_HAS_FORTRAN STREQUAL "yes")
  # a compiler that cannot read the module files: a gfortran of another version
  file(WRITE ${PK_WORK_DIR}/fake/gfortran-99
       "#!/bin/sh\ncase \"$1\" in\n--version) echo 'GNU Fortran (fake) 99.1.0';;\n*) echo 99.1.0;;\nesac\n")
  file(CHMOD ${PK_WORK_DIR}/fake/gfortran-99 PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE)
  execute_process(COMMAND ${config} --fc=${PK_WORK_DIR}/fake/gfortran-99 --fflags
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 1 OR NOT err MATCHES "GNU-99.1.0" OR NOT out STREQUAL "")
    message(FATAL_ERROR "pkrylov-config --fflags for gfortran 99.1.0: exit ${rc} (expected 1), out '${out}', "
                        "err '${err}'")
  endif()
  # the compiler pkrylov was built with: the folder that holds pkrylov_mod.mod
  pk_run("pkrylov-config --fflags" ${config} --fc=${PK_Fortran_COMPILER} --fflags)
  string(REGEX REPLACE "^-I([^\n]*)\n$" "\\1" moddir "${pk_out}")
  if(NOT EXISTS ${moddir}/pkrylov_mod.mod)
    message(FATAL_ERROR "pkrylov-config --fflags printed '${pk_out}': no pkrylov_mod.mod there")
  endif()
else()
  execute_process(COMMAND ${config} --fflags RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 1 OR NOT err MATCHES "without Fortran")
    message(FATAL_ERROR "pkrylov-config --fflags without Fortran: exit ${rc} (expected 1), '${err}'")
  endif()
endif()

# ---- the Makefile consumers -----------------------------------------------------------------------
set(targets c_config)
if(PK_HAS_FORTRAN STREQUAL "yes")
  list(APPEND targets f_config)
endif()
find_program(PK_PKG_CONFIG NAMES pkg-config pkgconf)
if(PK_PKG_CONFIG)
  list(APPEND targets c_pkgconfig)
  if(PK_HAS_FORTRAN STREQUAL "yes")
    list(APPEND targets f_pkgconfig)
  endif()
else()
  message(STATUS "pkg-config not found: the consumers through pkg-config are not built")
endif()
set(make_dir ${PK_WORK_DIR}/make)
file(MAKE_DIRECTORY ${make_dir})
set(static_flag)
if(PK_STATIC)
  set(static_flag PCFLAGS=--static) # harmless for a static-only installation: its Libs hold the dependencies
endif()
pk_run("building the Makefile consumers"
  ${CMAKE_COMMAND} -E env PKG_CONFIG_PATH=${prefix}/lib/pkgconfig
  ${PK_MAKE} -C ${make_dir} -f ${PK_SOURCE_DIR}/tests/consumer_make/Makefile SRC=${PK_SOURCE_DIR}/tests
  CC=${PK_C_COMPILER} FC=${PK_Fortran_COMPILER} PKRYLOV_CONFIG=${config} PKG_CONFIG=${PK_PKG_CONFIG}
  ${static_flag} ${targets})
find_program(PK_READELF readelf)
foreach(t IN LISTS targets)
  pk_run("the consumer ${t}" ${make_dir}/${t})
  if(NOT pk_out MATCHES "consumer(_fortran)?: [0-9]+ iterations, reason converged")
    message(FATAL_ERROR "${t} printed: ${pk_out}")
  endif()
  if(PK_READELF)
    pk_run("readelf ${t}" ${PK_READELF} -d ${make_dir}/${t})
    if(PK_STATIC AND pk_out MATCHES "libpkrylov")
      message(FATAL_ERROR "${t} of the static installation needs a pkrylov shared library:\n${pk_out}")
    elseif(NOT PK_STATIC AND NOT pk_out MATCHES "libpkrylov")
      message(FATAL_ERROR "${t} of the shared installation does not link libpkrylov.so:\n${pk_out}")
    endif()
  endif()
  message(STATUS "${t}: ok")
endforeach()

# ---- the static archives through find_package ------------------------------------------------------
if(PK_STATIC)
  set(PK_WORK_DIR ${PK_WORK_DIR}/cmake-consumer)
  set(PK_CONSUMER_SRC ${PK_SOURCE_DIR}/tests/consumer)
  if(PK_HAS_FORTRAN STREQUAL "yes")
    set(PK_FORTRAN_CONSUMER_SRC ${PK_SOURCE_DIR}/tests/consumer_fortran)
  endif()
  include(${PK_SOURCE_DIR}/tests/package_test.cmake)
endif()
message(STATUS "make test passed")
