// Launcher benchmark, Google Benchmark.
//  1. Launch latency: Launcher::launch() of /bin/true until the child has
//     exec'd (the vfork-style clone returns then), p50/p99 over 1,000
//     launches. Anchor in the same run: glibc posix_spawn() of the same
//     program, which also returns once the child has exec'd (CLONE_VFORK),
//     plain (/0) and with POSIX_SPAWN_SETSID (/1); the allot benchmark
//     reports its p50 ratio to both.
//     As root where cgroup2 is mounted, the same into a cgroup2 directory
//     of the bench's own, as every executor is born in its tracking cgroup:
//     BM_LaunchAllotIntoCgroup2/0 is launch() (a vfork-style clone3 with
//     CLONE_INTO_CGROUP, until the exec), /1 is startOffLoop(), the agent's
//     call, until the pid is back on the loop (the same clone, the child's
//     setup and exec on the launcher's clone thread).
//  2. Supervision cost with 1,000 executors alive (sleep processes watched
//     through the poller) against none: the loop's idle CPU over 3 s
//     (getrusage), and the latency from a SIGKILL to the exit callback.
// Counters are in microseconds (us) and percent; the iteration time is the
// manual time of one launch or one exit notification.
#include <benchmark/benchmark.h>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "base/asio.h"
#include "base/unique_fd.h"
#include "base/uring_poller.h"
#include "launcher/launcher.h"
#include "bench/stats.h"

namespace allot {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kLaunches = 1000;
constexpr int kExitSamples = 50;
constexpr auto kIdleSpan = std::chrono::seconds(3);

double us(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }
double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

using bench::percentile;

// One loop, poller and launcher for the whole run, as in the agent.
struct Daemon {
  asio::io_context io{1};
  std::unique_ptr<UringPoller> poller;
  std::unique_ptr<Launcher> launcher;

  Daemon() {
    poller = std::move(*UringPoller::create(io));
    launcher = std::move(*Launcher::create(io, *poller));
  }
  void drain() {
    while (launcher->supervisedCount() > 0) {
      io.restart();
      io.run_for(std::chrono::milliseconds(5));
    }
  }
};

Daemon& daemon() {
  static Daemon d;
  return d;
}

LaunchSpec program(std::vector<std::string> argv) {
  LaunchSpec spec;
  spec.argv = std::move(argv);
  spec.env = {"PATH=/usr/bin:/bin"};
  spec.workDir = "/";
  return spec;
}

double anchorP50 = 0;
double anchorSetsidP50 = 0;

void reportPercentiles(benchmark::State& state, const std::vector<double>& samples) {
  state.counters["p50_us"] = percentile(samples, 0.5);
  state.counters["p99_us"] = percentile(samples, 0.99);
}

// state.range(0): 1 adds POSIX_SPAWN_SETSID (the launcher's child calls
// setsid too, which with sched autogroup on creates a scheduling group).
void BM_LaunchPosixSpawnAnchor(benchmark::State& state) {
  daemon();  // the same process state as for the launcher (ring, SIGCHLD handler)
  char* argv[] = {const_cast<char*>("/bin/true"), nullptr};
  char* envp[] = {const_cast<char*>("PATH=/usr/bin:/bin"), nullptr};
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  if (state.range(0)) posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID);
  std::vector<double> samples;
  for (auto _ : state) {
    pid_t pid;
    auto start = Clock::now();
    int rc = posix_spawn(&pid, "/bin/true", nullptr, &attr, argv, envp);
    auto took = Clock::now() - start;
    if (rc != 0) {
      state.SkipWithError("posix_spawn failed");
      break;
    }
    state.SetIterationTime(seconds(took));
    samples.push_back(us(took));
    waitpid(pid, nullptr, 0);
  }
  posix_spawnattr_destroy(&attr);
  reportPercentiles(state, samples);
  (state.range(0) ? anchorSetsidP50 : anchorP50) = percentile(samples, 0.5);
}

// startOffLoop() of `spec`, until the pid is back on the loop.
Result<pid_t> startOffLoopAndWait(Daemon& d, const LaunchSpec& spec) {
  std::optional<Result<pid_t>> pid;
  d.launcher->startOffLoop(spec, [](const ExitInfo&) {}, [&](Result<pid_t> started) { pid = std::move(started); });
  while (!pid) {
    d.io.restart();
    d.io.run_one();
  }
  return std::move(*pid);
}

// Times launch() (or startOffLoop(), until the pid is back) of `spec` per
// iteration; the samples in microseconds.
std::vector<double> timeLaunches(benchmark::State& state, Daemon& d, const LaunchSpec& spec, bool offLoop) {
  std::vector<double> samples;
  for (auto _ : state) {
    auto begin = Clock::now();
    auto pid = offLoop ? startOffLoopAndWait(d, spec) : d.launcher->launch(spec, [](const ExitInfo&) {});
    auto took = Clock::now() - begin;
    if (!pid) {
      state.SkipWithError(pid.error().describe().c_str());
      break;
    }
    state.SetIterationTime(seconds(took));
    samples.push_back(us(took));
    // Wait for the exit (untimed) as the anchor's waitpid does: children
    // left running would compete with the next launches for the CPUs.
    d.drain();
  }
  return samples;
}

