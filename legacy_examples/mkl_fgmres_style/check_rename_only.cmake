# Check that the pkrylov version of the MKL-RCI-FGMRES example differs from the MKL version only by the
# renames a user makes to switch: `use mkl_rci` -> `use pkrylov_mod` (4 blanks of alignment absorbed) and
# `call dfgmres...` -> `call pk_dfgmres...`. Usage: cmake -DPK_BEFORE=... -DPK_AFTER=... -P check_rename_only.cmake
file(READ ${PK_BEFORE} before)
file(READ ${PK_AFTER} after)
string(REPLACE "use mkl_rci    " "use pkrylov_mod" renamed "${before}")
string(REPLACE "call dfgmres" "call pk_dfgmres" renamed "${renamed}")
if(NOT renamed STREQUAL after)
  file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/renamed_before.f90 "${renamed}")
  message(FATAL_ERROR "${PK_AFTER} is not ${PK_BEFORE} with the renames applied; compare it with "
                      "${CMAKE_CURRENT_BINARY_DIR}/renamed_before.f90")
endif()
string(REGEX MATCHALL "call pk_dfgmres[_a-z]*\\(" calls "${after}")
list(LENGTH calls ncalls)
if(ncalls LESS 4)
  message(FATAL_ERROR "expected the four pk_dfgmres_* calls in ${PK_AFTER}, found ${ncalls}")
endif()
message(STATUS "after/ = before/ with `use pkrylov_mod` and ${ncalls} pk_dfgmres* calls renamed")
