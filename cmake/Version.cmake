# The git commit is read at configure time; "unknown" outside a git checkout.
execute_process(COMMAND git rev-parse --short=12 HEAD
                WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
                OUTPUT_VARIABLE CCSCOPE_GIT_COMMIT OUTPUT_STRIP_TRAILING_WHITESPACE
                ERROR_QUIET RESULT_VARIABLE git_result)
if(NOT git_result EQUAL 0 OR CCSCOPE_GIT_COMMIT STREQUAL "")
  set(CCSCOPE_GIT_COMMIT "unknown")
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/version.h.in ${PROJECT_BINARY_DIR}/generated/ccscope/version.h @ONLY)
add_library(ccscope_version INTERFACE)
target_include_directories(ccscope_version INTERFACE ${PROJECT_BINARY_DIR}/generated)
