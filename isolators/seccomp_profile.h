// seccomp profiles: which system calls a task may make, in a small text
// format, compiled once (libseccomp) into the BPF program the launcher's
// child installs last before execve (launcher.h, ChildSetup::seccompBpf).
//
// Format (one rule per line, '#' starts a comment, blank lines ignored):
//
//   default allow | default errno <E> | default kill
//       what every syscall no rule names does (once, first rule line)
//   allow <syscall>...
//   errno <E> <syscall>[:argN&MASK | :argN==VALUE]...
//   kill <syscall>...
//
// <E> is a number (1..4095) or a name (EPERM, EACCES, ENOSYS, ...). A
// syscall may carry one argument condition: `clone:arg0&0x10000000` matches
// calls whose argument 0 has every bit of MASK set; `socket:arg0==40`
// matches argument 0 equal to VALUE. Syscall names are the kernel's
// (`seccomp_syscall_resolve_name`); a name unknown to libseccomp is an
// error naming the line. Only the agent's native architecture is allowed:
// calls through another ABI (int 0x80 on x86_64) kill the process.
//
// defaultProfileText() is allot's default: a denylist in the spirit of
// Docker's default profile (docs/decisions.md, "seccomp").
// Thread: any; no global state.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace allot {

// Bounds a profile file (the default is ~2 KiB).
inline constexpr size_t kSeccompProfileBytesMax = 256 * 1024;
inline constexpr size_t kSeccompRulesMax = 4096;

struct SeccompRule {
  enum class Action { kAllow, kErrno, kKill };
  enum class Compare { kNone, kMaskedAll, kEqual };
  Action action = Action::kAllow;
  int errnum = 0;  // for kErrno
  std::string syscall;
  int syscallNr = 0;
  Compare compare = Compare::kNone;
  unsigned arg = 0;
  uint64_t value = 0;  // the mask (kMaskedAll) or the value (kEqual)
};

struct SeccompProfile {
  SeccompRule::Action defaultAction = SeccompRule::Action::kAllow;
  int defaultErrnum = 0;
  std::vector<SeccompRule> rules;
};

// allot's built-in profile, in the format above.
std::string_view defaultProfileText();

// Parses `text`; `origin` names it in errors ("/etc/allot/seccomp:12: ...").
Result<SeccompProfile> parseSeccompProfile(std::string_view text, const std::string& origin);

// Reads and parses a profile file (bounded by kSeccompProfileBytesMax).
Result<SeccompProfile> loadSeccompProfile(const std::string& path);

// Compiles a profile into a BPF program (an array of struct sock_filter,
// as bytes) for the native architecture.
Result<std::vector<char>> compileSeccompProfile(const SeccompProfile& profile);

}  // namespace allot
