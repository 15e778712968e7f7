// GoogleTest main for the data tests: prepare and the cursor gather are collective MPI calls,
// so MPI is initialised (as a singleton when not started by mpirun). Under mpirun only rank 0
// prints GoogleTest's output.
#include <gtest/gtest.h>
#include <mpi.h>

#if defined(__SANITIZE_ADDRESS__)
// Open MPI keeps allocations alive until exit (and unloads its plugins), which LeakSanitizer
// reports as leaks of unknown modules; the sanitizer build still checks memory errors.
extern "C" const char* __asan_default_options() { return "detect_leaks=0"; }
#endif

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  const int failed = RUN_ALL_TESTS();
  int any_failed = 0;
  MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return any_failed;
}
