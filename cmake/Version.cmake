# version.h carries the project version and the git commit. The commit is read at
# build time (not configure time) so that an incremental build never reports a
# stale commit; the header is only rewritten when its content changes.
set(CCSCOPE_VERSION_HEADER ${PROJECT_BINARY_DIR}/generated/ccscope/version.h)
add_custom_target(ccscope_version_header
  COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${PROJECT_SOURCE_DIR} -DOUTPUT=${CCSCOPE_VERSION_HEADER}
          -DPROJECT_VERSION=${PROJECT_VERSION} -P ${PROJECT_SOURCE_DIR}/cmake/WriteVersion.cmake
  BYPRODUCTS ${CCSCOPE_VERSION_HEADER}
  COMMENT "Reading the git commit for version.h")
add_library(ccscope_version INTERFACE)
target_include_directories(ccscope_version INTERFACE ${PROJECT_BINARY_DIR}/generated)
add_dependencies(ccscope_version ccscope_version_header)
