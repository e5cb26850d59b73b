// ROOT: images end to end. A real docker-registry started here serves a
// busybox image the test builds and pushes with skopeo; a real master and
// an agent with --isolation filesystem/linux run allot-execute --image of
// it. The task sees its image's files and not the host's, the image's Cmd
// and Env apply without --command, a bad reference ends the task with
// IMAGE_PULL_FAILED and leaves nothing, and a second launch takes its
// layers from the agent's store (the registry's copy is spoilt by then).
#include <sys/wait.h>
#include <unistd.h>

#include <map>

#include <gtest/gtest.h>

#include <google/protobuf/util/json_util.h>

#include "http/client.h"
#include "images/registry_client.h"
#include "isolators/network_isolator.h"
#include "proto/state.pb.h"
#include "tests/agent/cluster.h"
#include "tests/common/test_util.h"
#include "tests/images/test_registry.h"

namespace allot::testing {
namespace {

using namespace std::chrono_literals;

int exitStatus(int st) { return st >= 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1; }

constexpr const char* kImageExec =
    "\"Env\":[\"GREETING=hello from the image\",\"PATH=/bin\"],"
    "\"Cmd\":[\"/bin/sh\",\"-c\",\"echo $GREETING; pwd\"],\"WorkingDir\":\"/srv\"";

class AgentImages : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (overlay, pivot_root, cgroups)";
    if (!haveProgram("docker-registry") || !haveProgram("skopeo")) GTEST_SKIP() << "needs docker-registry and skopeo";
    if (access("/bin/busybox", X_OK) != 0) GTEST_SKIP() << "needs busybox-static's /bin/busybox";
    cluster_ = std::make_unique<Cluster>();
    if (auto why = cluster_->missing(); !why.empty()) GTEST_SKIP() << why;
    dir_ = cluster_->dir() + "/registry";
    registry_ = std::make_unique<TestRegistry>(dir_);
    ASSERT_TRUE(registry_->ok()) << readWhole(dir_ + "/registry.log");
    layer_ = pushBusybox("test/bb:1", "motd of the image\n");
    cgroupsRoot_ = "allot-images-test-" + std::to_string(getpid());
    cluster_->setCgroupsRoot(cgroupsRoot_);
    ASSERT_TRUE(cluster_->startMaster());
    ASSERT_TRUE(cluster_->startAgent({"--isolation", "filesystem/linux", "--cgroups-root", cgroupsRoot_}))
        << cluster_->agentLog();
  }

  void TearDown() override {
    cluster_.reset();
    for (const auto& h : {"cpu", "cpuacct", "memory", "freezer", "pids", "unified"}) {
      std::error_code ec;
      fs::remove(fs::path("/sys/fs/cgroup") / h / cgroupsRoot_ / "agent", ec);
      fs::remove(fs::path("/sys/fs/cgroup") / h / cgroupsRoot_, ec);
    }
  }

  // One layer: busybox, /bin/sh, an /etc/motd only the image has.
  OciLayout::Blob pushBusybox(const std::string& repoTag, const std::string& motd) {
    std::string name = std::to_string(++images_);
    OciLayout layout(dir_ + "/layout" + name);
    TarBuilder(dir_ + "/bb" + name + ".tar")
        .dir("bin/").file("bin/busybox", readWhole("/bin/busybox"), 0755).symlink("bin/sh", "busybox")
        .dir("etc/").file("etc/motd", motd).dir("srv/").close();
    OciLayout::Blob layer = layout.layer(dir_ + "/bb" + name + ".tar");
    OciLayout::Blob manifest = layout.manifest({layer}, kImageExec, images::nodeArchitecture());
    layout.tag({{"1", "application/vnd.oci.image.manifest.v1+json", manifest}});
    EXPECT_TRUE(registry_->push(layout, "1", repoTag)) << readWhole(dir_ + "/skopeo.log");
    return layer;
  }

