# t010-options:getenv_once: the library reads the environment in exactly one place, the variable
# PKRYLOV_OPTIONS at context creation (src/c/core/context.c); every other switch is an option
# (src/c/core/options.c). Fails naming every other call of getenv / secure_getenv under src/.
file(GLOB_RECURSE pk_sources ${PK_SOURCE_DIR}/src/*.c ${PK_SOURCE_DIR}/src/*.h ${PK_SOURCE_DIR}/src/*.cu
     ${PK_SOURCE_DIR}/src/*.cuh ${PK_SOURCE_DIR}/src/*.cpp)
set(hits)
foreach(f IN LISTS pk_sources)
  file(STRINGS ${f} lines REGEX "getenv[ \t]*\\(")
  foreach(l IN LISTS lines)
    file(RELATIVE_PATH rel ${PK_SOURCE_DIR} ${f})
    list(APPEND hits "${rel}: ${l}")
  endforeach()
endforeach()
list(LENGTH hits n)
if(NOT n EQUAL 1)
  string(REPLACE ";" "\n  " shown "${hits}")
  message(FATAL_ERROR "getenv appears ${n} times in src/ (exactly one expected, PKRYLOV_OPTIONS in "
                      "src/c/core/context.c):\n  ${shown}")
endif()
list(GET hits 0 only)
if(NOT only MATCHES "^src/c/core/context.c: .*getenv\\(\"PKRYLOV_OPTIONS\"\\)")
  message(FATAL_ERROR "the one getenv of src/ is not PKRYLOV_OPTIONS in src/c/core/context.c: ${only}")
endif()
message(STATUS "getenv once: ${only}")
