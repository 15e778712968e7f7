#include "launch/cli/version.h"

namespace brt::launch {
const char* version() { return "0.1.0"; }
}  // namespace brt::launch