  // Busybox with `etc` (path -> content; "->target" makes a symlink) and
  // the config `execJson`.
  void pushWithEtc(const std::string& repoTag, const std::map<std::string, std::string>& etc,
                   const std::string& execJson) {
    std::string name = std::to_string(++images_);
    OciLayout layout(dir_ + "/layout" + name);
    TarBuilder tar(dir_ + "/bb" + name + ".tar");
    tar.dir("bin/").file("bin/busybox", readWhole("/bin/busybox"), 0755).symlink("bin/sh", "busybox").dir("etc/");
    for (const auto& [path, content] : etc) {
      if (content.rfind("->", 0) == 0) tar.symlink(path, content.substr(2));
      else tar.file(path, content);
    }
    tar.close();
    OciLayout::Blob layer = layout.layer(dir_ + "/bb" + name + ".tar");
    OciLayout::Blob manifest = layout.manifest({layer}, execJson, images::nodeArchitecture());
    layout.tag({{"1", "application/vnd.oci.image.manifest.v1+json", manifest}});
    EXPECT_TRUE(registry_->push(layout, "1", repoTag)) << readWhole(dir_ + "/skopeo.log");
  }

  std::string layerDir(const OciLayout::Blob& layer) const {
    return cluster_->workDir() + "/images/layers/" + layer.digest.hex;
  }

  std::string image() const { return registry_->registry() + "/test/bb:1"; }

  // The task's stdout, from its sandbox under the agent's work dir.
  std::string taskStdout(const std::string& taskId) const {
    std::error_code ec;
    for (const auto& e : fs::recursive_directory_iterator(cluster_->workDir() + "/sandboxes", ec))
      if (e.path().filename() == taskId + ".stdout") return readWhole(e.path());
    return "";
  }

  std::string mountsUnder(const std::string& dir) const {
    std::string out, line;
    std::istringstream in(readWhole("/proc/self/mountinfo"));
    while (std::getline(in, line))
      if (line.find(dir) != std::string::npos) out += line + "\n";
    return out;
  }

  std::unique_ptr<Cluster> cluster_;
  std::unique_ptr<TestRegistry> registry_;
  std::string dir_;
  std::string cgroupsRoot_;
  OciLayout::Blob layer_;
  int images_ = 0;
};

TEST_F(AgentImages, ATaskSeesItsImageAndNotTheHost) {
  Child run = cluster_->execute({"--image", image(), "--name", "seen", "--command",
                                 "cat /etc/motd; ls /etc/shadow /usr 2>&1; echo sandbox=$ALLOT_SANDBOX; pwd; id -u; "
                                 "echo kept > $ALLOT_SANDBOX/out"});
  ASSERT_EQ(exitStatus(run.wait(90s)), 0) << run.out() << run.err() << cluster_->agentLog();
  std::string out = run.out();
  EXPECT_NE(out.find("seen-0 STARTING: pulling " + image()), std::string::npos) << out;
  EXPECT_NE(out.find("seen-0 FINISHED"), std::string::npos) << out;
  std::string task = taskStdout("seen-0");
  EXPECT_NE(task.find("motd of the image"), std::string::npos) << task;
  EXPECT_NE(task.find("/etc/shadow: No such file or directory"), std::string::npos) << task;
  EXPECT_NE(task.find("/usr: No such file or directory"), std::string::npos) << task;
  EXPECT_NE(task.find("sandbox=/mnt/sandbox\n/srv\n65534\n"), std::string::npos) << task;
  EXPECT_TRUE(fs::exists(layerDir(layer_) + "/rootfs/bin/busybox"));
  // The task's writable layer goes with its executor.
  std::error_code ec;
  EXPECT_TRUE(waitFor([&] { return fs::is_empty(cluster_->workDir() + "/rootfs", ec); }, 20s));
}

TEST_F(AgentImages, WithoutACommandTheImagesCmdAndEnvRun) {
  Child run = cluster_->execute({"--image", image(), "--name", "cmd"});
  ASSERT_EQ(exitStatus(run.wait(90s)), 0) << run.out() << run.err() << cluster_->agentLog();
  EXPECT_EQ(taskStdout("cmd-0"), "hello from the image\n/srv\n");
}

