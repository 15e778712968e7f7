// NCCL communicator tests, run under `mpirun -np 2` (label gpu). Every rank needs its own
// GPU; without enough GPUs on a node (CI, a one-GPU machine) every rank skips, decided
// collectively so no rank is left alone inside NCCL's setup.
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "parallel/mpi/launch_env.h"
#include "parallel/mpi/mpi_session.h"
#include "parallel/nccl_communicator.h"

namespace bp = brt::parallel;

namespace {

struct Placement {
  bool skip = true;
  std::string reason;
};

const Placement& placement() {
  static const Placement decided = [] {
    Placement p;
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess) {
      (void)cudaGetLastError();
      devices = 0;
    }
    const bp::LaunchInfo info = bp::query_launch_info(MPI_COMM_WORLD, bp::process_env());
    int lacking = devices < info.local_size ? 1 : 0;
    int any_lacking = 0;
    MPI_Allreduce(&lacking, &any_lacking, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    p.skip = any_lacking != 0;
    p.reason = "a node has fewer CUDA devices than ranks (this rank sees " +
               std::to_string(devices) + " for " + std::to_string(info.local_size) +
               " local ranks): NCCL tests skipped";
    if (!p.skip) bp::select_gpu_for_local_rank(info.local_rank);
    return p;
  }();
  return decided;
}

// Uploads and downloads with a whole-device synchronisation around them: the collectives run
// on the test's stream or the communicator's own non-blocking stream, neither of which waits
// for the legacy default stream a plain cudaMemcpy uses (its pageable upload may still be in
// flight when it returns).
template <typename T>
T* to_device(const std::vector<T>& host) {
  T* dev = nullptr;
  EXPECT_EQ(cudaMalloc(&dev, host.size() * sizeof(T)), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(dev, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice),
            cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  return dev;
}

template <typename T>
std::vector<T> to_host(const T* dev, std::size_t n) {
  std::vector<T> host(n);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // every stream's collectives have finished
  EXPECT_EQ(cudaMemcpy(host.data(), dev, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
  return host;
}

class NcclTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (placement().skip) GTEST_SKIP() << placement().reason;
    comm_ = std::make_unique<bp::NcclCommunicator>(MPI_COMM_WORLD, "world");
    ASSERT_EQ(cudaStreamCreate(&stream_), cudaSuccess);
  }
  void TearDown() override {
    comm_.reset();
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  std::unique_ptr<bp::NcclCommunicator> comm_;
  cudaStream_t stream_ = nullptr;
};

// Integer-valued floats: the sum is exact in any order, so every rank can check it exactly.
TEST_F(NcclTest, AllReduceSumAndMaxOnACallerStream) {
  const int r = comm_->rank(), P = comm_->size();
  const int n = 1 << 20;
  std::vector<float> mine(n);
  for (int i = 0; i < n; ++i) mine[i] = static_cast<float>((i % 97) * (r + 1));
  float* buf = to_device(mine);
  bp::Request req = comm_->all_reduce_async(buf, buf, n, bp::DataType::kFloat32,
                                            bp::ReduceOp::kSum, bp::Stream{stream_});
  req.wait();
  const auto got = to_host(buf, n);
  const float ranks_sum = static_cast<float>(P * (P + 1) / 2);
  for (int i = 0; i < n; i += 4099) ASSERT_EQ(got[i], (i % 97) * ranks_sum) << "element " << i;
  std::vector<double> value = {static_cast<double>(r) + 0.5};
  double* dv = to_device(value);
  comm_->all_reduce_async(dv, dv, 1, bp::DataType::kFloat64, bp::ReduceOp::kMax).wait();
  EXPECT_EQ(to_host(dv, 1)[0], P - 0.5);
  EXPECT_EQ(comm_->sequence(), 2u);
  cudaFree(buf);
  cudaFree(dv);
}

TEST_F(NcclTest, ReduceScatterAllGatherBroadcastBarrier) {
  const int r = comm_->rank(), P = comm_->size();
  const int block = 1000;
  std::vector<int64_t> send(static_cast<std::size_t>(P) * block);
  for (std::size_t i = 0; i < send.size(); ++i) send[i] = static_cast<int64_t>(i) + r;
  int64_t* dsend = to_device(send);
  int64_t* drecv = to_device(std::vector<int64_t>(block, -1));
  comm_->reduce_scatter_async(dsend, drecv, block, bp::DataType::kInt64).wait();
  const auto scattered = to_host(drecv, block);
  for (int i = 0; i < block; ++i) {
    ASSERT_EQ(scattered[i], P * (int64_t{r} * block + i) + P * (P - 1) / 2) << i;
  }
  int64_t* dgather = to_device(std::vector<int64_t>(static_cast<std::size_t>(P) * block, -1));
  comm_->all_gather_async(drecv, dgather, block, bp::DataType::kInt64, bp::Stream{stream_}).wait();
  const auto gathered = to_host(dgather, static_cast<std::size_t>(P) * block);
  for (int q = 0; q < P; ++q) {
    ASSERT_EQ(gathered[static_cast<std::size_t>(q) * block], P * (int64_t{q} * block) + P * (P - 1) / 2);
  }
  std::vector<float> root_data(333, r == 1 ? 7.0f : 0.0f);
  float* dbc = to_device(root_data);
  comm_->broadcast_async(dbc, 333, bp::DataType::kFloat32, 1).wait();
  EXPECT_EQ(to_host(dbc, 333), std::vector<float>(333, 7.0f));
  comm_->barrier();
  cudaFree(dsend);
  cudaFree(drecv);
  cudaFree(dgather);
  cudaFree(dbc);
}

}  // namespace

int main(int argc, char** argv) {
  bp::MpiSession session(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  placement();  // collective: every rank decides together before any test
  const int failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  int any_failed = 0;
  MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (session.world_rank() == 0 && any_failed && !failed) {
    std::fprintf(stderr, "some other rank had failures\n");
  }
  return any_failed;
}
