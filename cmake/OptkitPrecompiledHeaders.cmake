# Precompiled headers: lib/thirdparty/precompiled.hpp (nlohmann/json, fmt and the standard headers
# most files use) parsed once instead of in every translation unit. Third-party and standard
# headers only, so the area layering the build enforces is unchanged. Measured per translation unit
# on a 2-core Debian 12 machine (user + system seconds, without -> with the shared header):
#   clang -O1 ASan:  lib/eval/task_run.cpp 23.6 -> 18.0, lib/core/error.cpp 0.5 -> 0.2
#   GCC -O3:         lib/eval/task_run.cpp 18.3 -> 15.5, lib/core/error.cpp 0.7 -> 2.3
# clang reads a precompiled header lazily; GCC maps and relocates its whole image (118 MB here) in
# every file, which costs more than it saves in a file that includes little. So the lib/ areas,
# many of whose files are small, use it with clang only; the binary's and the unit tests' files all
# include the heavy headers and use it with both. -DOPTKIT_PCH=OFF builds without any, which
# checks that each file includes what it uses.
option(OPTKIT_PCH "Precompile the common third-party headers" ON)

set(OPTKIT_PCH_HEADER ${CMAKE_SOURCE_DIR}/lib/thirdparty/precompiled.hpp)
if(OPTKIT_PCH)
  # The shared copy, for targets compiled with exactly its flags (a precompiled header is accepted
  # only under the flags it was built with; -Winvalid-pch with -Werror turns a mismatch into an error).
  add_library(optkit_precompiled OBJECT EXCLUDE_FROM_ALL ${CMAKE_SOURCE_DIR}/lib/thirdparty/precompiled.cpp)
  target_compile_options(optkit_precompiled PRIVATE ${OPTKIT_WARNINGS})
  target_link_libraries(optkit_precompiled PRIVATE optkit_thirdparty)
  target_precompile_headers(optkit_precompiled PRIVATE ${OPTKIT_PCH_HEADER})
endif()

# optkit_use_precompiled_headers(TARGET [SMALL_FILES] [OWN [HEADER...]])
#   TARGET includes the shared precompiled header;
#   SMALL_FILES: only with a compiler that loads it lazily (clang), as above;
#   OWN: TARGET compiles a copy of its own (its compile definitions differ from the shared copy's),
#        with the HEADERs its files all include added.
function(optkit_use_precompiled_headers target)
  cmake_parse_arguments(PARSE_ARGV 1 PCH "SMALL_FILES;OWN" "" "")
  if(NOT OPTKIT_PCH OR (PCH_SMALL_FILES AND NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang"))
    return()
  endif()
  # GCC 12 reports libstdc++'s own inlined char_traits copies (-Wstringop-overflow, the family of
  # GCC bug 105329) in files that take the standard headers from a precompiled header; the same
  # files compile clean without one. clang keeps the warning.
  target_compile_options(${target} PRIVATE $<$<CXX_COMPILER_ID:GNU>:-Wno-stringop-overflow>)
  if(PCH_OWN)
    target_precompile_headers(${target} PRIVATE ${OPTKIT_PCH_HEADER} ${PCH_UNPARSED_ARGUMENTS})
  else()
    target_precompile_headers(${target} REUSE_FROM optkit_precompiled)
  endif()
endfunction()