TEST_F(AgentImages, ABadImageEndsTheTaskWithImagePullFailedAndLeavesNothing) {
  Child run = cluster_->execute({"--image", registry_->registry() + "/test/none:1", "--name", "bad", "--command",
                                 "true"});
  EXPECT_NE(exitStatus(run.wait(90s)), 0);
  std::string out = run.out();
  EXPECT_NE(out.find("bad-0 FAILED (IMAGE_PULL_FAILED): pulling image " + registry_->registry() + "/test/none:1"),
            std::string::npos)
      << out << cluster_->agentLog();
  EXPECT_TRUE(cluster_->executors().empty());
  EXPECT_EQ(mountsUnder(cluster_->workDir()), "");
  std::error_code ec;
  EXPECT_TRUE(fs::is_empty(cluster_->workDir() + "/rootfs", ec)) << ec.message();
}

TEST_F(AgentImages, ASecondLaunchTakesTheLayersFromTheAgentsStore) {
  Child first = cluster_->execute({"--image", image(), "--name", "first", "--command", "cat /etc/motd"});
  ASSERT_EQ(exitStatus(first.wait(90s)), 0) << first.out() << cluster_->agentLog();
  // The registry's copy of the layer no longer matches its digest: a new
  // download would fail its check.
  writeWhole(registry_->blobData(layer_.digest), std::string(layer_.size, 'x'));
  Child second = cluster_->execute({"--image", image(), "--name", "second", "--command", "cat /etc/motd"});
  ASSERT_EQ(exitStatus(second.wait(90s)), 0) << second.out() << cluster_->agentLog();
  EXPECT_EQ(taskStdout("second-0"), "motd of the image\n");
}

// A host path the operator allows, read-only, and a sandbox directory,
// read-write; a host path outside --volume-allow is refused.
TEST_F(AgentImages, VolumesMountAllowedHostPathsAndSandboxDirectories) {
  std::string shared = cluster_->dir() + "/shared";
  fs::create_directories(shared);
  writeWhole(shared + "/hello", "hello from the host\n");
  cluster_->agentProcess().kill(SIGKILL);
  ASSERT_TRUE(cluster_->startAgent({"--isolation", "filesystem/linux", "--cgroups-root", cgroupsRoot_,
                                    "--volume-allow", shared}))
      << cluster_->agentLog();
  Child run = cluster_->execute({"--image", image(), "--name", "vol", "--volume", shared + ":/data:ro,cache:/cache",
                                 "--command", "cat /data/hello; (echo x > /data/y) 2>/dev/null || echo ro; "
                                              "echo kept > /cache/f"});
  ASSERT_EQ(exitStatus(run.wait(90s)), 0) << run.out() << cluster_->agentLog();
  EXPECT_EQ(taskStdout("vol-0"), "hello from the host\nro\n");
  EXPECT_FALSE(fs::exists(shared + "/y"));
  Child refused = cluster_->execute({"--image", image(), "--name", "etc", "--volume", "/etc:/hostetc:ro",
                                     "--command", "true"});
  EXPECT_NE(exitStatus(refused.wait(90s)), 0);
  EXPECT_NE(refused.out().find("is not under a path the agent allows (--volume-allow)"), std::string::npos)
      << refused.out();
}

// An agent without filesystem/linux refuses an image instead of running
// the task on the host's files.
TEST_F(AgentImages, AnAgentWithoutFilesystemLinuxRefusesAnImage) {
  cluster_->agentProcess().kill(SIGKILL);
  ASSERT_TRUE(cluster_->startAgent({"--isolation", "", "--cgroups-root", cgroupsRoot_})) << cluster_->agentLog();
  Child run = cluster_->execute({"--image", image(), "--name", "hostfs", "--command", "true"});
  EXPECT_NE(exitStatus(run.wait(90s)), 0);
  EXPECT_NE(run.out().find("hostfs-0 ERROR (INVALID_LAUNCH): this agent runs no images"), std::string::npos)
      << run.out() << cluster_->agentLog();
}

