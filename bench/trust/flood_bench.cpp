// One flooding connection against another peer's round trip, on a real
// allot-master (target: the flood moves the other peer's p99 by at most
// 100 ms), and the master's CPU per refused frame (target: under 10 ms).
//
//   flood_bench --master build/master/allot-master [--probes 200] [--refused-seconds 3]
//
// In one run, one master:
//   alone     a framework's Reconcile round trips (one unknown task id,
//             answered TASK_LOST) with nothing else going on: the anchor;
//   flood     the same while another connection floods re-registrations
//             and reconciles (tests/common/flood.h);
//   refused   a connection floods Reconciles one task id over the limit;
//             the master's CPU (utime + stime from /proc) over the frames
//             it refused (ErrorMessages read back).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/result.h"
#include "tests/common/flood.h"

namespace allot {
namespace {

using namespace std::chrono_literals;
using testing::Flood;
using testing::ReconcileProbe;

struct Options {
  std::string master;
  int probes = 200;
  double refusedSeconds = 3;
};

[[noreturn]] void die(const std::string& why) {
  std::fprintf(stderr, "flood_bench: %s\n", why.c_str());
  std::exit(1);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) die(a + " needs a value");
      return argv[++i];
    };
    if (a == "--master") o.master = value();
    else if (a == "--probes") o.probes = std::stoi(value());
    else if (a == "--refused-seconds") o.refusedSeconds = std::stod(value());
    else die("unknown argument " + a + " (--master PATH [--probes N] [--refused-seconds S])");
  }
  if (o.master.empty()) die("--master PATH is required");
  if (o.probes < 10) die("--probes must be at least 10");
  return o;
}

// The master under test, its port and its CPU time.
class MasterProcess {
 public:
  explicit MasterProcess(const std::string& binary) {
    dir_ = std::filesystem::temp_directory_path() / ("allot-flood-bench-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
    std::string portFile = (dir_ / "port").string(), log = (dir_ / "master.log").string();
    pid_ = fork();
    if (pid_ == 0) {
      FILE* out = std::fopen(log.c_str(), "w");
      if (out) dup2(fileno(out), 2);
      execl(binary.c_str(), binary.c_str(), "--listen", "127.0.0.1:0", "--port-file", portFile.c_str(), nullptr);
      _exit(127);
    }
    for (int i = 0; i < 500 && port_ == 0; ++i) {
      std::ifstream(portFile) >> port_;
      std::this_thread::sleep_for(10ms);
    }
    if (port_ == 0) die("the master wrote no port (" + log + ")");
  }
  ~MasterProcess() {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    std::filesystem::remove_all(dir_);
  }
  uint16_t port() const { return port_; }
  // utime + stime so far, in milliseconds.
  double cpuMs() const {
    std::ifstream in("/proc/" + std::to_string(pid_) + "/stat");
    std::string text((std::istreambuf_iterator<char>(in)), {});
    std::istringstream fields(text.substr(text.rfind(')') + 2));
    std::string skip;
    for (int i = 3; i < 14; ++i) fields >> skip;  // fields 3..13
    double utime = 0, stime = 0;
    fields >> utime >> stime;
    return (utime + stime) * 1000.0 / static_cast<double>(sysconf(_SC_CLK_TCK));
  }

 private:
  std::filesystem::path dir_;
  pid_t pid_ = -1;
  uint16_t port_ = 0;
};

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  size_t at = std::min(v.size() - 1, static_cast<size_t>(p / 100.0 * static_cast<double>(v.size())));
  return v[at];
}

std::vector<double> probeRoundTrips(ReconcileProbe& probe, int count) {
  std::vector<double> ms;
  for (int i = 0; i < count; ++i) {
    auto rtt = probe.roundTripMs();
    if (!rtt) die("a probe got no answer within 5 s");
    ms.push_back(*rtt);
    std::this_thread::sleep_for(5ms);
  }
  return ms;
}

void runFlood(const Options& o, MasterProcess& master) {
  ReconcileProbe probe(master.port());
  if (!probe.registered()) die("the probe framework was not registered");
  std::vector<double> alone = probeRoundTrips(probe, o.probes);
  Flood flood(master.port(), Flood::Kind::kRegistrations);
  if (!flood.start()) die("the flooder was not registered");
  for (int i = 0; i < 1000 && flood.answers() < 1000; ++i) std::this_thread::sleep_for(10ms);
  if (flood.answers() < 1000) die("the flood did not get going");
  uint64_t before = flood.answers();
  auto start = std::chrono::steady_clock::now();
  std::vector<double> flooded = probeRoundTrips(probe, o.probes);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  double handledPerS = static_cast<double>(flood.answers() - before) / seconds;
  flood.stop();
  double aloneP99 = percentile(alone, 99), floodP99 = percentile(flooded, 99);
  bench::Result r("trust_flood");
  r.add("probes", static_cast<long long>(o.probes))
      .add("alone_p50_ms", percentile(alone, 50))
      .add("alone_p99_ms", aloneP99)
      .add("flood_p50_ms", percentile(flooded, 50))
      .add("flood_p99_ms", floodP99)
      .add("p99_delta_ms", floodP99 - aloneP99)
      .add("p99_ratio", floodP99 / aloneP99)
      .add("flood_registrations_handled_per_s", handledPerS, 0)
      .add("target", std::string("p99_delta_ms <= 100"));
  r.emit();
}

void runRefused(const Options& o, MasterProcess& master) {
  Flood flood(master.port(), Flood::Kind::kRefused);
  if (!flood.start()) die("the refused-frame flooder was not registered");
  std::this_thread::sleep_for(500ms);  // warm: the master is refusing frames
  double cpu0 = master.cpuMs();
  uint64_t refused0 = flood.answers();
  std::this_thread::sleep_for(std::chrono::duration<double>(o.refusedSeconds));
  double cpu = master.cpuMs() - cpu0;
  uint64_t refused = flood.answers() - refused0;
  flood.stop();
  if (refused == 0) die("no frame was refused");
  bench::Result r("trust_refused_frame_cpu");
  r.add("frame", std::string("Reconcile with kReconcileTasksMax+1 task ids"))
      .add("refused_frames", static_cast<long long>(refused))
      .add("master_cpu_ms", cpu, 1)
      .add("master_cpu_ms_per_refused_frame", cpu / static_cast<double>(refused))
      .add("target", std::string("< 10 ms per frame"));
  r.emit();
}

}  // namespace
}  // namespace allot

int main(int argc, char** argv) {
  signal(SIGPIPE, SIG_IGN);
  allot::Options o = allot::parse(argc, argv);
  allot::MasterProcess master(o.master);
  allot::runFlood(o, master);
  allot::runRefused(o, master);
  return 0;
}
