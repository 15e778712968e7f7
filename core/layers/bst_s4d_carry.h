// The parameter gradient of the carried S4D term of model.md §7.3 now lives with the other S4D
// kernels (kernels/ssm/s4d_kernel.h, s4d_carry_backward.cpp) so every backend can run it; this
// name stays for the code and tests that call it from core.
#pragma once

#include "kernels/ssm/s4d_kernel.h"

namespace brt::core {

using kernels::ssm::s4d_carry_apply_backward;

}  // namespace brt::core
