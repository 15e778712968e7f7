// The optimizers on explicitly given kernels (kernels/optimizer_kernels.h): the CPU kernels
// passed by hand give bit-identical steps to the default, also on a store in guarded memory the
// host may only touch through the Memory's copies and inside kernel calls (as with device
// memory: the optimizer core never dereferences it), and without kernels such a store is
// refused.
#include <gtest/gtest.h>

#include <sys/mman.h>

#include <cstring>
#include <map>
#include <span>
#include <random>
#include <stdexcept>

#include "core/optim/grad_clip.h"
#include "core/optim/optimizer.h"
#include "tests/core/optim/optim_test_config.h"
#include "kernels/optimizer_kernels.h"

namespace brt::core {
namespace {

// Host memory the host may not touch (as device memory): every allocation is PROT_NONE except
// inside the Memory's own copies and inside kernel calls (GuardedKernels), so any direct
// dereference by the optimizer core faults and fails the test.
class GuardedMemory final : public kernels::Memory {
 public:
  ~GuardedMemory() override {
    for (const auto& [p, bytes] : live_) munmap(p, bytes);
  }
  std::string name() const override { return "guarded-host"; }
  bool host_accessible() const override { return false; }
  void* allocate(std::size_t bytes, const char* what) override {
    const std::size_t rounded = (bytes + kPage - 1) / kPage * kPage;
    void* p = mmap(nullptr, rounded, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);  // zeroed
    if (p == MAP_FAILED) throw std::runtime_error(std::string("GuardedMemory: mmap failed for ") + what);
    live_[p] = rounded;
    return p;
  }
  void release(void* p) noexcept override {
    const auto it = live_.find(p);
    if (it == live_.end()) return;
    munmap(p, it->second);
    live_.erase(it);
  }
  void to_host(void* dst, const void* src, std::size_t n) override { Open open(*this); std::memcpy(dst, src, n); }
  void from_host(void* dst, const void* src, std::size_t n) override { Open open(*this); std::memcpy(dst, src, n); }
  void copy(void* dst, const void* src, std::size_t n) override { Open open(*this); std::memmove(dst, src, n); }
  void fill_zero(void* dst, std::size_t n) override { Open open(*this); std::memset(dst, 0, n); }
  void synchronize() override {}

  // Opens every allocation for the lifetime of the object (a "kernel call").
  class Open {
   public:
    explicit Open(GuardedMemory& m) : m_(m) { m_.protect(PROT_READ | PROT_WRITE); }
    ~Open() { m_.protect(PROT_NONE); }
    Open(const Open&) = delete;
    Open& operator=(const Open&) = delete;

   private:
    GuardedMemory& m_;
  };

 private:
  static constexpr std::size_t kPage = 4096;
  void protect(int prot) {
    for (const auto& [p, bytes] : live_)
      if (mprotect(p, bytes, prot) != 0) throw std::runtime_error("GuardedMemory: mprotect failed");
  }
  std::map<void*, std::size_t> live_;
};

// The CPU kernels with the guarded memory open for exactly the duration of each call.
class GuardedKernels final : public kernels::OptimizerKernels<float> {
  using Tensor = kernels::OptimTensor<float>;
  using Scalars = kernels::OptimStepScalars<float>;

