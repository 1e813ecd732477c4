# Third-party libraries, all from Debian 12 packages (scripts/install-deps.sh). Every library that
# Debian ships as an archive is linked statically. spdlog and fmt ship no archive: spdlog is used
# header-only, and fmt's compiled part is built once from its headers (optkit_fmt,
# lib/thirdparty/fmt_compiled.cpp) instead of in every translation unit. Oniguruma (the regex
# engine Hugging Face tokenizers compile their patterns with) is the one exception: Debian 12 ships
# it only as a shared library (libonig5), so it is linked dynamically and the binary needs libonig5
# at run time.

set(OPTKIT_INSTALL_HINT "run scripts/install-deps.sh")

# Finds lib<name>.a or stops configuration naming the package that provides it.
function(optkit_find_static var name package)
  find_library(${var} NAMES lib${name}.a PATH_SUFFIXES openblas-pthread)
  if(NOT ${var})
    message(FATAL_ERROR "static lib${name}.a not found (Debian package ${package}); ${OPTKIT_INSTALL_HINT}")
  endif()
endfunction()

# optkit_find_header(HEADER PACKAGE [HINT]): HINT replaces OPTKIT_INSTALL_HINT (a test-only package).
function(optkit_find_header header package)
  set(hint "${OPTKIT_INSTALL_HINT}")
  if(ARGC GREATER 2)
    set(hint "${ARGV2}")
  endif()
  find_path(_dir NAMES ${header})
  if(NOT _dir)
    message(FATAL_ERROR "header ${header} not found (Debian package ${package}); ${hint}")
  endif()
  unset(_dir CACHE)
endfunction()

optkit_find_header(CLI/CLI.hpp libcli11-dev)
optkit_find_header(nlohmann/json.hpp nlohmann-json3-dev)
if(OPTKIT_TESTS)
  optkit_find_header(doctest/doctest.h doctest-dev "run scripts/install-deps.sh --tests")
endif()
optkit_find_header(spdlog/spdlog.h libspdlog-dev)
optkit_find_header(fmt/format.h libfmt-dev)
optkit_find_header(yaml-cpp/yaml.h libyaml-cpp-dev)
optkit_find_header(sqlite3.h libsqlite3-dev)
optkit_find_header(boost/process.hpp libboost-dev)
optkit_find_header(cblas.h libopenblas-dev)
optkit_find_header(zstd.h libzstd-dev)
optkit_find_header(oniguruma.h libonig-dev)

optkit_find_static(OPTKIT_YAMLCPP_LIB yaml-cpp libyaml-cpp-dev)
optkit_find_static(OPTKIT_SQLITE_LIB sqlite3 libsqlite3-dev)
optkit_find_static(OPTKIT_BOOST_FS_LIB boost_filesystem libboost-filesystem-dev)
optkit_find_static(OPTKIT_OPENBLAS_LIB openblas libopenblas-dev)
optkit_find_static(OPTKIT_ZSTD_LIB zstd libzstd-dev)
find_library(OPTKIT_ONIG_LIB NAMES onig)
if(NOT OPTKIT_ONIG_LIB)
  message(FATAL_ERROR "libonig not found (Debian package libonig-dev); ${OPTKIT_INSTALL_HINT}")
endif()

# OpenBLAS's LAPACK part is Fortran: its runtime comes from GCC's own archives.
foreach(rt gfortran quadmath)
  execute_process(COMMAND ${CMAKE_CXX_COMPILER} -print-file-name=lib${rt}.a
                  OUTPUT_VARIABLE _path OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT EXISTS "${_path}")
    message(FATAL_ERROR "lib${rt}.a not found next to ${CMAKE_CXX_COMPILER} (Debian packages libgfortran-12-dev, libgcc-12-dev); ${OPTKIT_INSTALL_HINT}")
  endif()
  list(APPEND OPTKIT_FORTRAN_RUNTIME "${_path}")
endforeach()

find_package(Threads REQUIRED)

# COIN-OR CBC (plan hetero's ILP) and the COIN-OR libraries under it, statically, in link order.
optkit_find_header(coin/Cbc_C_Interface.h coinor-libcbc-dev)
foreach(lib CbcSolver Cbc Cgl OsiClp ClpSolver Clp Osi CoinUtils bz2 z)
  optkit_find_static(OPTKIT_COIN_${lib}_LIB ${lib} coinor-libcbc-dev)
  list(APPEND OPTKIT_COIN_LIBS ${OPTKIT_COIN_${lib}_LIB})
endforeach()
add_library(optkit_cbc INTERFACE)
target_link_libraries(optkit_cbc INTERFACE ${OPTKIT_COIN_LIBS} ${OPTKIT_OPENBLAS_LIB} ${OPTKIT_FORTRAN_RUNTIME})

# fmt's own code: third-party, so compiled without the project's warning flags.
add_library(optkit_fmt STATIC ${CMAKE_SOURCE_DIR}/lib/thirdparty/fmt_compiled.cpp)

add_library(optkit_thirdparty INTERFACE)
target_compile_definitions(optkit_thirdparty INTERFACE SPDLOG_HEADER_ONLY JSON_DIAGNOSTICS=1
                           BOOST_ALLOW_DEPRECATED_HEADERS)
target_link_libraries(optkit_thirdparty INTERFACE optkit_fmt ${OPTKIT_YAMLCPP_LIB} ${OPTKIT_SQLITE_LIB}
                      ${OPTKIT_BOOST_FS_LIB} ${OPTKIT_OPENBLAS_LIB} ${OPTKIT_ZSTD_LIB} ${OPTKIT_ONIG_LIB} ${OPTKIT_FORTRAN_RUNTIME}
                      Threads::Threads ${CMAKE_DL_LIBS} m)
