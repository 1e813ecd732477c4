# Unity builds: the files of one target (a lib/ area, the binary, the unit tests) compiled
# OPTKIT_UNITY_BATCH at a time as one translation unit, so the standard, JSON, fmt and Boost
# headers they share are parsed once per batch instead of once per file (parsing is about half of
# GCC's time in a typical file here). Measured on a 2-core Debian 12 machine, GCC -O3, the binary
# alone: 737 s -> 420 s; the lib/ areas 1,749 -> 844 job-seconds, cmd/ 270 -> ~45.
# An area's batches hold only that area's files, so the include layering the build enforces is
# unchanged. A batch may come to hold any two files of a target, so what a file defines in its
# anonymous namespace must have a name no other file of the target gives its own: a configuration
# with -DOPTKIT_UNITY_BATCH=0 (one batch per target) checks every pair at once.
# -DOPTKIT_UNITY_BUILD=OFF compiles each file alone, which checks that it includes what it uses.
option(OPTKIT_UNITY_BUILD "Compile each lib/ area's files in batches (unity build)" ON)
set(OPTKIT_UNITY_BATCH 8 CACHE STRING "Files per unity batch")

# optkit_use_unity_build(TARGET): TARGET's C++ files compile in unity batches.
function(optkit_use_unity_build target)
  if(NOT OPTKIT_UNITY_BUILD)
    return()
  endif()
  set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE ${OPTKIT_UNITY_BATCH})
  # A file's own classes, with members of its anonymous-namespace types, sit in an included file
  # in a batch; GCC then takes them for a header's classes and warns. They are still one file's.
  target_compile_options(${target} PRIVATE $<$<CXX_COMPILER_ID:GNU>:-Wno-subobject-linkage>)
endfunction()