// The checkpoint names the executor's layers: after a restart they are
// held again and its writable layer is kept, and the task finishes.
TEST_F(AgentImages, AnAgentRestartKeepsTheRunningTasksRoot) {
  Child run = cluster_->execute({"--image", image(), "--name", "long", "--command",
                                 "echo before > /tmp/x; sleep 4; cat /tmp/x /etc/motd"});
  ASSERT_TRUE(waitFor([&] { return run.out().find("long-0 RUNNING") != std::string::npos; }, 60s)) << run.out();
  cluster_->agentProcess().killOnly(SIGKILL);
  ASSERT_TRUE(cluster_->startAgent({"--isolation", "filesystem/linux", "--cgroups-root", cgroupsRoot_}))
      << cluster_->agentLog();
  ASSERT_EQ(exitStatus(run.wait(90s)), 0) << run.out() << cluster_->agentLog();
  EXPECT_EQ(taskStdout("long-0"), "before\nmotd of the image\n");
  EXPECT_TRUE(fs::exists(layerDir(layer_) + "/rootfs/bin/busybox"));
  EXPECT_EQ(cluster_->agentLog().find("removing the writable layer"), std::string::npos) << cluster_->agentLog();
}

// The agent's /state names the image of the executor and of its task.
TEST_F(AgentImages, AgentStateNamesTheImageOfTheExecutorAndItsTasks) {
  cluster_->agentProcess().kill(SIGKILL);
  std::string portFile = cluster_->dir() + "/agent.http";
  ASSERT_TRUE(cluster_->startAgent({"--isolation", "filesystem/linux", "--cgroups-root", cgroupsRoot_,
                                    "--http-listen", "127.0.0.1:0", "--http-port-file", portFile}))
      << cluster_->agentLog();
  Child run = cluster_->execute({"--image", image(), "--name", "shown", "--command", "sleep 3"});
  ASSERT_TRUE(waitFor([&] { return run.out().find("shown-0 RUNNING") != std::string::npos; }, 60s)) << run.out();
  auto r = http::fetch({"127.0.0.1", readPort(portFile)}, "GET", "/state");
  ASSERT_TRUE(r && r->status == 200) << (r ? r->body : r.error().describe());
  state::State st;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(r->body, &st).ok()) << r->body;
  ASSERT_EQ(st.agent().executors_size(), 1) << r->body;
  const state::ExecutorView& ex = st.agent().executors(0);
  EXPECT_EQ(ex.image(), image());
  ASSERT_EQ(ex.tasks_size(), 1);
  EXPECT_EQ(ex.tasks(0).image(), image());
  EXPECT_EQ(exitStatus(run.wait(90s)), 0) << run.out();
}

// On the host's network a root gets the host's /etc/hosts and
// /etc/resolv.conf, read-only; the image's own are hidden.
TEST_F(AgentImages, OnTheHostsNetworkTheRootHasTheHostsNameFilesReadOnly) {
  if (access("/etc/hosts", R_OK) != 0 || access("/etc/resolv.conf", R_OK) != 0)
    GTEST_SKIP() << "needs the host's /etc/hosts and /etc/resolv.conf";
  Child run = cluster_->execute({"--image", image(), "--name", "names", "--command",
                                 "cat /etc/hosts; echo ---; cat /etc/resolv.conf; "
                                 "(echo x >> /etc/hosts) 2>/dev/null || echo ro"});
  ASSERT_EQ(exitStatus(run.wait(90s)), 0) << run.out() << cluster_->agentLog();
  EXPECT_EQ(taskStdout("names-0"), readWhole("/etc/hosts") + "---\n" + readWhole("/etc/resolv.conf") + "ro\n");
}

