// Measures the machine's sgemm rate with the backend's own BLAS and thread count: the peak
// that MFU figures divide by (median of 2048³ sgemm calls).
#pragma once

namespace brt::runtime {

struct GemmPeak {
  double gflops = 0;      // median over the timed calls
  double best_gflops = 0; // the fastest call: other load only ever slows a call down
  int size = 0;           // n of the n×n×n products
  int calls = 0;
  int threads = 0;        // OpenMP threads in use
};

// Runs `calls` timed n×n×n sgemm calls (after one warm-up) and reports the median and best rate.
GemmPeak measure_sgemm_peak(int n = 2048, int calls = 5);

}  // namespace brt::runtime
