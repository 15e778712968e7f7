// FFTW's float (fftwf_*) and double (fftw_*) APIs behind one template, so the SSM kernels are
// written once for T = float / double. Complex buffers are std::complex<T>, which is
// layout-compatible with fftw(f)_complex (the FFTW manual, "Complex numbers").
#pragma once

#include <fftw3.h>

#include <complex>
#include <cstddef>
#include <mutex>

namespace brt::kernels::ssm {

// FFTW's planner (plan creation and destruction) uses global state and is not thread-safe
// (FFTW manual, "Thread safety"); execution of a finished plan is. Every planner call in
// this library takes this lock, so FFT classes may be constructed from several threads.
std::mutex& fftw_planner_mutex();

template <typename T>
struct Fftw;

template <>
struct Fftw<double> {
  using Plan = fftw_plan;
  static void* malloc(std::size_t bytes) { return fftw_malloc(bytes); }
  static void free(void* p) { fftw_free(p); }
  static Plan plan_r2c(int n, double* in, std::complex<double>* out) {
    return fftw_plan_dft_r2c_1d(n, in, reinterpret_cast<fftw_complex*>(out), FFTW_ESTIMATE);
  }
  static Plan plan_c2r(int n, std::complex<double>* in, double* out) {
    return fftw_plan_dft_c2r_1d(n, reinterpret_cast<fftw_complex*>(in), out, FFTW_ESTIMATE);
  }
  static void r2c(Plan p, double* in, std::complex<double>* out) {
    fftw_execute_dft_r2c(p, in, reinterpret_cast<fftw_complex*>(out));
  }
  static void c2r(Plan p, std::complex<double>* in, double* out) {
    fftw_execute_dft_c2r(p, reinterpret_cast<fftw_complex*>(in), out);
  }
  static void destroy(Plan p) { fftw_destroy_plan(p); }
};

template <>
struct Fftw<float> {
  using Plan = fftwf_plan;
  static void* malloc(std::size_t bytes) { return fftwf_malloc(bytes); }
  static void free(void* p) { fftwf_free(p); }
  static Plan plan_r2c(int n, float* in, std::complex<float>* out) {
    return fftwf_plan_dft_r2c_1d(n, in, reinterpret_cast<fftwf_complex*>(out), FFTW_ESTIMATE);
  }
  static Plan plan_c2r(int n, std::complex<float>* in, float* out) {
    return fftwf_plan_dft_c2r_1d(n, reinterpret_cast<fftwf_complex*>(in), out, FFTW_ESTIMATE);
  }
  static void r2c(Plan p, float* in, std::complex<float>* out) {
    fftwf_execute_dft_r2c(p, in, reinterpret_cast<fftwf_complex*>(out));
  }
  static void c2r(Plan p, std::complex<float>* in, float* out) {
    fftwf_execute_dft_c2r(p, reinterpret_cast<fftwf_complex*>(in), out);
  }
  static void destroy(Plan p) { fftwf_destroy_plan(p); }
};

}  // namespace brt::kernels::ssm

namespace brt::kernels::ssm {

// Plain complex products. std::complex's operator* follows C Annex G (inf/NaN recovery) and
// compiles to a libgcc call (__mulsc3/__muldc3) per product unless -fcx-limited-range is
// on; the spectra and powers here are finite, so the textbook formula is exact enough and
// vectorises.
template <typename T>
inline std::complex<T> cmul(std::complex<T> a, std::complex<T> b) {
  return {a.real() * b.real() - a.imag() * b.imag(), a.real() * b.imag() + a.imag() * b.real()};
}
// conj(a)·b, the product of a correlation.
template <typename T>
inline std::complex<T> cmul_conj(std::complex<T> a, std::complex<T> b) {
  return {a.real() * b.real() + a.imag() * b.imag(), a.real() * b.imag() - a.imag() * b.real()};
}

}  // namespace brt::kernels::ssm
