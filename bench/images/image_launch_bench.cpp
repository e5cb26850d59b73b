// Launch of an executor from a cached image: the agent's path from a launch
// to the process running in its root filesystem and cgroups — isolators
// prepare (cgroups/cpu, cgroups/mem; filesystem/linux: hold the layers,
// make the writable layer's directories, plan the root), Launcher::launch
// (the child mounts the overlay, pivot_roots, builds /proc, /dev, /sys,
// /tmp and the sandbox bind; launch() returns once it has exec'd), isolate
// — p50/p99 of `/bin/busybox true` from a one-layer busybox image already
// in the layer store.
//
// Anchor in the same run: `runc run --detach` of the same command in an OCI
// bundle whose rootfs is the same unpacked layer (copied from the store),
// with the same cpu shares and memory limit, a PID and mount namespace and
// /proc; it returns once the container process has started. Teardown of
// both (exit, reap jobs and cleanup, `runc delete`) is outside the timed
// part. Usage: image_launch_bench [count] (default 1000). Needs root.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "base/asio.h"
#include "base/uring_poller.h"
#include "base/worker_pool.h"
#include "bench/stats.h"
#include "images/digest.h"
#include "images/layer_store.h"
#include "isolators/isolator_table.h"
#include "launcher/launcher.h"

namespace allot {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using bench::ms;
using bench::percentile;

std::string readWhole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

int run(const std::string& command) { return std::system(command.c_str()); }

// A one-layer busybox image in a fresh store under `dir`; its layer digest.
std::optional<images::Digest> storeImage(const std::string& dir, images::LayerStore& store) {
  fs::create_directories(dir + "/src/bin");
  fs::copy_file("/bin/busybox", dir + "/src/bin/busybox", fs::copy_options::overwrite_existing);
  std::string tar = dir + "/layer.tar";
  if (run("tar -C " + dir + "/src -cf " + tar + " bin") != 0) return std::nullopt;
  std::string bytes = readWhole(tar);
  images::Digest digest = images::sha256Of(bytes);
  Result<std::string> rootfs = store.insert(digest, tar, bytes.size());
  if (!rootfs) {
    std::fprintf(stderr, "image_launch_bench: %s\n", rootfs.error().describe().c_str());
    return std::nullopt;
  }
  return digest;
}

void reap(asio::io_context& io, WorkerPool& pool, std::vector<std::unique_ptr<Isolator>>& isolators,
          const ContainerId& id) {
  std::vector<std::function<Status()>> jobs;
  for (auto& iso : isolators)
    if (auto job = iso->reapJob(id)) jobs.push_back(std::move(job));
  bool done = false;
  Status queued = pool.submit<Status>(
      [jobs] {
        for (auto& job : jobs) (void)job();
        return okStatus();
      },
      [&](Status) { done = true; });
  if (!queued) std::exit(1);
  while (!done) {
    io.restart();
    io.run_one_for(std::chrono::milliseconds(100));
  }
  for (auto it = isolators.rbegin(); it != isolators.rend(); ++it) (void)(*it)->cleanup(id);
}

std::vector<double> allotLaunches(int count, const std::string& dir, images::LayerStore& store,
                                  const images::Digest& layer) {
  asio::io_context io(1);
  auto poller = std::move(*UringPoller::create(io));
  auto launcher = std::move(*Launcher::create(io, *poller));
  IsolatorOptions options;
  options.poller = poller.get();
  options.cgroupsRoot = "allot-imgbench-" + std::to_string(getpid());
  options.io = &io;
  options.imageStore = &store;
  options.rootfsDir = dir + "/rootfs";
  auto isolators = createIsolators("cgroups/cpu,cgroups/mem,filesystem/linux", options);
  if (!isolators) {
    std::fprintf(stderr, "isolators: %s\n", isolators.error().describe().c_str());
    std::exit(1);
  }
  std::optional<WorkerPool> reaper(std::in_place, io, WorkerPoolOptions{.threads = 2, .queueMax = 1024});
  for (auto& iso : *isolators) (void)iso->recover({});
  fs::create_directories(dir + "/sandbox");
  ContainerConfig config(*Resources::parse("cpus:0.5;mem:64"), dir + "/sandbox");
  config.imageLayers = {layer.hex};
  std::vector<double> samples;
  for (int i = 0; i < count; ++i) {
    ContainerId id{"bench", "e" + std::to_string(i)};
    LaunchSpec spec;
    spec.argv = {"/bin/busybox", "true"};
    spec.env = {"PATH=/bin"};
    spec.workDir = dir + "/sandbox";
    bool exited = false;
    auto start = Clock::now();
    for (auto& iso : *isolators) {
      if (Status st = iso->prepare(id, config, &spec.setup); !st) {
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
    reap(io, *reaper, *isolators, id);
  }
  reaper.reset();
  isolators->clear();
  return samples;
}

std::string makeBundle(const std::string& dir, const std::string& layerRootfs) {
  std::string bundle = dir + "/bundle";
  fs::create_directories(bundle);
  run("cp -a " + layerRootfs + " " + bundle + "/rootfs");
  fs::create_directories(bundle + "/rootfs/proc");
  std::ofstream(bundle + "/config.json") << R"({
  "ociVersion": "1.0.2",
  "process": {"terminal": false, "user": {"uid": 0, "gid": 0},
              "args": ["/bin/busybox", "true"], "env": ["PATH=/bin"], "cwd": "/", "noNewPrivileges": true},
  "root": {"path": "rootfs", "readonly": true},
  "mounts": [{"destination": "/proc", "type": "proc", "source": "proc"}],
  "linux": {
    "resources": {"cpu": {"shares": 512}, "memory": {"limit": 67108864}},
    "namespaces": [{"type": "pid"}, {"type": "mount"}]
  }
})";
  return bundle;
}

std::vector<double> runcLaunches(int count, const std::string& bundle) {
  std::vector<double> samples;
  for (int i = 0; i < count; ++i) {
    std::string id = "allot-imgbench-" + std::to_string(getpid()) + "-" + std::to_string(i);
    auto start = Clock::now();
    int rc = run("runc run --detach --bundle " + bundle + " " + id + " </dev/null >/dev/null 2>&1");
    samples.push_back(ms(Clock::now() - start));
    run("runc delete --force " + id + " >/dev/null 2>&1");
    if (rc != 0) {
      std::fprintf(stderr, "runc run failed (exit %d); anchor skipped\n", rc);
      return {};
    }
  }
  return samples;
}

}  // namespace
}  // namespace allot

