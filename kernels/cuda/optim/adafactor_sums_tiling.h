// How the CUDA optimizer cuts a factored matrix's gradient for Adafactor's row and column sums
// (kernels/cuda/optim/optimizer.cu): tiles of kRows x kCols elements, each read once by one
// block, which writes one double partial per (column tile, row) and per (row tile, column);
// a second kernel adds each entry's partials in a fixed order. The partition depends on the
// shape alone, so the sums never depend on scheduling, and the grid fills the device however
// few columns a matrix has (one thread per column walking every row did not). Host-only: the
// optimizer sizes its scratch from it (core/optim/adafactor.cpp through the kernels' interface).
#pragma once

#include <cstdint>

#include "kernels/optimizer_kernels.h"

namespace brt::kernels::cuda {

struct AdafactorSumsTiling {
  static constexpr int kRows = 32, kCols = 128;  // a block of kCols threads
  // The fold: blocks of kFoldCols entries x kFoldLanes lanes (the partials of one entry split
  // over the lanes, so a tall matrix's many row tiles do not leave one thread per column).
  static constexpr int kFoldCols = 32, kFoldLanes = 16;
  bool tiled = false;        // P1 = P2 = 1 (a matrix, or P0 groups of matrices)
  int64_t rows = 0, cols = 0, groups = 1, n1 = 0;
  int64_t col_tiles = 0;     // across a row
  int64_t row_tiles = 0;     // down one group's n1 rows
  // Doubles of scratch: the row partials [col_tiles][rows], then the column partials
  // [row_tiles][groups * cols].
  int64_t row_partials() const { return col_tiles * rows; }
  int64_t scratch() const { return tiled ? row_partials() + row_tiles * groups * cols : 0; }
  BRT_HOST_DEVICE int64_t fold_row_blocks() const { return (rows + kFoldCols - 1) / kFoldCols; }
  int64_t fold_blocks() const { return fold_row_blocks() + (groups * cols + kFoldCols - 1) / kFoldCols; }
};

inline AdafactorSumsTiling adafactor_sums_tiling(const OptimTensor<float>& t) {
  AdafactorSumsTiling s;
  s.tiled = t.p1 == 1 && t.p2 == 1 && t.rows() > 0 && t.cols() > 0;
  if (!s.tiled) return s;
  s.rows = t.rows();
  s.cols = t.cols();
  s.groups = t.p0;
  s.n1 = t.n1;
  s.col_tiles = (s.cols + AdafactorSumsTiling::kCols - 1) / AdafactorSumsTiling::kCols;
  s.row_tiles = (s.n1 + AdafactorSumsTiling::kRows - 1) / AdafactorSumsTiling::kRows;
  return s;
}

}  // namespace brt::kernels::cuda
