#pragma once
#include <cstdint>
constexpr std::int64_t kAlphaOffset = 10;
