find_package(GTest REQUIRED)
include(GoogleTest)
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
