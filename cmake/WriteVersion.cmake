# cmake -DSOURCE_DIR=... -DOUTPUT=... -DPROJECT_VERSION=... -P WriteVersion.cmake
execute_process(COMMAND git rev-parse --short=12 HEAD
                WORKING_DIRECTORY ${SOURCE_DIR}
                OUTPUT_VARIABLE CCSCOPE_GIT_COMMIT OUTPUT_STRIP_TRAILING_WHITESPACE
                ERROR_QUIET RESULT_VARIABLE git_result)
if(NOT git_result EQUAL 0 OR CCSCOPE_GIT_COMMIT STREQUAL "")
  set(CCSCOPE_GIT_COMMIT "unknown")
else()
  execute_process(COMMAND git status --porcelain --untracked-files=no
                  WORKING_DIRECTORY ${SOURCE_DIR} OUTPUT_VARIABLE dirty ERROR_QUIET)
  if(NOT dirty STREQUAL "")
    string(APPEND CCSCOPE_GIT_COMMIT "-dirty")
  endif()
endif()
configure_file(${SOURCE_DIR}/cmake/version.h.in ${OUTPUT} @ONLY)