 public:
  explicit GuardedKernels(GuardedMemory& memory) : memory_(memory), cpu_(kernels::make_cpu_optimizer_kernels<float>()) {}
  const char* name() const override { return "guarded-cpu"; }
  kernels::Memory& memory() override { return memory_; }
  void sum_squares(kernels::OptimField f, const kernels::OptimChunk* c, int64_t n, const Tensor* t, double* p) override {
    GuardedMemory::Open open(memory_);
    cpu_->sum_squares(f, c, n, t, p);
  }
  void grad_norm_finish(int32_t n, const int64_t* first, double* p, double clip, const double* loss,
                        Scalars* step) override {
    GuardedMemory::Open open(memory_);
    cpu_->grad_norm_finish(n, first, p, clip, loss, step);
  }
  void segment_sums(int32_t n, const int64_t* first, const double* p, double* sums) override {
    GuardedMemory::Open open(memory_);
    cpu_->segment_sums(n, first, p, sums);
  }
  void gather_stats(int64_t n, const int64_t* index, const double* from, double* to) override {
    GuardedMemory::Open open(memory_);
    cpu_->gather_stats(n, index, from, to);
  }
  void scatter_stats(int64_t n, const int64_t* index, const double* from, double* to) override {
    GuardedMemory::Open open(memory_);
    cpu_->scatter_stats(n, index, from, to);
  }
  void scale(float* x, int64_t n, float s) override {
    GuardedMemory::Open open(memory_);
    cpu_->scale(x, n, s);
  }
  void adamw_update(const kernels::AdamWStep<float>& s, const Scalars* step, const kernels::OptimChunk* c, int64_t n,
                    const Tensor* t) override {
    GuardedMemory::Open open(memory_);
    cpu_->adamw_update(s, step, c, n, t);
  }
  void adafactor_second_moment(const kernels::OptimChunk* c, int64_t n, const Tensor* t, const Scalars* step, float eps,
                               double* psq, double* ysq) override {
    GuardedMemory::Open open(memory_);
    cpu_->adafactor_second_moment(c, n, t, step, eps, psq, ysq);
  }
  void adafactor_gradient_sums(const Tensor& t, const Scalars* step, float eps, double* r, double* c, double* s) override {
    GuardedMemory::Open open(memory_);
    cpu_->adafactor_gradient_sums(t, step, eps, r, c, s);
  }
  void adafactor_update_factors(const Tensor& t, const Scalars* step, const double* r, const double* c,
                                double* m) override {
    GuardedMemory::Open open(memory_);
    cpu_->adafactor_update_factors(t, step, r, c, m);
  }
  void adafactor_compute_factors(const Tensor& t, const double* m) override {
    GuardedMemory::Open open(memory_);
    cpu_->adafactor_compute_factors(t, m);
  }
  void adafactor_factored_update_squares(const kernels::OptimChunk* c, int64_t n, const Tensor* t, const Scalars* step,
                                         double* ysq) override {
    GuardedMemory::Open open(memory_);
    cpu_->adafactor_factored_update_squares(c, n, t, step, ysq);
  }
  void adafactor_coefficients(int32_t n, const int64_t* first, const int64_t* count, const double* psq,
                              const double* ysq, const kernels::AdafactorScalars& s, const Scalars* step,
                              float* coef) override {
    GuardedMemory::Open open(memory_);
    cpu_->adafactor_coefficients(n, first, count, psq, ysq, s, step, coef);
  }
  void adafactor_apply(const kernels::OptimChunk* c, int64_t n, const Tensor* t, const float* coef, const Scalars* step,
                       float b1, float omb1) override {
    GuardedMemory::Open open(memory_);
    cpu_->adafactor_apply(c, n, t, coef, step, b1, omb1);
  }

