#include "parallel/cpu_share.h"

#include <sched.h>

#include <cstring>
#include <vector>

namespace brt::parallel {

CpuShare query_cpu_share(MPI_Comm world) {
  CpuShare share;
  cpu_set_t mask;
  CPU_ZERO(&mask);
  if (sched_getaffinity(0, sizeof mask, &mask) == 0) share.cores_in_mask = CPU_COUNT(&mask);
  if (world == MPI_COMM_NULL) return share;
  MPI_Comm node = MPI_COMM_NULL;
  MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  MPI_Comm_size(node, &share.local_size);
  std::vector<unsigned char> all(sizeof mask * size_t(share.local_size));
  MPI_Allgather(&mask, int(sizeof mask), MPI_BYTE, all.data(), int(sizeof mask), MPI_BYTE, node);
  MPI_Comm_free(&node);
  share.ranks_sharing = 0;
  for (int r = 0; r < share.local_size; ++r) {
    cpu_set_t other, both;
    std::memcpy(&other, all.data() + sizeof mask * size_t(r), sizeof mask);
    CPU_AND(&both, &mask, &other);
    if (CPU_COUNT(&both) > 0) ++share.ranks_sharing;
  }
  return share;
}

}  // namespace brt::parallel
