# The git commit baked into the binary for `optkit --version` and the archive. It is written at
# build time, not configure time, so an incremental build after new commits reports the new one;
# the header is only touched when the commit (or its -dirty mark) changes, so nothing recompiles
# otherwise.
set(OPTKIT_GIT_COMMIT_HEADER ${CMAKE_BINARY_DIR}/generated/core/git_commit.hpp)
add_custom_target(optkit_git_commit
  COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${CMAKE_SOURCE_DIR} -DOUT=${OPTKIT_GIT_COMMIT_HEADER}
          -P ${CMAKE_SOURCE_DIR}/cmake/WriteGitCommit.cmake
  BYPRODUCTS ${OPTKIT_GIT_COMMIT_HEADER}
  VERBATIM)