// The image's User runs the task, as the image's own /etc/passwd and
// /etc/group say (not the host's); a user the framework names wins.
TEST_F(AgentImages, TheImagesUserRunsTheTaskAsTheImagesFilesSay) {
  pushWithEtc("test/user:1",
              {{"etc/passwd", "root:x:0:0::/root:/bin/sh\napp:x:4321:4322::/srv:/bin/sh\n"},
               {"etc/group", "root:x:0:\napp:x:4322:\nextra:x:4400:other,app\n"}},
              "\"Env\":[\"PATH=/bin\"],\"User\":\"app\"");
  std::string ref = registry_->registry() + "/test/user:1";
  Child run = cluster_->execute({"--image", ref, "--name", "app", "--command", "id -u; id -g; id -G"});
  ASSERT_EQ(exitStatus(run.wait(90s)), 0) << run.out() << cluster_->agentLog();
  EXPECT_EQ(taskStdout("app-0"), "4321\n4322\n4322 4400\n");
  Child named = cluster_->execute({"--image", ref, "--name", "named", "--user", "nobody", "--command", "id -u"});
  ASSERT_EQ(exitStatus(named.wait(90s)), 0) << named.out() << cluster_->agentLog();
  EXPECT_EQ(taskStdout("named-0"), "65534\n");
}

// An image whose /etc/passwd is a symlink out of its layer makes the agent
// read no host file: the user is not found and the task does not run.
// An image user that is root needs the master's ACLs, as a named one does.
TEST_F(AgentImages, AnImageUserFromOutsideTheImageOrRootIsRefused) {
  pushWithEtc("test/escape:1", {{"etc/passwd", "->../../../../../../etc/passwd"}},
              "\"Env\":[\"PATH=/bin\"],\"User\":\"daemon\"");
  Child escape = cluster_->execute({"--image", registry_->registry() + "/test/escape:1", "--name", "escape",
                                    "--command", "id -u"});
  EXPECT_NE(exitStatus(escape.wait(90s)), 0);
  EXPECT_NE(escape.out().find("escape-0 FAILED"), std::string::npos) << escape.out();
  EXPECT_NE(escape.out().find("the image's /etc/passwd"), std::string::npos) << escape.out();
  EXPECT_EQ(taskStdout("escape-0"), "");
  pushWithEtc("test/root:1", {{"etc/passwd", "root:x:0:0::/root:/bin/sh\n"}},
              "\"Env\":[\"PATH=/bin\"],\"User\":\"0\"");
  Child root = cluster_->execute({"--image", registry_->registry() + "/test/root:1", "--name", "root",
                                  "--command", "id -u"});
  EXPECT_NE(exitStatus(root.wait(90s)), 0);
  EXPECT_NE(root.out().find("the image's user '0' is root, which the master's ACLs did not allow"),
            std::string::npos) << root.out();
}

// A cap below one layer: a pulled image still runs (its layers are held
// from the pull on), and the next pull evicts the layer nobody uses.
TEST_F(AgentImages, PastTheCacheCapTheUnusedLayersAreEvicted) {
  OciLayout::Blob other = pushBusybox("test/other:1", "another motd\n");
  cluster_->agentProcess().kill(SIGKILL);
  ASSERT_TRUE(cluster_->startAgent({"--isolation", "filesystem/linux", "--cgroups-root", cgroupsRoot_,
                                    "--image-cache-max", "1"}))
      << cluster_->agentLog();
  Child first = cluster_->execute({"--image", image(), "--name", "first", "--command", "cat /etc/motd"});
  ASSERT_EQ(exitStatus(first.wait(90s)), 0) << first.out() << cluster_->agentLog();
  EXPECT_EQ(taskStdout("first-0"), "motd of the image\n");
  ASSERT_TRUE(waitFor([&] { return cluster_->executors().empty(); }, 20s));
  Child second = cluster_->execute({"--image", registry_->registry() + "/test/other:1", "--name", "second",
                                    "--command", "cat /etc/motd"});
  ASSERT_EQ(exitStatus(second.wait(90s)), 0) << second.out() << cluster_->agentLog();
  EXPECT_EQ(taskStdout("second-0"), "another motd\n");
  EXPECT_TRUE(waitFor([&] { return !fs::exists(layerDir(layer_)); }, 20s)) << cluster_->agentLog();
}

