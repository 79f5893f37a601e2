# t003-needed-mpi: libpkrylov.so (and libpkrylov_fortran.so) need no MPI library, so that a serial model
# links none: readelf -d must list no libmpi* (libmpi, libmpich, ...) among their NEEDED entries and nm -D
# no undefined MPI symbol. In MPI builds the MPI part, libpkrylov_mpi.so (and libpkrylov_mpi_fortran.so), must
# need it (and libpkrylov), so the test can tell the two apart and fails when the check reads nothing.
# Variables: PK_READELF, PK_NM, PK_LIB, PK_FORTRAN_LIB (optional), PK_MPI_LIB, PK_MPI_FORTRAN_LIB (optional:
# MPI builds).
function(pk_needed out lib)
  execute_process(COMMAND ${PK_READELF} -d ${lib} RESULT_VARIABLE rc OUTPUT_VARIABLE txt ERROR_VARIABLE err)
  if(rc)
    message(FATAL_ERROR "readelf -d ${lib} failed (${rc}): ${err}")
  endif()
  string(REGEX MATCHALL "\\(NEEDED\\)[^\n]*\\[[^]]*\\]" lines "${txt}")
  set(names)
  foreach(l IN LISTS lines)
    string(REGEX REPLACE ".*\\[([^]]*)\\]" "\\1" n "${l}")
    list(APPEND names ${n})
  endforeach()
  if(NOT names)
    message(FATAL_ERROR "readelf -d ${lib} lists no NEEDED entry:\n${txt}")
  endif()
  set(${out} ${names} PARENT_SCOPE)
endfunction()

set(pk_mpi_regex "^libp?mpi") # libmpi.so.40 (Open MPI), libmpich.so.12, libmpi_mpifh, libpmpi ...

# ---- libpkrylov (and libpkrylov_fortran): no MPI -------------------------------------------------------
foreach(lib IN ITEMS ${PK_LIB} ${PK_FORTRAN_LIB})
  pk_needed(names ${lib})
  foreach(n IN LISTS names)
    if(n MATCHES "${pk_mpi_regex}" OR n MATCHES "^libpkrylov_mpi")
      message(FATAL_ERROR "${lib} needs ${n}: a serial model linking it would need MPI (NEEDED: ${names})")
    endif()
  endforeach()
  execute_process(COMMAND ${PK_NM} -D --undefined-only ${lib} RESULT_VARIABLE rc OUTPUT_VARIABLE txt)
  if(rc)
    message(FATAL_ERROR "nm -D --undefined-only ${lib} failed (${rc})")
  endif()
  string(REGEX MATCHALL "[ \n]P?MPI_[A-Za-z0-9_]*|[ \n]ompi_[A-Za-z0-9_]*" syms "${txt}")
  if(syms)
    message(FATAL_ERROR "${lib} refers to MPI symbols: ${syms}")
  endif()
  message(STATUS "${lib}: no MPI (NEEDED: ${names})")
endforeach()

# ---- libpkrylov_mpi (and libpkrylov_mpi_fortran): MPI and libpkrylov -----------------------------------
if(PK_MPI_LIB)
  pk_needed(names ${PK_MPI_LIB})
  set(mpi)
  set(core)
  foreach(n IN LISTS names)
    if(n MATCHES "${pk_mpi_regex}")
      set(mpi ${n})
    elseif(n MATCHES "^libpkrylov\\.so")
      set(core ${n})
    endif()
  endforeach()
  if(NOT mpi OR NOT core)
    message(FATAL_ERROR "${PK_MPI_LIB} should need an MPI library and libpkrylov (NEEDED: ${names})")
  endif()
  message(STATUS "${PK_MPI_LIB}: needs ${mpi} and ${core}")
endif()
if(PK_MPI_FORTRAN_LIB)
  pk_needed(names ${PK_MPI_FORTRAN_LIB})
  if(NOT names MATCHES "libpkrylov_mpi\\.so" OR NOT names MATCHES "libpkrylov_fortran\\.so")
    message(FATAL_ERROR "${PK_MPI_FORTRAN_LIB} should need libpkrylov_mpi and libpkrylov_fortran (NEEDED: "
                        "${names})")
  endif()
  message(STATUS "${PK_MPI_FORTRAN_LIB}: needs libpkrylov_mpi and libpkrylov_fortran")
endif()
