# cmake -DSOURCE_DIR=... -DOUT=... -P WriteGitCommit.cmake: writes OUT defining OPTKIT_GIT_COMMIT
# (short hash, "-dirty" with uncommitted changes to tracked files, "unknown" outside git), and
# replaces OUT only when that changes.
execute_process(COMMAND git rev-parse --short=12 HEAD WORKING_DIRECTORY ${SOURCE_DIR}
                OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT commit)
  set(commit "unknown")
endif()
execute_process(COMMAND git status --porcelain --untracked-files=no WORKING_DIRECTORY ${SOURCE_DIR}
                OUTPUT_VARIABLE dirty OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(dirty)
  string(APPEND commit "-dirty")
endif()
file(WRITE ${OUT}.tmp "// Generated at build time by cmake/WriteGitCommit.cmake; do not edit.\n#pragma once\n\n#define OPTKIT_GIT_COMMIT \"${commit}\"\n")
file(COPY_FILE ${OUT}.tmp ${OUT} ONLY_IF_DIFFERENT)
file(REMOVE ${OUT}.tmp)