// With seccomp the filter reaches the task inside its root (the executor
// builds the root unfiltered), and a COMMAND check runs in the task's
// mount namespace: it sees the image's /etc/motd, the host has none.
TEST_F(AgentImages, WithSeccompTheTaskIsFilteredAndItsCheckSeesTheImage) {
  cluster_->agentProcess().kill(SIGKILL);
  ASSERT_TRUE(cluster_->startAgent({"--isolation", "filesystem/linux,seccomp", "--cgroups-root", cgroupsRoot_}))
      << cluster_->agentLog();
  ASSERT_FALSE(fs::exists("/etc/motd") && readWhole("/etc/motd") == "motd of the image\n");
  Child run = cluster_->execute({"--image", image(), "--name", "filtered", "--command",
                                 "grep Seccomp: /proc/self/status; sleep 2", "--health-cmd",
                                 "grep -q 'of the image' /etc/motd", "--health-delay", "0", "--health-interval",
                                 "0.2"});
  ASSERT_EQ(exitStatus(run.wait(90s)), 0) << run.out() << run.err() << cluster_->agentLog();
  EXPECT_NE(run.out().find("task filtered-0 healthy"), std::string::npos) << run.out();
  EXPECT_EQ(taskStdout("filtered-0"), "Seccomp:\t2\n");
}

// With network/netns the task, inside its root, is in its executor's
// network namespace: its own sysfs shows that namespace's links only.
TEST_F(AgentImages, WithNetworkNetnsTheTaskIsInItsExecutorsNetwork) {
  NetworkOptions net;
  net.bridge = "aimg" + std::to_string(getpid());
  net.cidr = "10.237." + std::to_string(getpid() % 250) + ".0/24";
  net.stateDir = cluster_->dir() + "/netstate";
  cluster_->agentProcess().kill(SIGKILL);
  std::string resolv = cluster_->dir() + "/resolv.conf";
  writeWhole(resolv, "nameserver 192.0.2.53\n");
  ASSERT_TRUE(cluster_->startAgent({"--isolation", "filesystem/linux,network/netns", "--cgroups-root", cgroupsRoot_,
                                    "--network-bridge", net.bridge, "--network-cidr", net.cidr,
                                    "--network-state-dir", net.stateDir, "--network-warm-pool", "0",
                                    "--resolv-conf", resolv}))
      << cluster_->agentLog();
  Child run = cluster_->execute({"--image", image(), "--name", "net", "--command",
                                 "echo $ALLOT_NETWORK_ADDRESS; ls /sys/class/net; cat /etc/hosts /etc/resolv.conf"});
  int st = run.wait(90s);
  cluster_->agentProcess().kill(SIGKILL);
  EXPECT_TRUE(removeNetwork(net).ok());
  ASSERT_EQ(exitStatus(st), 0) << run.out() << cluster_->agentLog();
  std::string out = taskStdout("net-0");
  EXPECT_EQ(out.rfind("10.237.", 0), 0u) << out;
  EXPECT_NE(out.find("lo\n"), std::string::npos) << out;
  EXPECT_EQ(out.find(net.bridge), std::string::npos) << out;
  // Its name files fit its namespace: loopback, the node's name at the
  // executor's address, the operator's resolv.conf.
  char host[256] = {};
  ASSERT_EQ(gethostname(host, sizeof(host) - 1), 0);
  std::string address = out.substr(0, out.find('\n'));
  EXPECT_NE(out.find("127.0.0.1\tlocalhost\n"), std::string::npos) << out;
  EXPECT_NE(out.find(address + "\t" + host + "\n"), std::string::npos) << out;
  EXPECT_NE(out.find("nameserver 192.0.2.53\n"), std::string::npos) << out;
}

}  // namespace
}  // namespace allot::testing
