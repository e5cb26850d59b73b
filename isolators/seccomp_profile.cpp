#include "isolators/seccomp_profile.h"

#include <seccomp.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <fstream>
#include <sstream>

#include "base/unique_fd.h"

namespace allot {
namespace {

// Docker's default profile (moby/profiles seccomp/default.json) allows a
// list and refuses the rest; allot refuses a list and allows the rest, so
// any binary a framework brings keeps working, and names what it takes
// away: see docs/decisions.md ("seccomp").
constexpr std::string_view kDefaultProfile = R"(# allot default seccomp profile
default allow
# mounts and new namespaces (the host's mount table, user namespaces)
errno EPERM mount umount2 pivot_root fsopen fsconfig fsmount fspick move_mount open_tree
errno EPERM unshare setns
# clone with a CLONE_NEW* flag: NEWNS NEWCGROUP NEWUTS NEWIPC NEWUSER NEWPID NEWNET
errno EPERM clone:arg0&0x00020000 clone:arg0&0x02000000 clone:arg0&0x04000000 clone:arg0&0x08000000
errno EPERM clone:arg0&0x10000000 clone:arg0&0x20000000 clone:arg0&0x40000000
# clone3 passes its flags in memory no filter can read: ENOSYS makes libc fall back to clone
errno ENOSYS clone3
# kernel code and modules
errno EPERM init_module finit_module delete_module kexec_load kexec_file_load bpf
# other processes and the kernel's memory
errno EPERM ptrace process_vm_readv process_vm_writev kcmp perf_event_open lookup_dcookie
errno EPERM open_by_handle_at name_to_handle_at userfaultfd
# keyrings are not namespaced
errno EPERM keyctl add_key request_key
# host-wide state
errno EPERM reboot swapon swapoff acct quotactl syslog settimeofday clock_settime clock_adjtime
errno EPERM iopl ioperm uselib ustat sysfs _sysctl nfsservctl vhangup
# io_uring bypasses this filter for the operations it runs
errno EPERM io_uring_setup io_uring_enter io_uring_register
# AF_VSOCK sockets reach the hypervisor
errno EPERM socket:arg0==40
)";

struct ErrnoName {
  const char* name;
  int value;
};
constexpr ErrnoName kErrnoNames[] = {
    {"EPERM", EPERM}, {"ENOENT", ENOENT}, {"EIO", EIO},         {"EACCES", EACCES},
    {"EFAULT", EFAULT}, {"EINVAL", EINVAL}, {"ENOSYS", ENOSYS}, {"EOPNOTSUPP", EOPNOTSUPP},
    {"ENOTSUP", ENOTSUP}, {"EAFNOSUPPORT", EAFNOSUPPORT},
};

std::vector<std::string> lineWords(const std::string& line) {
  std::istringstream in(line.substr(0, line.find('#')));
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

Result<uint64_t> parseNumber(const std::string& text) {
  uint64_t v = 0;
  int base = 10;
  std::string_view digits = text;
  if (digits.size() > 2 && digits[0] == '0' && (digits[1] == 'x' || digits[1] == 'X')) {
    base = 16;
    digits.remove_prefix(2);
  }
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v, base);
  if (ec != std::errc() || end != digits.data() + digits.size()) return Error{"'" + text + "' is not a number"};
  return v;
}

Result<int> parseErrno(const std::string& text) {
  for (const auto& e : kErrnoNames) {
    if (text == e.name) return e.value;
  }
  auto n = parseNumber(text);
  if (!n || *n < 1 || *n > 4095) return Error{"'" + text + "' is not an errno (a name like EPERM or 1..4095)"};
  return static_cast<int>(*n);
}

// "name", "name:argN&MASK" or "name:argN==VALUE".
Status parseSyscall(const std::string& text, SeccompRule* rule) {
  size_t colon = text.find(':');
  rule->syscall = text.substr(0, colon);
  rule->syscallNr = seccomp_syscall_resolve_name(rule->syscall.c_str());
  if (rule->syscallNr == __NR_SCMP_ERROR) return Error{"unknown system call '" + rule->syscall + "'"};
  if (colon == std::string::npos) return okStatus();
  std::string cond = text.substr(colon + 1);
  if (cond.size() < 6 || cond.compare(0, 3, "arg") != 0 || cond[3] < '0' || cond[3] > '5') {
    return Error{"condition '" + cond + "' must start with arg0..arg5"};
  }
  rule->arg = static_cast<unsigned>(cond[3] - '0');
  std::string op = cond.substr(4, cond[4] == '&' ? 1 : 2);
  if (op != "&" && op != "==") return Error{"condition '" + cond + "': the operator must be & or =="};
  auto value = parseNumber(cond.substr(4 + op.size()));
  if (!value) return Error{"condition '" + cond + "': " + value.error().message};
  rule->compare = op == "&" ? SeccompRule::Compare::kMaskedAll : SeccompRule::Compare::kEqual;
  rule->value = *value;
  return okStatus();
}

// Parses one line into `profile`; `sawDefault` tracks the default line.
Status parseLine(const std::vector<std::string>& w, bool* sawDefault, SeccompProfile* profile) {
  using Action = SeccompRule::Action;
  if (w[0] == "default") {
    if (*sawDefault) return Error{"a second 'default' line"};
    *sawDefault = true;
    if (w.size() == 2 && w[1] == "allow") return okStatus();
    if (w.size() == 2 && w[1] == "kill") {
      profile->defaultAction = Action::kKill;
      return okStatus();
    }
    if (w.size() == 3 && w[1] == "errno") {
      auto e = parseErrno(w[2]);
      if (!e) return e.error();
      profile->defaultAction = Action::kErrno;
      profile->defaultErrnum = *e;
      return okStatus();
    }
    return Error{"expected 'default allow', 'default kill' or 'default errno <E>'"};
  }
  SeccompRule rule;
  size_t first = 1;
  if (w[0] == "allow") {
    rule.action = Action::kAllow;
  } else if (w[0] == "kill") {
    rule.action = Action::kKill;
  } else if (w[0] == "errno") {
    if (w.size() < 2) return Error{"'errno' needs an errno and system calls"};
    auto e = parseErrno(w[1]);
    if (!e) return e.error();
    rule.action = Action::kErrno;
    rule.errnum = *e;
    first = 2;
  } else {
    return Error{"unknown action '" + w[0] + "' (default, allow, errno, kill)"};
  }
  if (w.size() <= first) return Error{"'" + w[0] + "' names no system call"};
  for (size_t i = first; i < w.size(); ++i) {
    if (profile->rules.size() >= kSeccompRulesMax) return Error{"more than " + std::to_string(kSeccompRulesMax) + " rules"};
    SeccompRule r = rule;
    if (Status st = parseSyscall(w[i], &r); !st) return st;
    profile->rules.push_back(std::move(r));
  }
  return okStatus();
}

uint32_t actionOf(SeccompRule::Action action, int errnum) {
  switch (action) {
    case SeccompRule::Action::kAllow: return SCMP_ACT_ALLOW;
    case SeccompRule::Action::kErrno: return SCMP_ACT_ERRNO(static_cast<uint32_t>(errnum));
    case SeccompRule::Action::kKill: return SCMP_ACT_KILL_PROCESS;
  }
  return SCMP_ACT_KILL_PROCESS;
}

}  // namespace

