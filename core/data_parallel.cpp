#include "core/data_parallel.h"

#include <chrono>
#include <cmath>
#include <stdexcept>

#include "core/optim/adafactor.h"

namespace brt::core {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace

ParamPartition partition_parameters(const std::vector<int64_t>& param_numels, int ranks) {
  if (ranks < 1) throw std::invalid_argument("partition_parameters: ranks must be >= 1");
  const size_t n = param_numels.size();
  std::vector<int64_t> bound(n + 1, 0);  // bound[p]: arena offset where parameter p starts
  for (size_t p = 0; p < n; ++p) bound[p + 1] = bound[p] + param_numels[p];
  const int64_t total = bound[n];
  ParamPartition out;
  out.owner.assign(n, 0);
  size_t cut = 0;  // index into bound of the current run's start
  for (int r = 0; r < ranks; ++r) {
    size_t end = n;
    if (r + 1 < ranks) {
      // The boundary nearest to the ideal cut, never before the run's start.
      const double ideal = double(total) * double(r + 1) / double(ranks);
      end = cut;
      while (end < n && std::fabs(double(bound[end + 1]) - ideal) <= std::fabs(double(bound[end]) - ideal))
        ++end;
    }
    for (size_t p = cut; p < end; ++p) out.owner[p] = r;
    out.rank_ranges.emplace_back(bound[cut], bound[end]);
    cut = end;
  }
  return out;
}

int64_t expected_optimizer_state_elems(const core::OptimConfig& config,
                                       const std::vector<core::ParamSpec>& specs,
                                       const std::vector<bool>& owned) {
  const core::OptimConfig& c = config;  // kind and min_dim_to_factor need no resolve()
  int64_t total = 0;
  for (size_t p = 0; p < specs.size(); ++p) {
    if (!owned.empty() && !owned[p]) continue;
    const int64_t n = specs[p].numel();
    if (c.kind == core::OptimKind::kAdamW) {
      total += 2 * n;  // m, v
      continue;
    }
    total += n;  // momentum m
    const auto axes = core::adafactor_factor_axes(specs[p].shape, c.min_dim_to_factor);
    if (!axes) {
      total += n;  // full second moment v
    } else {  // R drops the largest axis, C the second-largest (of this rank's TP slice)
      const std::vector<int64_t> local = specs[p].local_shape();
      total += n / local[size_t(axes->largest)] + n / local[size_t(axes->normalized)];
    }
  }
  return total;
}

template <typename T>
DataParallel<T>::DataParallel(parallel::Communicator& group, core::Model<T>& model, const DpSettings& settings,
                              parallel::Communicator* device_group, parallel::Stream stream)
    : group_(group), arena_comm_(device_group ? *device_group : group), stream_(stream), model_(model), settings_(settings) {
  if (device_group != nullptr && device_group->size() != group.size())
    throw std::logic_error("DataParallel: device group '" + device_group->name() + "' has " +
                           std::to_string(device_group->size()) + " ranks, the dp_cp group " +
                           std::to_string(group.size()));
  auto& store = model.params();
  std::vector<int64_t> numels;
  for (const auto& p : store.params()) numels.push_back(p.numel());
  partition_ = partition_parameters(numels, group.size());
  if (settings.zero && group.size() > 1) {
    owned_.assign(numels.size(), false);
    for (size_t p = 0; p < numels.size(); ++p) owned_[p] = partition_.owner[p] == group.rank();
  }
  if (group.size() > 1) {
    if (!(settings.bucket_mb > 0))
      throw std::invalid_argument("train.bucket_mb must be > 0 (got " + std::to_string(settings.bucket_mb) + ")");
    const int64_t bucket_elems =
        std::max<int64_t>(1, int64_t(settings.bucket_mb * 1024.0 * 1024.0 / double(sizeof(T))));
    std::vector<std::pair<int64_t, int64_t>> ranges;
    for (int i = 0; i < model.num_layers(); ++i) ranges.push_back(model.layer_grad_range(i));
    buckets_ = std::make_unique<parallel::GradBuckets<T>>(
        arena_comm_, store.grads(), parallel::plan_grad_buckets(store.total_numel(), ranges, bucket_elems),
        settings.overlap, stream_);
    model.set_backward_hook([this](int layer) {
      if (!partial_) buckets_->mark_ready(layer);
    });
  }
}

template <typename T>
DataParallel<T>::~DataParallel() {
  if (buckets_) model_.set_backward_hook(nullptr);
}

template <typename T>
int DataParallel<T>::buckets() const {
  return buckets_ ? int(buckets_->buckets().size()) : 0;
}

template <typename T>
int64_t DataParallel<T>::global_count(int64_t local_count) {
  times_ = {};
  if (group_.size() == 1) return local_count;
  const auto t0 = Clock::now();
  const int64_t global = group_.all_reduce_value<int64_t>(local_count);
  times_.other += seconds_since(t0);
  return global;
}

template <typename T>
void DataParallel<T>::begin_backward() {
  partial_ = false;
  if (buckets_) buckets_->begin_step();
}

template <typename T>
void DataParallel<T>::end_backward() {
  if (!buckets_) return;
  buckets_->finish();
  times_.grads_in_hooks = buckets_->times().in_hooks;
  times_.grads_in_finish = buckets_->times().in_finish;
}

template <typename T>
void DataParallel<T>::after_update() {
  if (owned_.empty()) return;
  // ZeRO-1: every run of parameters from the rank that updated it.
  const auto t0 = Clock::now();
  T* values = model_.params().values();
  std::vector<parallel::Request> pending;
  for (int r = 0; r < group_.size(); ++r) {
    const auto [b, e] = partition_.rank_ranges[size_t(r)];
    if (e > b) pending.push_back(arena_comm_.broadcast_async(std::span<T>(values + b, size_t(e - b)), r, stream_));
  }
  parallel::wait_all(pending);
  times_.other += seconds_since(t0);
}

template <typename T>
double DataParallel<T>::global_nats(double local_nats) {
  if (group_.size() == 1) return local_nats;
  const auto t0 = Clock::now();
  const double global = group_.all_reduce_value<double>(local_nats);
  times_.other += seconds_since(t0);
  return global;
}

template <typename T>
bool DataParallel<T>::any(bool flag) {
  if (group_.size() == 1) return flag;
  const auto t0 = Clock::now();
  const int64_t v = group_.all_reduce_value<int64_t>(flag ? 1 : 0, parallel::ReduceOp::kMax);
  times_.other += seconds_since(t0);
  return v != 0;
}

template <typename T>
DpMemoryReport rank_memory_report(const core::Model<T>& model, core::Optimizer<T>& optimizer,
                                  const std::vector<bool>& owned) {
  const core::MemoryReport m = model.memory_report();
  DpMemoryReport r{m.parameters, m.gradients, 0, m.activations, m.carried_state, m.backward_scratch};
  int64_t state_elems = 0;
  for (const auto& s : optimizer.state())
    if (s.data != nullptr) state_elems += s.numel();
  std::vector<core::ParamSpec> specs;
  for (int p = 0; p < optimizer.store().size(); ++p) specs.push_back(optimizer.store()[p].spec);
  const int64_t expected = expected_optimizer_state_elems(optimizer.config(), specs, owned);
  if (state_elems != expected || state_elems != optimizer.state_elems_allocated())
    throw std::logic_error("optimizer state holds " + std::to_string(state_elems) + " elements (" +
                           std::to_string(optimizer.state_elems_allocated()) + " allocated); docs/model.md "
                           "§10c needs " + std::to_string(expected) + " for the parameters this rank owns");
  r.optimizer = state_elems * int64_t(sizeof(T));
  return r;
}

template class DataParallel<float>;
template class DataParallel<double>;
template DpMemoryReport rank_memory_report(const core::Model<float>&, core::Optimizer<float>&,
                                           const std::vector<bool>&);
template DpMemoryReport rank_memory_report(const core::Model<double>&, core::Optimizer<double>&,
                                           const std::vector<bool>&);

}  // namespace brt::core
