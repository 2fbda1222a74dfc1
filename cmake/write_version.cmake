# Writes OUT (a C++ file defining sy::build_version()) from the project version and the
# source tree's `git describe`, at every build; configure_file leaves the file untouched
# when nothing changed, so an unchanged commit relinks nothing.
execute_process(
  COMMAND git -C "${SRC}" describe --always --dirty --abbrev=7
  OUTPUT_VARIABLE SY_GIT_DESCRIBE OUTPUT_STRIP_TRAILING_WHITESPACE
  RESULT_VARIABLE git_result ERROR_QUIET)
if(NOT git_result EQUAL 0 OR SY_GIT_DESCRIBE STREQUAL "")
  set(SY_GIT_DESCRIBE "not a git checkout")
endif()
configure_file("${SRC}/cmake/version.cpp.in" "${OUT}" @ONLY)
