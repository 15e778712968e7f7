// Whole-tensor statistics for the optimizers (model.md §10c), computed deterministically and with
// a seam for sharded training.
//
// Every statistic that spans a logical tensor (squared norms, Adafactor's row/column means, the
// mean of R) is first formed as partial sums in double over the elements this process holds and
// then handed to StatReducer::reduce() before it is used. One process needs nothing (a null
// reducer is the identity). A tensor-parallel or ZeRO caller installs a reducer that all-reduces
// each block over the ranks that share that parameter; the kinds below say what is being summed.
//
// Determinism: sums are taken over fixed-size chunks (ChunkTable), each chunk summed serially,
// and the chunk partials added in index order — the result depends only on the data, not on the
// number of OpenMP threads.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/param_store.h"
#include "kernels/optimizer_kernels.h"

namespace brt::core {

enum class StatKind {
  kGradSquares,    // one entry per parameter: sum g^2 (global gradient norm)
  kParamSquares,   // one entry per parameter: sum p^2 (Adafactor parameter scale)
  kUpdateSquares,  // one entry per parameter: sum y^2 (Adafactor update clipping)
  kFactorRows,     // factored Adafactor tensors: sums of G along the tensor's second axis
  kFactorCols,     // factored Adafactor tensors: sums of G along the tensor's first axis
  kFactorMean,     // factored Adafactor tensors: sums of R along R's normalised axis
};

// sums[offset, offset + count) belong to parameter `param` (an index into the ParamStore).
struct StatBlock {
  int param = 0;
  int64_t offset = 0;
  int64_t count = 0;
  // Whether these sums run along the parameter's tensor-parallel split axis, so each rank holds
  // a partial sum of the whole's (true for the per-parameter kinds). A factored statistic summed
  // along an unsplit axis is already complete for the slice this rank holds (model.md §10c).
  bool spans_shard = true;
};

class StatReducer {
 public:
  virtual ~StatReducer() = default;
  // Replace every partial sum by its total over the ranks sharing the parameter. Called a
  // fixed number of times per step, with all parameters of one kind batched together.
  virtual void reduce(StatKind kind, std::span<double> sums, std::span<const StatBlock> blocks) = 0;

  // Whether reduce_on_device() may be called: the same totals made where the statistics live,
  // enqueued behind the kernels that wrote them without a host wait, so that an optimizer under
  // this reducer can enqueue its whole step (Optimizer::device_steps; docs/gpu.md, "The
  // optimizer's statistics across ranks").
  virtual bool reduces_on_device() const { return false; }
  // reduce() on sums[0, n) in `moves`' memory (the optimizer's), with its gather and scatter.
  virtual void reduce_on_device(StatKind kind, double* sums, int64_t n, std::span<const StatBlock> blocks,
                                kernels::StatKernels& moves);
};

// Splits every parameter of a store into chunks of at most `chunk_elems` elements, in store
// order. A sweep runs `omp parallel for` over chunks; partials come back in a fixed order.
struct ParamChunk {
  int param = 0;
  int64_t begin = 0;  // element range inside the parameter
  int64_t end = 0;
};

class ChunkTable {
 public:
  static constexpr int64_t kDefaultChunk = int64_t{1} << 15;

  ChunkTable() = default;
  // `include` (empty = every parameter) leaves the others without chunks: their per-parameter
  // sums are 0 and sweeps skip them (ZeRO-1: a rank updates only the parameters it owns).
  template <typename T>
  explicit ChunkTable(const ParamStore<T>& store, int64_t chunk_elems = kDefaultChunk,
                      const std::vector<bool>& include = {});

  const std::vector<ParamChunk>& chunks() const { return chunks_; }
  int64_t size() const { return static_cast<int64_t>(chunks_.size()); }
  int params() const { return static_cast<int>(first_.size()) - 1; }
  // first_chunks()[p] .. first_chunks()[p + 1]: parameter p's chunks (params() + 1 entries).
  const std::vector<int64_t>& first_chunks() const { return first_; }
  // Adds partial[c] over each parameter's chunks, in chunk order, into per_param[p].
  void sum_per_param(std::span<const double> partial, std::span<double> per_param) const;
  // Blocks describing one entry per parameter (for the per-parameter StatKinds).
  const std::vector<StatBlock>& per_param_blocks() const { return per_param_blocks_; }

 private:
  std::vector<ParamChunk> chunks_;
  std::vector<int64_t> first_;  // first_[p] .. first_[p+1]: parameter p's chunks
  std::vector<StatBlock> per_param_blocks_;
};

// (kernels/optimizer_kernels.h: the per-chunk sum every host sweep uses.)
using kernels::lane_sum;

// Per-parameter totals for a reducer that sums on the device (StatReducer::reduces_on_device),
// in the optimizer's memory: each parameter's chunk partials added in chunk order
// (ChunkTable::sum_per_param's sums, bit for bit), then summed across ranks. Laid out as one
// chunk per parameter (chunks() = 0, 1, .., n), so the kernels that take chunk partials
// (grad_norm_finish, adafactor_coefficients) read the totals as they are: 0.0 + x is x.
class DeviceParamTotals {
 public:
  DeviceParamTotals() = default;
  DeviceParamTotals(const ChunkTable& table, kernels::Memory& memory);
  // Enqueues the totals of `partial` (one per chunk of the table) and their reduction.
  void reduce(StatKind kind, const double* partial, StatReducer& reducer, kernels::StatKernels& k);
  double* totals() { return totals_.data(); }
  const int64_t* chunks() const { return one_each_.data(); }

 private:
  std::vector<StatBlock> blocks_;
  kernels::Buffer<int64_t> first_chunk_, one_each_;
  kernels::Buffer<double> totals_;
};

// The chunk list of `table` for the optimizer kernels (tensor = parameter index), in `memory`.
kernels::Buffer<kernels::OptimChunk> upload_chunks(const ChunkTable& table, kernels::Memory& memory);

// The optimizer kernels to run on: `given` when not null (it must outlive the user; device
// kernels must work on the store's own memory), otherwise CPU kernels created into `owned`,
// which need a store in host memory. Throws std::runtime_error naming `who` on a mismatch.
template <typename T>
kernels::OptimizerKernels<T>& resolve_optimizer_kernels(kernels::OptimizerKernels<T>* given,
                                                        const ParamStore<T>& store,
                                                        std::unique_ptr<kernels::OptimizerKernels<T>>& owned,
                                                        const char* who);

// Copies n doubles between backend memory and a host array (the StatReducer's side): the
// arrays are one entry per chunk, parameter or factor entry, so the copies are small.
void stats_to_host(kernels::Memory& memory, const kernels::Buffer<double>& src, std::vector<double>& dst);
void stats_from_host(kernels::Memory& memory, const std::vector<double>& src, kernels::Buffer<double>& dst);

}  // namespace brt::core
