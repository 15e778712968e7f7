#pragma once
namespace brt::launch {
const char* version();
}  // namespace brt::launch