void BM_LaunchAllot(benchmark::State& state) {
  Daemon& d = daemon();
  std::vector<double> samples = timeLaunches(state, d, program({"/bin/true"}), false);
  reportPercentiles(state, samples);
  if (anchorP50 > 0) state.counters["p50_vs_posix_spawn"] = percentile(samples, 0.5) / anchorP50;
  if (anchorSetsidP50 > 0) {
    state.counters["p50_vs_posix_spawn_setsid"] = percentile(samples, 0.5) / anchorSetsidP50;
  }
  state.SetLabel(d.poller->backend());
}

// A cgroup2 directory of the bench's own ("" and no fd without root or a
// cgroup2 mount); removed at exit.
struct Cgroup2Dir {
  std::string path;
  UniqueFd fd;
  Cgroup2Dir() {
    for (const char* root : {"/sys/fs/cgroup/unified", "/sys/fs/cgroup"}) {
      if (geteuid() != 0 || access((std::string(root) + "/cgroup.procs").c_str(), F_OK) != 0) continue;
      if (std::string(root) == "/sys/fs/cgroup" && access("/sys/fs/cgroup/cgroup.controllers", F_OK) != 0) continue;
      std::string dir = std::string(root) + "/allot-launcher-bench-" + std::to_string(getpid());
      if (mkdir(dir.c_str(), 0755) != 0) return;
      path = dir;
      fd = UniqueFd(open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
      return;
    }
  }
  ~Cgroup2Dir() {
    fd.reset();
    if (!path.empty() && rmdir(path.c_str()) != 0) std::perror(("launcher_bench: rmdir " + path).c_str());
  }
};

void BM_LaunchAllotIntoCgroup2(benchmark::State& state) {
  Daemon& d = daemon();
  static Cgroup2Dir dir;
  if (!dir.fd) {
    state.SkipWithError("needs root and a cgroup2 mount");
    return;
  }
  LaunchSpec spec = program({"/bin/true"});
  spec.setup.cgroupDirFd = dir.fd.get();
  bool offLoop = state.range(0) == 1;
  std::vector<double> samples = timeLaunches(state, d, spec, offLoop);
  reportPercentiles(state, samples);
  if (anchorP50 > 0) state.counters["p50_vs_posix_spawn"] = percentile(samples, 0.5) / anchorP50;
  state.SetLabel(offLoop ? "startOffLoop(), until the pid is back" : "launch(), until the exec");
}

double loopCpuPercent(asio::io_context& io) {
  rusage before{}, after{};
  getrusage(RUSAGE_SELF, &before);
  auto start = Clock::now();
  io.restart();
  io.run_for(kIdleSpan);
  double wall = seconds(Clock::now() - start);
  getrusage(RUSAGE_SELF, &after);
  auto cpu = [](const rusage& r) {
    return r.ru_utime.tv_sec + r.ru_stime.tv_sec + (r.ru_utime.tv_usec + r.ru_stime.tv_usec) / 1e6;
  };
  return (cpu(after) - cpu(before)) / wall * 100;
}

// state.range(0) sleeping processes supervised while idle CPU and the
// SIGKILL-to-exit-callback latency of one more process are measured.
void BM_Supervision(benchmark::State& state) {
  Daemon& d = daemon();
  std::vector<pid_t> alive;
  for (int i = 0; i < state.range(0); ++i) {
    auto pid = d.launcher->launch(program({"/bin/sleep", "600"}), [](const ExitInfo&) {});
    if (!pid) {
      state.SkipWithError(pid.error().describe().c_str());
      break;
    }
    alive.push_back(*pid);
  }
  double idleCpu = loopCpuPercent(d.io);
  std::vector<double> samples;
  for (auto _ : state) {
    std::optional<Clock::time_point> seen;
    auto pid = d.launcher->launch(program({"/bin/sleep", "600"}),
                                  [&](const ExitInfo&) { seen = Clock::now(); });
    if (!pid) {
      state.SkipWithError(pid.error().describe().c_str());
      break;
    }
    auto start = Clock::now();
    (void)d.launcher->signal(*pid, SIGKILL);
    while (!seen) {
      d.io.restart();
      d.io.run_one_for(std::chrono::milliseconds(100));
    }
    state.SetIterationTime(seconds(*seen - start));
    samples.push_back(us(*seen - start));
  }
  for (pid_t pid : alive) (void)d.launcher->signal(pid, SIGKILL);
  d.drain();
  state.counters["alive"] = static_cast<double>(alive.size());
  state.counters["idle_cpu_pct"] = idleCpu;
  state.counters["exit_p50_us"] = percentile(samples, 0.5);
}

BENCHMARK(BM_LaunchPosixSpawnAnchor)->Arg(0)->Arg(1)->Iterations(kLaunches)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_LaunchAllot)->Iterations(kLaunches)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_LaunchAllotIntoCgroup2)->Arg(0)->Arg(1)->Iterations(kLaunches)->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Supervision)->Arg(0)->Arg(1000)->Iterations(kExitSamples)->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace allot

BENCHMARK_MAIN();
