// The seccomp profile format, the compiled default profile, and the filter
// installed for real in a forked child (no root needed: no_new_privs).
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <fstream>

#include "isolators/isolator_table.h"
#include "isolators/seccomp_isolator.h"
#include "isolators/seccomp_profile.h"
#include "tests/isolators/cgroup_twin_fixture.h"

namespace allot {
namespace {

// Runs fn() in a child under `bpf`; returns its exit code.
int underFilter(const std::vector<char>& bpf, int (*fn)()) {
  pid_t pid = fork();
  if (pid == 0) {
    sock_fprog prog{static_cast<unsigned short>(bpf.size() / sizeof(sock_filter)),
                    reinterpret_cast<sock_filter*>(const_cast<char*>(bpf.data()))};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
      _exit(100);
    }
    _exit(fn());
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 200 + WTERMSIG(status);
}

std::string parseError(const std::string& text) {
  auto p = parseSeccompProfile(text, "profile");
  return p ? "" : p.error().describe();
}

TEST(SeccompProfile, DefaultProfileParsesAndCompiles) {
  auto profile = parseSeccompProfile(defaultProfileText(), "default");
  ASSERT_TRUE(profile) << profile.error().describe();
  EXPECT_EQ(profile->defaultAction, SeccompRule::Action::kAllow);
  EXPECT_GT(profile->rules.size(), 40u);
  auto bpf = compileSeccompProfile(*profile);
  ASSERT_TRUE(bpf) << bpf.error().describe();
  EXPECT_EQ(bpf->size() % sizeof(sock_filter), 0u);
  EXPECT_GT(bpf->size(), 0u);
}

TEST(SeccompProfile, ErrorsNameTheLineAndWhatIsWrong) {
  EXPECT_NE(parseError("allow read\n").find("no 'default"), std::string::npos);
  EXPECT_NE(parseError("default allow\ndefault kill\n").find("profile:2: a second 'default'"), std::string::npos);
  EXPECT_NE(parseError("default allow\n\n# c\nerrno EPERM nosuchcall\n").find("profile:4: unknown system call 'nosuchcall'"),
            std::string::npos);
  EXPECT_NE(parseError("default allow\nerrno EWHAT mount\n").find("'EWHAT' is not an errno"), std::string::npos);
  EXPECT_NE(parseError("default allow\nerrno 0 mount\n").find("is not an errno"), std::string::npos);
  EXPECT_NE(parseError("default allow\nforbid mount\n").find("unknown action 'forbid'"), std::string::npos);
  EXPECT_NE(parseError("default allow\nerrno EPERM clone:arg9&1\n").find("arg0..arg5"), std::string::npos);
  EXPECT_NE(parseError("default allow\nerrno EPERM clone:arg0<1\n").find("operator"), std::string::npos);
  EXPECT_NE(parseError("default allow\nerrno EPERM clone:arg0&zz\n").find("not a number"), std::string::npos);
  EXPECT_NE(parseError("default maybe\n").find("expected 'default allow'"), std::string::npos);
  EXPECT_NE(parseError(std::string(kSeccompProfileBytesMax + 1, '#')).find("larger than"), std::string::npos);
  EXPECT_EQ(parseError("default errno EPERM\nallow read write exit_group\nerrno 13 socket:arg0==40\n"), "");
}

TEST(SeccompProfile, MissingFileIsAClearError) {
  auto made = makeSeccompIsolatorFromFile("/nonexistent/allot-profile");
  ASSERT_FALSE(made);
  EXPECT_NE(made.error().describe().find("/nonexistent/allot-profile"), std::string::npos);
}

int keyctlGetSessionKeyring() {
  long r = syscall(SYS_keyctl, 0 /* KEYCTL_GET_KEYRING_ID */, -3 /* session */, 0);
  return r < 0 && errno == EPERM ? 1 : 0;
}
int unshareUserNamespace() { return unshare(0x10000000 /* CLONE_NEWUSER */) != 0 && errno == EPERM ? 1 : 0; }
int getpidWorks() { return syscall(SYS_getpid) == getpid() ? 1 : 0; }
int cloneNewNet() {
  long r = syscall(SYS_clone, 0x40000000 /* CLONE_NEWNET */ | SIGCHLD, 0, 0, 0, 0);
  if (r == 0) _exit(0);
  return r < 0 && errno == EPERM ? 1 : 0;
}
int getppidRefused() { return syscall(SYS_getppid) < 0 && errno == EACCES ? 1 : 0; }

TEST(SeccompFilter, DefaultProfileRefusesWithEpermAndAllowsTheRest) {
  auto profile = parseSeccompProfile(defaultProfileText(), "default");
  ASSERT_TRUE(profile);
  auto bpf = compileSeccompProfile(*profile);
  ASSERT_TRUE(bpf);
  EXPECT_EQ(underFilter(*bpf, keyctlGetSessionKeyring), 1);
  EXPECT_EQ(underFilter(*bpf, unshareUserNamespace), 1);
  EXPECT_EQ(underFilter(*bpf, cloneNewNet), 1);
  EXPECT_EQ(underFilter(*bpf, getpidWorks), 1);
}

TEST(SeccompFilter, OperatorProfileFromAFileIsWhatRuns) {
  std::string path = ::testing::TempDir() + "/allot-seccomp-" + std::to_string(getpid());
  std::ofstream(path) << "# refuse one call\ndefault allow\nerrno EACCES getppid\n";
  auto made = makeSeccompIsolatorFromFile(path);
  ASSERT_TRUE(made) << made.error().describe();
  ChildSetup setup;
  ASSERT_TRUE((*made)->prepare(ContainerId{"f", "e"}, Resources{}, &setup));
  EXPECT_TRUE(setup.noNewPrivs);
  EXPECT_EQ(underFilter(setup.seccompBpf, getppidRefused), 1);
  EXPECT_EQ(underFilter(setup.seccompBpf, keyctlGetSessionKeyring), 0);
  std::remove(path.c_str());
}

// A setup-only isolator (isolator.h): everything but prepare() succeeds
// for any container, prepared or not, any number of times.
TEST(SeccompIsolator, KeepsNoPerContainerState) {
  auto made = makeSeccompIsolatorFromFile("");
  ASSERT_TRUE(made) << made.error().describe();
  Isolator& iso = **made;
  ContainerId never{"f", "never-prepared"};
  ASSERT_TRUE(iso.recover({KnownContainer(never)}));
  for (int round = 0; round < 2; ++round) {
    EXPECT_TRUE(iso.isolate(never, 1));
    EXPECT_TRUE(iso.watch(never, [](const Limitation&) { ADD_FAILURE() << "a filter has no limit to hit"; }));
    EXPECT_TRUE(iso.update(never, Resources{}));
    wire::ResourceUsage usage;
    EXPECT_TRUE(iso.usage(never, &usage));
    EXPECT_EQ(usage.ByteSizeLong(), 0u) << "a filter measures nothing";
    EXPECT_TRUE(iso.cleanup(never));
  }
  EXPECT_FALSE(iso.reapJob(never)) << "nothing to reap";
}

// The table on a host twin in a temp dir (its containment isolator comes
// first on any host): no root needed, nothing made on the real cgroupfs.
class SeccompIsolatorTable : public CgroupTwinTest {};

TEST_F(SeccompIsolatorTable, SeccompNeedsNoCgroups) {
  auto made = createIsolatorsOn(twinCgroupHost(fs_, CgroupMode::kHybrid), "seccomp", options_);
  ASSERT_TRUE(made) << made.error().describe();
  bool found = false;
  for (const auto& iso : *made) found |= iso->name() == "seccomp";
  EXPECT_TRUE(found);
}

}  // namespace
}  // namespace allot
