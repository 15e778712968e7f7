#include "kernels/cuda/ssm/ssm_state_staged.h"

#include <cstdint>
#include <vector>

namespace brt::kernels::cuda {

namespace {

// Host copies of device arrays, written back on request.
class Staging {
 public:
  explicit Staging(Memory& memory) : memory_(memory) {}
  template <typename T>
  T* in(const T* device, int64_t n) {
    if (device == nullptr) return nullptr;
    auto& v = host_.emplace_back(size_t(n) * sizeof(T));
    memory_.to_host(v.data(), device, v.size());
    return reinterpret_cast<T*>(v.data());
  }
  // A staged array whose host values go back to `device` at write_back().
  template <typename T>
  T* inout(T* device, int64_t n) {
    T* host = in(device, n);
    if (host) back_.push_back({device, host, size_t(n) * sizeof(T)});
    return host;
  }
  void write_back() {
    for (const auto& b : back_) memory_.from_host(b.device, b.host, b.bytes);
  }

 private:
  struct Back {
    void* device;
    const void* host;
    size_t bytes;
  };
  Memory& memory_;
  std::vector<std::vector<unsigned char>> host_;
  std::vector<Back> back_;
};

ssm::S4dParams<float> stage_params(Staging& s, const ssm::S4dCarryDims& d,
                                   const ssm::S4dParams<float>& p) {
  const int64_t R = d.filters(), RM = R * d.modes;
  return {s.in(p.log_dt, R), s.in(p.log_neg_a_re, RM), s.in(p.a_im, RM), s.in(p.c_re, RM),
          s.in(p.c_im, RM)};
}

ssm::S4dGrads<float> stage_grads(Staging& s, const ssm::S4dCarryDims& d,
                                 const ssm::S4dGrads<float>& g) {
  const int64_t R = d.filters(), RM = R * d.modes;
  return {s.inout(g.log_dt, R), s.inout(g.log_neg_a_re, RM), s.inout(g.a_im, RM), nullptr, nullptr};
}

int64_t state_elems(const ssm::S4dCarryDims& d) {
  return int64_t{d.batch} * d.filters() * d.modes * 2;
}

}  // namespace

void staged_s4d_state_advance(Memory& memory, const ssm::S4dCarryDims& d,
                              const ssm::S4dParams<float>& p, const double* h, double* x,
                              bool adjoint) {
  Staging s(memory);
  const auto hp = stage_params(s, d, p);
  ssm::s4d_state_advance(d, hp, s.in(h, state_elems(d)), s.inout(x, state_elems(d)), adjoint);
  s.write_back();
}

void staged_s4d_state_apply_grad(Memory& memory, const ssm::S4dCarryDims& d,
                                 const ssm::S4dParams<float>& p, const float* dy, double* g) {
  Staging s(memory);
  const auto hp = stage_params(s, d, p);
  const int64_t rows = int64_t{d.batch} * d.channels * d.length * d.features;
  ssm::s4d_state_apply_grad(d, hp, s.in(dy, rows), s.inout(g, state_elems(d)));
  s.write_back();
}

void staged_s4d_state_advance_backward(Memory& memory, const ssm::S4dCarryDims& d,
                                       const ssm::S4dParams<float>& p, const double* x_prev,
                                       const double* gnext, const ssm::S4dGrads<float>& g) {
  Staging s(memory);
  const auto hp = stage_params(s, d, p);
  ssm::s4d_state_advance_backward(d, hp, s.in(x_prev, state_elems(d)), s.in(gnext, state_elems(d)),
                                  stage_grads(s, d, g));
  s.write_back();
}

void staged_s4d_summary_backward(Memory& memory, const ssm::S4dCarryDims& d,
                                 const ssm::S4dParams<float>& p, const float* u, const double* dh,
                                 float* du, const ssm::S4dGrads<float>& g) {
  Staging s(memory);
  const auto hp = stage_params(s, d, p);
  const int64_t rows = int64_t{d.batch} * d.length * d.features;
  ssm::s4d_summary_backward(d, hp, s.in(u, rows), s.in(dh, state_elems(d)), s.inout(du, rows),
                            stage_grads(s, d, g));
  s.write_back();
}

}  // namespace brt::kernels::cuda
