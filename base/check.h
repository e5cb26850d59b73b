// CHECK: for programmer errors only (broken invariants, impossible states).
// Never use it on input from the network, the kernel or a config file: those
// return an Error (base/result.h).
#pragma once

namespace allot::detail {
[[noreturn]] void checkFailed(const char* expr, const char* file, int line);
}  // namespace allot::detail

#define CHECK(cond)                                                   \
  do {                                                                \
    if (!(cond)) ::allot::detail::checkFailed(#cond, __FILE__, __LINE__); \
  } while (0)
