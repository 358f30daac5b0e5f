# Run at every build (cmake -P, the zt_build_commit target): writes OUT, a header defining
# ZT_BUILD_COMMIT as the source tree's commit (short hash, "+dirty" with uncommitted changes to
# tracked files, "unknown" outside a git checkout), rewriting it only when that changes, so a build
# at the same commit recompiles nothing.
execute_process(COMMAND git -C "${ROOT}" rev-parse --short=12 HEAD
                OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE failed ERROR_QUIET)
if(failed OR commit STREQUAL "")
  set(commit "unknown")
else()
  execute_process(COMMAND git -C "${ROOT}" status --porcelain --untracked-files=no
                  OUTPUT_VARIABLE changes OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(NOT changes STREQUAL "")
    set(commit "${commit}+dirty")
  endif()
endif()
set(text "#pragma once\n#define ZT_BUILD_COMMIT \"${commit}\"\n")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
endif()
if(NOT "${old}" STREQUAL "${text}")
  file(WRITE "${OUT}" "${text}")
endif()