std::string_view defaultProfileText() { return kDefaultProfile; }

Result<SeccompProfile> parseSeccompProfile(std::string_view text, const std::string& origin) {
  if (text.size() > kSeccompProfileBytesMax) {
    return Error{origin + ": larger than " + std::to_string(kSeccompProfileBytesMax) + " bytes"};
  }
  SeccompProfile profile;
  bool sawDefault = false;
  std::istringstream in{std::string(text)};
  int lineNo = 0;
  for (std::string line; std::getline(in, line);) {
    ++lineNo;
    auto w = lineWords(line);
    if (w.empty()) continue;
    if (Status st = parseLine(w, &sawDefault, &profile); !st) {
      return Error{origin + ":" + std::to_string(lineNo) + ": " + st.error().message};
    }
  }
  if (!sawDefault) return Error{origin + ": no 'default allow|errno <E>|kill' line"};
  return profile;
}

Result<SeccompProfile> loadSeccompProfile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error::fromErrno("open seccomp profile " + path);
  std::string text(kSeccompProfileBytesMax + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  return parseSeccompProfile(text, path);
}

Result<std::vector<char>> compileSeccompProfile(const SeccompProfile& profile) {
  scmp_filter_ctx ctx = seccomp_init(actionOf(profile.defaultAction, profile.defaultErrnum));
  if (!ctx) return Error{"seccomp_init failed"};
  struct Release {
    scmp_filter_ctx c;
    ~Release() { seccomp_release(c); }
  } release{ctx};
  // The launcher sets no_new_privs itself, in its order.
  seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0);
  for (const auto& r : profile.rules) {
    uint32_t action = actionOf(r.action, r.errnum);
    if (action == actionOf(profile.defaultAction, profile.defaultErrnum)) continue;  // libseccomp refuses these
    int rc;
    if (r.compare == SeccompRule::Compare::kNone) {
      rc = seccomp_rule_add(ctx, action, r.syscallNr, 0);
    } else {
      scmp_arg_cmp cmp = r.compare == SeccompRule::Compare::kEqual
                             ? SCMP_CMP(r.arg, SCMP_CMP_EQ, r.value)
                             : SCMP_CMP(r.arg, SCMP_CMP_MASKED_EQ, r.value, r.value);
      rc = seccomp_rule_add_array(ctx, action, r.syscallNr, 1, &cmp);
    }
    if (rc != 0) return Error{"seccomp rule for " + r.syscall, -rc};
  }
  UniqueFd fd(static_cast<int>(memfd_create("allot-seccomp", MFD_CLOEXEC)));
  if (fd.get() < 0) return Error::fromErrno("memfd_create for the seccomp program");
  if (int rc = seccomp_export_bpf(ctx, fd.get()); rc != 0) return Error{"seccomp_export_bpf", -rc};
  off_t size = lseek(fd.get(), 0, SEEK_END);
  if (size <= 0) return Error::fromErrno("size of the exported seccomp program");
  std::vector<char> bpf(static_cast<size_t>(size));
  if (pread(fd.get(), bpf.data(), bpf.size(), 0) != size) return Error::fromErrno("reading the seccomp program");
  return bpf;
}

}  // namespace allot
