// Launcher benchmark (issue 3).
//  1. Launch latency: Launcher::launch() of /bin/true until the child has
//     exec'd (the close-on-exec pipe reports EOF), p50/p99 over 1,000
//     launches. Anchor in the same run: glibc posix_spawn() of the same
//     program, which also returns once the child has exec'd (CLONE_VFORK).
//  2. Supervision cost with 1,000 executors alive (sleep processes watched
//     through io_uring): the loop's idle CPU over 3 s, and the latency from
//     a SIGKILL to the exit callback, against the same with none alive.
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <vector>

#include "base/asio.h"
#include "base/uring_poller.h"
#include "launcher/launcher.h"

extern char** environ;

namespace allot {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kLaunches = 1000;
constexpr int kAlive = 1000;

double ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * v.size()))];
}

LaunchSpec program(std::vector<std::string> argv) {
  LaunchSpec spec;
  spec.argv = std::move(argv);
  spec.env = {"PATH=/usr/bin:/bin"};
  spec.workDir = "/";
  return spec;
}

void drain(asio::io_context& io, Launcher& launcher) {
  while (launcher.supervisedCount() > 0) {
    io.restart();
    io.run_for(std::chrono::milliseconds(5));
  }
}

std::vector<double> allotLaunches(asio::io_context& io, Launcher& launcher) {
  std::vector<double> samples;
  LaunchSpec spec = program({"/bin/true"});
  for (int i = 0; i < kLaunches; ++i) {
    auto start = Clock::now();
    auto pid = launcher.launch(spec, [](const ExitInfo&) {});
    samples.push_back(ms(Clock::now() - start));
    if (!pid) std::fprintf(stderr, "launch failed: %s\n", pid.error().describe().c_str());
    if (i % 50 == 49) drain(io, launcher);
  }
  drain(io, launcher);
  return samples;
}

std::vector<double> spawnLaunches() {
  std::vector<double> samples;
  char* argv[] = {const_cast<char*>("/bin/true"), nullptr};
  char* envp[] = {const_cast<char*>("PATH=/usr/bin:/bin"), nullptr};
  for (int i = 0; i < kLaunches; ++i) {
    pid_t pid;
    auto start = Clock::now();
    posix_spawn(&pid, "/bin/true", nullptr, nullptr, argv, envp);
    samples.push_back(ms(Clock::now() - start));
    waitpid(pid, nullptr, 0);
  }
  return samples;
}

double loopCpuPercent(asio::io_context& io, std::chrono::seconds span) {
  rusage before{}, after{};
  getrusage(RUSAGE_SELF, &before);
  auto start = Clock::now();
  io.restart();
  io.run_for(span);
  double wall = std::chrono::duration<double>(Clock::now() - start).count();
  getrusage(RUSAGE_SELF, &after);
  auto cpu = [](const rusage& r) {
    return r.ru_utime.tv_sec + r.ru_stime.tv_sec + (r.ru_utime.tv_usec + r.ru_stime.tv_usec) / 1e6;
  };
  return (cpu(after) - cpu(before)) / wall * 100;
}

// Median time from SIGKILL of one extra child to its exit callback.
double exitLatencyMs(asio::io_context& io, Launcher& launcher) {
  std::vector<double> samples;
  for (int i = 0; i < 50; ++i) {
    std::optional<Clock::time_point> seen;
    auto pid = launcher.launch(program({"/bin/sleep", "600"}), [&](const ExitInfo&) { seen = Clock::now(); });
    if (!pid) return -1;
    auto start = Clock::now();
    (void)launcher.signal(*pid, SIGKILL);
    while (!seen) {
      io.restart();
      io.run_one_for(std::chrono::milliseconds(100));
    }
    samples.push_back(ms(*seen - start));
  }
  return percentile(samples, 0.5);
}

}  // namespace
}  // namespace allot

int main() {
  using namespace allot;
  asio::io_context io(1);
  auto poller = std::move(*UringPoller::create(io));
  auto launcher = std::move(*Launcher::create(io, *poller));
  std::printf("poller backend: %s\n", poller->backend().c_str());

  auto anchor = spawnLaunches();
  auto ours = allotLaunches(io, *launcher);
  std::printf("\nlaunch latency over %d launches of /bin/true (call until exec'd)\n", kLaunches);
  std::printf("%-22s %10s %10s\n", "", "p50 ms", "p99 ms");
  std::printf("%-22s %10.3f %10.3f\n", "allot Launcher", percentile(ours, 0.5), percentile(ours, 0.99));
  std::printf("%-22s %10.3f %10.3f\n", "posix_spawn (anchor)", percentile(anchor, 0.5), percentile(anchor, 0.99));
  std::printf("ratio allot/anchor p50: %.2f (target: p50 under 2 ms)\n",
              percentile(ours, 0.5) / percentile(anchor, 0.5));

  double idleCpu0 = loopCpuPercent(io, std::chrono::seconds(3));
  double exit0 = exitLatencyMs(io, *launcher);
  std::vector<pid_t> alive;
  for (int i = 0; i < kAlive; ++i) {
    auto pid = launcher->launch(program({"/bin/sleep", "600"}), [](const ExitInfo&) {});
    if (pid) alive.push_back(*pid);
  }
  double idleCpu1000 = loopCpuPercent(io, std::chrono::seconds(3));
  double exit1000 = exitLatencyMs(io, *launcher);
  std::printf("\nsupervision with %zu processes alive vs none\n", alive.size());
  std::printf("%-30s %10s %10s\n", "", "none", "1000");
  std::printf("%-30s %10.3f %10.3f\n", "loop idle CPU %", idleCpu0, idleCpu1000);
  std::printf("%-30s %10.3f %10.3f\n", "kill-to-exit-callback p50 ms", exit0, exit1000);
  for (pid_t pid : alive) (void)launcher->signal(pid, SIGKILL);
  drain(io, *launcher);
  return 0;
}
