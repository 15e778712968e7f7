// How many cores this rank may use and how many ranks of its node share them: the
// CPUs in the rank's affinity mask (taskset, mpirun --bind-to, Slurm's cgroup), and
// the node-local ranks (MPI_COMM_TYPE_SHARED) whose masks overlap it.
#pragma once

#include <mpi.h>

namespace brt::parallel {

struct CpuShare {
  int cores_in_mask = 1;  // CPUs this process may run on
  int ranks_sharing = 1;  // ranks of this node whose masks overlap this one's, this one included
  int local_size = 1;     // ranks on this node
};

// Collective over `world` (MPI initialised); with MPI_COMM_NULL only this process is counted.
CpuShare query_cpu_share(MPI_Comm world);

}  // namespace brt::parallel