int main(int argc, char** argv) {
  using namespace allot;
  if (geteuid() != 0) {
    std::fprintf(stderr, "image_launch_bench: needs root (overlay, cgroups)\n");
    return 77;
  }
  int count = argc > 1 ? std::atoi(argv[1]) : 1000;
  std::string dir = (fs::temp_directory_path() / ("allot-imgbench-" + std::to_string(getpid()))).string();
  fs::create_directories(dir);
  auto store = images::LayerStore::open({.root = dir + "/store"});
  if (!store) {
    std::fprintf(stderr, "image_launch_bench: %s\n", store.error().describe().c_str());
    return 1;
  }
  std::optional<images::Digest> layer = storeImage(dir, **store);
  if (!layer) return 1;
  std::vector<double> ours = allotLaunches(count, dir, **store, *layer);
  std::vector<double> anchor = runcLaunches(count, makeBundle(dir, *(*store)->find(*layer)));
  std::printf("launch of /bin/busybox true from a cached one-layer image (cpus 0.5, mem 64 MiB), %d launches each\n",
              count);
  std::printf("%-48s %10s %10s\n", "", "p50 ms", "p99 ms");
  auto row = [](const char* name, const std::vector<double>& v) {
    if (v.empty()) return (void)std::printf("%-48s %10s %10s\n", name, "n/a", "n/a");
    std::printf("%-48s %10.3f %10.3f\n", name, percentile(v, 0.5), percentile(v, 0.99));
  };
  row("allot (cgroups/cpu,mem + filesystem/linux)", ours);
  row("runc run --detach, same unpacked image (anchor)", anchor);
  if (!ours.empty() && !anchor.empty())
    std::printf("runc/allot p50: %.1fx (target: allot p50 under 2 ms and at least 10x faster)\n",
                percentile(anchor, 0.5) / percentile(ours, 0.5));
  store->reset();
  fs::remove_all(dir);
  return 0;
}
