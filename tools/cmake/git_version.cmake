# Run at build time (cmake -P): writes OUT from IN with the current git commit, touching OUT only
# when its text changes, so a new commit recompiles one file and an unchanged one nothing.
# Variables: SOURCE_DIR, IN, OUT, TARNN_VERSION.
execute_process(COMMAND git -C "${SOURCE_DIR}" rev-parse --short=12 HEAD
                OUTPUT_VARIABLE TARNN_GIT_COMMIT OUTPUT_STRIP_TRAILING_WHITESPACE
                RESULT_VARIABLE rc ERROR_QUIET)
if(NOT rc EQUAL 0 OR TARNN_GIT_COMMIT STREQUAL "")
  set(TARNN_GIT_COMMIT "unknown")
else()
  execute_process(COMMAND git -C "${SOURCE_DIR}" status --porcelain --untracked-files=no
                  OUTPUT_VARIABLE dirty ERROR_QUIET)
  if(NOT dirty STREQUAL "")
    set(TARNN_GIT_COMMIT "${TARNN_GIT_COMMIT}-dirty")
  endif()
endif()
configure_file("${IN}" "${OUT}.new" @ONLY)
execute_process(COMMAND "${CMAKE_COMMAND}" -E copy_if_different "${OUT}.new" "${OUT}")
file(REMOVE "${OUT}.new")
