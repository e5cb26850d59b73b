// The handles the allocator hands out for agents and frameworks: dense
// small integers, reused after removal (allocator.h).
#pragma once

#include <cstdint>

namespace allot {

using AgentHandle = uint32_t;
using FrameworkHandle = uint32_t;

}  // namespace allot
