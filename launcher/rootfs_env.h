// A root filesystem plan (RootfsSetup) as the text of one environment
// variable: how the agent tells the built-in executor, which stays on the
// node's filesystem, the root each of its tasks enters (the executor's
// task children walk it with launcher/child_rootfs.h). One entry a line,
// "key<TAB>value": layers, lower (each, top first), upper, work, mount,
// cwd, and "bind<TAB>ro|rw<TAB>source<TAB>target". Paths hold no tab or
// newline (proto/validate.cpp refuses control characters in volumes).
// Thread: pure functions.
#pragma once

#include <string>
#include <string_view>

#include "base/result.h"
#include "launcher/launcher.h"

namespace allot {

inline constexpr const char* kRootfsEnv = "ALLOT_ROOTFS";
// The decoded text's size, far above a real plan (a page of overlay
// options and kRootfsBindsMax binds).
inline constexpr size_t kRootfsEnvBytesMax = 64 * 1024;

std::string encodeRootfs(const RootfsSetup& setup);
Result<RootfsSetup> decodeRootfs(std::string_view text);

}  // namespace allot
