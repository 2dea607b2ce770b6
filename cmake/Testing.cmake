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
# CCSCOPE_UNIT_TEST_SHARDS=N (N > 0) registers each unit-test executable as N ctest tests,
# gtest shards (GTEST_TOTAL_SHARDS/GTEST_SHARD_INDEX) of one process each, instead of one
# process per test case. CI's sanitizer tree (the asan preset) uses it: 781 ASan processes'
# start-up and leak check cost 40 % of the unit tests' time there. A failed shard's output
# names its failed cases ([  FAILED  ] lines); a developer's tree keeps one test per case.
set(CCSCOPE_UNIT_TEST_SHARDS 0 CACHE STRING
    "Register each unit-test executable as this many gtest shards (0: one test per case)")
if(CCSCOPE_UNIT_TESTS AND CCSCOPE_UNIT_TEST_SHARDS GREATER 0)
  function(gtest_discover_tests target)
    cmake_parse_arguments(PARSE_ARGV 1 arg "" "DISCOVERY_TIMEOUT" "PROPERTIES")
    if(CCSCOPE_SANITIZE)
      # The test code itself without debug information: a sanitizer report still names its
      # functions, and the libraries under test keep their line numbers (-g1). The test
      # files are half of the sanitizer tree's compile time; -g0 takes a sixth off it.
      target_compile_options(${target} PRIVATE -g0)
    endif()
    math(EXPR last "${CCSCOPE_UNIT_TEST_SHARDS} - 1")
    foreach(shard RANGE ${last})
      set(name ${target}.shard${shard}of${CCSCOPE_UNIT_TEST_SHARDS})
      add_test(NAME ${name} COMMAND ${target} --gtest_brief=1
               WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
      if(arg_PROPERTIES)
        set_tests_properties(${name} PROPERTIES ${arg_PROPERTIES})
      endif()
      # A shard runs many cases: the per-case TIMEOUT of PROPERTIES does not fit it.
      set_tests_properties(${name} PROPERTIES TIMEOUT 1200 ENVIRONMENT
        "GTEST_TOTAL_SHARDS=${CCSCOPE_UNIT_TEST_SHARDS};GTEST_SHARD_INDEX=${shard}")
    endforeach()
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