 private:
  GuardedMemory& memory_;
  std::unique_ptr<kernels::OptimizerKernels<float>> cpu_;
};

// Sums every reduced statistic's entries (reads the host arrays the seam hands over).
class IdentityReducer final : public StatReducer {
 public:
  void reduce(StatKind, std::span<double> sums, std::span<const StatBlock>) override {
    for (double s : sums) checksum += s;
    ++calls;
  }
  double checksum = 0;
  int calls = 0;
};

// A reducer that sums on the device with nothing to add (one rank): each reduction moves every
// entry out through the kernels' gather (in reverse order) and back through their scatter, on
// the store's memory, so the device path runs whole; the host path is refused.
class DeviceIdentityReducer final : public StatReducer {
 public:
  void reduce(StatKind, std::span<double>, std::span<const StatBlock>) override {
    throw std::logic_error("DeviceIdentityReducer: the host path was taken");
  }
  bool reduces_on_device() const override { return true; }
  void reduce_on_device(StatKind, double* sums, int64_t n, std::span<const StatBlock>,
                        kernels::StatKernels& moves) override {
    std::vector<int64_t> backwards(static_cast<size_t>(n));
    for (int64_t k = 0; k < n; ++k) backwards[size_t(k)] = n - 1 - k;
    kernels::Buffer<int64_t> index(moves.memory(), backwards.size());
    index.from_host(backwards);
    kernels::Buffer<double> run(moves.memory(), backwards.size());
    moves.gather_stats(n, index.data(), sums, run.data());
    moves.scatter_stats(n, index.data(), run.data(), sums);
    ++calls;
  }
  int calls = 0;
};

void declare(ParamStore<float>& store, kernels::Memory& memory) {
  const std::vector<std::vector<int64_t>> shapes = {{200, 260}, {2, 130, 150}, {50}, {300, 7}, {140, 3, 300}};
  for (size_t i = 0; i < shapes.size(); ++i) {
    ParamSpec spec;
    char name[16];
    std::snprintf(name, sizeof name, "w%d", static_cast<int>(i));
    spec.name = name;
    spec.shape = shapes[i];
    spec.init = {InitKind::kNormal, 0.5, 1.0, 0};
    store.declare(spec);
  }
  store.finalize(memory);
  store.initialize(11);
}

void set_grads(ParamStore<float>& store, int step) {
  std::mt19937_64 rng(77 + step);
  std::normal_distribution<float> normal;
  std::vector<float> g(size_t(store.total_numel()));
  for (float& x : g) x = normal(rng);
  store.memory().from_host(store.grads(), g.data(), g.size() * sizeof(float));
}

std::vector<float> values(ParamStore<float>& store) {
  std::vector<float> out(size_t(store.total_numel()));
  store.memory().to_host(out.data(), store.values(), out.size() * sizeof(float));
  return out;
}

OptimConfig config(OptimKind kind) { return test::clipped_config(kind); }

// The weights and every state tensor of `b` (its store in guarded memory) equal `a`'s (host
// memory) bit for bit; both list the same tensors, unowned ones (ZeRO-1) without data.
void expect_same_weights_and_state(ParamStore<float>& host_store, Optimizer<float>& a, ParamStore<float>& guarded_store,
                                   Optimizer<float>& b, GuardedMemory& guarded) {
  const auto va = values(host_store), vb = values(guarded_store);
  ASSERT_EQ(va.size(), vb.size());
  EXPECT_EQ(std::memcmp(va.data(), vb.data(), va.size() * sizeof(float)), 0) << "weights";
  const auto state_a = a.state(), state_b = b.state();
  ASSERT_EQ(state_a.size(), state_b.size());
  for (size_t k = 0; k < state_a.size(); ++k) {
    ASSERT_EQ(state_a[k].data == nullptr, state_b[k].data == nullptr) << state_a[k].name;
    if (state_a[k].data == nullptr) continue;
    std::vector<float> sb(size_t(state_b[k].numel()));
    guarded.to_host(sb.data(), state_b[k].data, sb.size() * sizeof(float));
    EXPECT_EQ(std::memcmp(state_a[k].data, sb.data(), sb.size() * sizeof(float)), 0) << state_a[k].name;
  }
}

// The same optimizer twice under a ZeRO-1 mask: `a` on a store in host memory with the CPU
// kernels, `b` on a store in guarded memory with the guarded kernels.
struct HostAndGuarded {
  explicit HostAndGuarded(OptimKind kind) : kernels(guarded) {
    declare(host, kernels::host_memory());
    declare(on_guarded, guarded);
    a = make_optimizer(config(kind), host, kOwned);
    b = make_optimizer(config(kind), on_guarded, kOwned, &kernels);
  }
  void set_grads(int step) {
    core::set_grads(host, step);
    core::set_grads(on_guarded, step);
  }
  void expect_same_weights_and_state() { core::expect_same_weights_and_state(host, *a, on_guarded, *b, guarded); }

