// main() of the MPI test executables (data and tensor parallel): MPI around GoogleTest; ranks
// other than 0 print only their failures; the exit status is non-zero if any rank failed.
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <stdexcept>

#include "parallel/mpi/mpi_session.h"
#include "tests/core/dp/dp_test_util.h"

namespace brt::testing {

std::string shared_temp_dir(const std::string& tag) {
  char name[256] = {};
  if (world_rank() == 0) {
    const auto base = std::filesystem::temp_directory_path() / ("brt_mpi_" + tag + "_XXXXXX");
    std::snprintf(name, sizeof name, "%s", base.c_str());
    if (mkdtemp(name) == nullptr) name[0] = '\0';
  }
  MPI_Bcast(name, sizeof name, MPI_CHAR, 0, MPI_COMM_WORLD);
  if (name[0] == '\0') throw std::runtime_error("could not create a temporary directory for " + tag);
  return name;
}

namespace {

class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (r.failed())
      std::fprintf(stderr, "[world rank %d] %s:%d: %s\n", rank_, r.file_name() ? r.file_name() : "?",
                   r.line_number(), r.summary());
  }

 private:
  int rank_;
};

}  // namespace
}  // namespace brt::testing

int main(int argc, char** argv) {
  brt::parallel::MpiSession session(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  if (session.world_rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new brt::testing::RankFailurePrinter(session.world_rank()));
  }
  const int failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  int any_failed = 0;
  MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (session.world_rank() == 0 && any_failed && !failed)
    std::fprintf(stderr, "some other rank had failures (printed above with its rank)\n");
  return any_failed;
}
