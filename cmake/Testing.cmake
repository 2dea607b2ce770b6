find_package(GTest REQUIRED)
include(GoogleTest)

# The unit tests (every gtest_discover_tests executable). CI runs them once, in the sanitizer
# tree (ci/sanitize), and configures its Release tree with -DCCSCOPE_UNIT_TESTS=OFF, which
# runs the integration, MPI and virtual-cluster tests against the optimised binary: the unit
# test executables are half of a tree's compile time. OFF keeps them out of `all` and
# registers none of their tests (a developer's tree keeps the default ON).
option(CCSCOPE_UNIT_TESTS "Build and register the unit tests (gtest_discover_tests)" ON)
if(NOT CCSCOPE_UNIT_TESTS)
  # One place instead of a condition in every tests/CMakeLists.txt: this definition
  # replaces GoogleTest's for the rest of the configure.
  function(gtest_discover_tests target)
    set_target_properties(${target} PROPERTIES EXCLUDE_FROM_ALL TRUE)
  endfunction()
endif()
# Where MPI integration tests find mpiexec and how many ranks the machine may run.
set(CCSCOPE_MPIEXEC ${MPIEXEC_EXECUTABLE})

# Sanitizer builds (the asan preset): a canary that ci/sanitizers/lsan.supp hides only the
# third-party leak of MPI_Init (libpciaccess under hwloc) while a leak in our own code, and
# undefined behaviour, still fail. It needs the environment of `ctest --preset asan`.
if(CCSCOPE_SANITIZE AND MPIEXEC_EXECUTABLE)
  add_executable(sanitizer_canary ${PROJECT_SOURCE_DIR}/ci/sanitizers/canary.cpp)
  target_link_libraries(sanitizer_canary PRIVATE ccscope_collectives)
  add_test(NAME sanitizer.canary
    COMMAND bash ${PROJECT_SOURCE_DIR}/ci/sanitizers/canary_test.sh $<TARGET_FILE:sanitizer_canary>
            ${MPIEXEC_EXECUTABLE})
  set_tests_properties(sanitizer.canary PROPERTIES LABELS "sanitizer;mpi" TIMEOUT 120)
endif()
