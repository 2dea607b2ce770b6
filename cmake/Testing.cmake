find_package(GTest REQUIRED)
include(GoogleTest)
# Where MPI integration tests find mpiexec and how many ranks the machine may run.
set(CCSCOPE_MPIEXEC ${MPIEXEC_EXECUTABLE})
