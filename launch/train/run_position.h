// Where a training run stands: what a checkpoint records and a resume or rollback returns to.
#pragma once

#include <cstdint>

namespace brt::launch {

struct RunPosition {
  int64_t step = 0;         // training steps completed (applied or skipped)
  int64_t tokens_seen = 0;  // input tokens consumed by training
};

}  // namespace brt::launch