  inline static const std::vector<bool> kOwned = {true, false, true, true, true};
  GuardedMemory guarded;
  GuardedKernels kernels;
  ParamStore<float> host, on_guarded;
  std::unique_ptr<Optimizer<float>> a, b;
};

TEST(OptimizerKernels, ExplicitCpuKernelsMatchTheDefaultBitForBit) {
  for (OptimKind kind : {OptimKind::kAdafactor, OptimKind::kAdamW}) {
    ParamStore<float> plain, explicit_store;
    declare(plain, kernels::host_memory());
    declare(explicit_store, kernels::host_memory());
    auto cpu = kernels::make_cpu_optimizer_kernels<float>();
    auto a = make_optimizer(config(kind), plain);
    auto b = make_optimizer(config(kind), explicit_store, {}, cpu.get());
    EXPECT_EQ(&b->kernels(), cpu.get());
    for (int t = 0; t < 4; ++t) {
      set_grads(plain, t);
      set_grads(explicit_store, t);
      const StepStats sa = a->step(), sb = b->step();
      EXPECT_EQ(sa.grad_norm, sb.grad_norm);
    }
    const auto va = values(plain), vb = values(explicit_store);
    EXPECT_EQ(std::memcmp(va.data(), vb.data(), va.size() * sizeof(float)), 0);
  }
}

// ZeRO-1 mask and a reducer included: the paths that stage statistics through the host.
TEST(OptimizerKernels, GuardedStoreStepsBitIdenticallyToHostMemory) {
  for (OptimKind kind : {OptimKind::kAdafactor, OptimKind::kAdamW}) {
    HostAndGuarded p(kind);
    IdentityReducer ra, rb;
    p.a->set_reducer(&ra);
    p.b->set_reducer(&rb);
    for (int t = 0; t < 4; ++t) {
      p.set_grads(t);
      const StepStats sa = p.a->step(), sb = p.b->step();
      EXPECT_EQ(sa.grad_norm, sb.grad_norm);
      EXPECT_EQ(sa.clip_scale, sb.clip_scale);
    }
    EXPECT_EQ(ra.calls, rb.calls);
    EXPECT_EQ(ra.checksum, rb.checksum);
    p.expect_same_weights_and_state();
  }
}

// Adafactor's coefficients made by the kernels from the chunk partials (one rank, no reducer:
// nothing read back) equal the host's from the reduced sums (an identity reducer forces that
// path) bit for bit, weights and state, over steps with the update clip active on some tensors.
TEST(OptimizerKernels, AdafactorCoefficientsOnTheDeviceEqualTheHostsBitForBit) {
  ParamStore<float> device_path, host_path;
  declare(device_path, kernels::host_memory());
  declare(host_path, kernels::host_memory());
  OptimConfig c = config(OptimKind::kAdafactor);
  c.update_clip = 0.5;  // RMS(y) > clip on the first steps
  auto a = make_optimizer(c, device_path);
  auto b = make_optimizer(c, host_path);
  IdentityReducer reducer;
  b->set_reducer(&reducer);
  for (int t = 0; t < 4; ++t) {
    set_grads(device_path, t);
    set_grads(host_path, t);
    a->step();
    b->step();
  }
  EXPECT_GT(reducer.calls, 0);
  const auto va = values(device_path), vb = values(host_path);
  EXPECT_EQ(std::memcmp(va.data(), vb.data(), va.size() * sizeof(float)), 0);
  const auto sa = a->state(), sb = b->state();
  for (size_t k = 0; k < sa.size(); ++k)
    EXPECT_EQ(std::memcmp(sa[k].data, sb[k].data, size_t(sa[k].numel()) * sizeof(float)), 0) << sa[k].name;
}

// The statistics' moves against a plain loop on seeded random partials: per-segment totals
// (empty segments included) in ChunkTable::sum_per_param's order, and gather / scatter by an
// index permutation; bit for bit (the same additions in the same order, or no arithmetic).
TEST(StatKernels, SegmentSumsGatherAndScatterEqualAPlainLoop) {
  auto k = kernels::make_cpu_optimizer_kernels<float>();
  std::mt19937_64 rng(5);
  std::normal_distribution<double> normal;
  std::vector<double> partial(97);
  for (double& x : partial) x = normal(rng);
  const std::vector<int64_t> first = {0, 3, 3, 40, 41, 97};
  std::vector<double> sums(first.size() - 1, -1.0);
  k->segment_sums(int32_t(sums.size()), first.data(), partial.data(), sums.data());
  for (size_t p = 0; p + 1 < first.size(); ++p) {
    double want = 0.0;
    for (int64_t c = first[p]; c < first[p + 1]; ++c) want += partial[size_t(c)];
    EXPECT_EQ(sums[p], want) << "segment " << p;
  }
  std::vector<int64_t> index(partial.size());
  for (size_t i = 0; i < index.size(); ++i) index[i] = int64_t((i * 31) % index.size());  // a permutation
  std::vector<double> run(index.size()), back(partial.size(), 0.0);
  k->gather_stats(int64_t(index.size()), index.data(), partial.data(), run.data());
  for (size_t i = 0; i < index.size(); ++i) EXPECT_EQ(run[i], partial[size_t(index[i])]);
  k->scatter_stats(int64_t(index.size()), index.data(), run.data(), back.data());
  EXPECT_EQ(back, partial);
}

// A reducer that sums on the device (StatReducer::reduces_on_device) makes the optimizers take
// the device path even on a store the host cannot read: per-parameter totals, the reduction
// through the kernels' moves, the norm and Adafactor's coefficients made from the totals, step()
// and the enqueued step alike; bit for bit the host reducer's steps (ZeRO-1 mask included).
TEST(OptimizerKernels, ADeviceReducersStepsEqualTheHostReducersBitForBit) {
  for (OptimKind kind : {OptimKind::kAdafactor, OptimKind::kAdamW}) {
    HostAndGuarded p(kind);
    IdentityReducer ra;
    DeviceIdentityReducer rb;
    p.a->set_reducer(&ra);
    p.b->set_reducer(&rb);
    EXPECT_FALSE(p.a->device_steps());
    EXPECT_TRUE(p.b->device_steps());
    for (int t = 0; t < 4; ++t) {
      p.set_grads(t);
      const StepStats sa = p.a->step();
      StepStats sb;
      if (t % 2 == 0) {
        sb = p.b->step();
      } else {
        p.b->stage_step();
        p.b->enqueue_step();
        sb = p.b->finish_step();
        EXPECT_TRUE(sb.applied);
      }
      EXPECT_EQ(sa.grad_norm, sb.grad_norm) << "step " << t;
      EXPECT_EQ(sa.clip_scale, sb.clip_scale) << "step " << t;
    }
    EXPECT_EQ(ra.calls, rb.calls);
    p.expect_same_weights_and_state();
  }
}

TEST(OptimizerKernels, StoreTheHostCannotReadNeedsKernels) {
  GuardedMemory guarded;
  ParamStore<float> store;
  declare(store, guarded);
  // The guard works: a host read outside the Memory's copies and the kernels faults.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH({ [[maybe_unused]] volatile float x = store.values()[0]; }, "");
  EXPECT_THROW(make_optimizer(config(OptimKind::kAdafactor), store), std::runtime_error);
  EXPECT_THROW(GradNorm<float>{store}, std::runtime_error);
  GuardedKernels guarded_kernels(guarded);
  GradNorm<float> norm(store, nullptr, &guarded_kernels);
  set_grads(store, 0);
  double expected = 0;
  std::vector<float> g(size_t(store.total_numel()));
  guarded.to_host(g.data(), store.grads(), g.size() * sizeof(float));
  for (float x : g) expected += double(x) * x;
  EXPECT_NEAR(norm.compute(store), std::sqrt(expected), 1e-12 * std::sqrt(expected));
  const double before = clip_gradients(store, norm, 10.0);
  EXPECT_NEAR(before, std::sqrt(expected), 1e-12 * before);
  EXPECT_NEAR(norm.compute(store), 10.0, 1e-5);
}

}  // namespace
}  // namespace brt::core
