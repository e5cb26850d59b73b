// Isolated launch latency (issue 4): the agent's path from a launch to the
// process running inside its cgroups — isolators prepare (cgroups/cpu and
// cgroups/mem: create the cgroups, write cpu.shares and the memory limit),
// Launcher::launch (the child joins them before exec; launch() returns once
// it has exec'd), isolate — p50/p99 over 1,000 launches of /bin/true.
//
// Anchor in the same run: `runc run --detach` of the same command in a
// minimal OCI bundle (busybox rootfs) with the same cpu shares and memory
// limit; it returns once the container process has started. Teardown of
// both (exit, cgroup removal, `runc delete`) is outside the timed part.
// Needs root.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <vector>

#include "base/asio.h"
#include "base/uring_poller.h"
#include "isolators/isolator_table.h"
#include "launcher/launcher.h"

namespace allot {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * v.size()))];
}

std::vector<double> allotLaunches(int count) {
  asio::io_context io(1);
  auto poller = std::move(*UringPoller::create(io));
  auto launcher = std::move(*Launcher::create(io, *poller));
  IsolatorOptions options;
  options.poller = poller.get();
  options.cgroupsRoot = "allot-bench-" + std::to_string(getpid());
  auto isolators = createIsolators("cgroups/cpu,cgroups/mem", options);
  if (!isolators) {
    std::fprintf(stderr, "isolators: %s\n", isolators.error().describe().c_str());
    std::exit(1);
  }
  Resources limits = *Resources::parse("cpus:0.5;mem:64");
  std::vector<double> samples;
  for (int i = 0; i < count; ++i) {
    ContainerId id{"bench", "e" + std::to_string(i)};
    LaunchSpec spec;
    spec.argv = {"/bin/true"};
    spec.env = {"PATH=/usr/bin:/bin"};
    spec.workDir = "/";
    bool exited = false;
    auto start = Clock::now();
    for (auto& iso : *isolators) {
      if (Status st = iso->prepare(id, limits, &spec.setup); !st) {
        std::fprintf(stderr, "prepare: %s\n", st.error().describe().c_str());
        std::exit(1);
      }
    }
    auto pid = launcher->launch(spec, [&](const ExitInfo&) { exited = true; });
    if (!pid) {
      std::fprintf(stderr, "launch: %s\n", pid.error().describe().c_str());
      std::exit(1);
    }
    for (auto& iso : *isolators) (void)iso->isolate(id, *pid);
    samples.push_back(ms(Clock::now() - start));
    while (!exited) {
      io.restart();
      io.run_one_for(std::chrono::milliseconds(100));
    }
    for (auto it = isolators->rbegin(); it != isolators->rend(); ++it) (void)(*it)->cleanup(id);
  }
  for (const char* c : {"cpu", "cpuacct", "memory", "freezer"}) {
    fs::remove(fs::path("/sys/fs/cgroup") / c / options.cgroupsRoot);
  }
  return samples;
}

// A minimal OCI bundle: busybox as the rootfs's only program.
std::string makeBundle() {
  fs::path dir = fs::temp_directory_path() / ("allot-runc-bundle-" + std::to_string(getpid()));
  fs::create_directories(dir / "rootfs/bin");
  fs::create_directories(dir / "rootfs/proc");
  fs::copy_file("/bin/busybox", dir / "rootfs/bin/busybox", fs::copy_options::overwrite_existing);
  std::ofstream(dir / "config.json") << R"({
  "ociVersion": "1.0.2",
  "process": {"terminal": false, "user": {"uid": 0, "gid": 0},
              "args": ["/bin/busybox", "true"], "env": ["PATH=/bin"], "cwd": "/",
              "noNewPrivileges": true},
  "root": {"path": "rootfs", "readonly": true},
  "hostname": "bench",
  "mounts": [{"destination": "/proc", "type": "proc", "source": "proc"}],
  "linux": {
    "resources": {"cpu": {"shares": 512}, "memory": {"limit": 67108864}},
    "namespaces": [{"type": "pid"}, {"type": "ipc"}, {"type": "uts"}, {"type": "mount"}]
  }
})";
  return dir.string();
}

int run(const std::string& command) { return std::system(command.c_str()); }

std::vector<double> runcLaunches(int count) {
  std::string bundle = makeBundle();
  std::vector<double> samples;
  for (int i = 0; i < count; ++i) {
    std::string id = "allot-bench-" + std::to_string(getpid()) + "-" + std::to_string(i);
    auto start = Clock::now();
    int rc = run("runc run --detach --bundle " + bundle + " " + id + " </dev/null >/dev/null 2>&1");
    samples.push_back(ms(Clock::now() - start));
    run("runc delete --force " + id + " >/dev/null 2>&1");
    if (rc != 0) {
      std::fprintf(stderr, "runc run failed (exit %d); anchor skipped\n", rc);
      samples.clear();
      break;
    }
  }
  fs::remove_all(bundle);
  return samples;
}

}  // namespace
}  // namespace allot

int main(int argc, char** argv) {
  using namespace allot;
  if (geteuid() != 0) {
    std::fprintf(stderr, "isolated_launch_bench: needs root (real cgroups)\n");
    return 77;
  }
  int count = argc > 1 ? std::atoi(argv[1]) : 1000;
  auto ours = allotLaunches(count);
  auto anchor = runcLaunches(count);
  std::printf("isolated launch of /bin/true (cpus 0.5, mem 64 MiB), %d launches each\n", count);
  std::printf("%-28s %10s %10s\n", "", "p50 ms", "p99 ms");
  std::printf("%-28s %10.3f %10.3f\n", "allot (cgroups/cpu,mem)", percentile(ours, 0.5), percentile(ours, 0.99));
  if (anchor.empty()) {
    std::printf("%-28s %10s %10s\n", "runc run --detach (anchor)", "n/a", "n/a");
    return 0;
  }
  std::printf("%-28s %10.3f %10.3f\n", "runc run --detach (anchor)", percentile(anchor, 0.5),
              percentile(anchor, 0.99));
  std::printf("runc/allot p50: %.1fx (target: allot p50 under 5 ms and at least 5x faster)\n",
              percentile(anchor, 0.5) / percentile(ours, 0.5));
  return 0;
}
