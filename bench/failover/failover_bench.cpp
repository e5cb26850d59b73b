// failover_bench: the paper's experiment 6.6 (master failover). Starts N
// allot-master processes contending in ZooKeeper and W worker processes
// (bench/failover/emulated_peers.h) that emulate A agents and F frameworks,
// each a real protocol peer on the production ReconnectingLink (jittered
// exponential backoff, leader-change spread, fencing) with one ZooKeeper
// detector per worker. Each framework but the probe runs one long-lived
// task and one task per round. Then it kills the leader K times (SIGKILL or
// SIGTERM); at each kill the agents end that round's tasks, so their
// terminal updates cross the failover. Per kill, milliseconds from the
// signal until:
//   elected     this process's ZooKeeper detector reports a new leader
//   detected    the last worker's detector reports it
//   accepting   the new leader answers its first registration, whoever sent
//               it: the earliest of probe_answered and the first emulated
//               agent's or framework's answer (until 2026-11-24 #5 this
//               column was the first emulated peer's answer alone; that is
//               first_agent_back now)
// and, to tell the clients' reconnect delay from the new leader's own
// latency, until: the first worker's detector reports the new leader
// (first_detected), the first emulated peer is handshaken with it
// (first_hello), a probe this process connects to the new leader the
// moment its own detector reports it is handshaken (probe_hello) and has its
// registration answered (probe_answered: a real registration, a throwaway
// framework through the production Connection, unregistered at once), and
// the first emulated agent's re-registration is answered (first_agent_back);
//   agents      every agent has re-registered
//   frameworks  every framework has re-registered
//   offers      the probe framework's first offer from the new leader
// then, once the round recovered, every framework reconciles with the new
// leader (explicitly for the tasks it believes run, and implicitly) and the
// bench counts the running tasks confirmed RUNNING, the answers that were
// not a task's true state (must be 0), and the milliseconds from asking to
// the last confirmation; and the tasks reported LOST and the round's terminal updates that did not
// reach their framework (both must be 0: the round waits for the updates up
// to --round-timeout), and the CPU time the new leader and the client
// workers spent from the kill to recovery, and from the masters' logs the
// masters that fenced themselves during the round (a leader that lost its
// ZooKeeper link under the reconnect burst: must be 0) and the times a
// master's ZooKeeper client thread ran late ("Exceeded deadline": starved
// of CPU). One CSV line per kill on stdout.
//
// Workers: one per --peers-per-worker peers, so no process needs more than
// a few thousand of its RLIMIT_NOFILE (20,000 here) and both cores serve
// the emulation. Their events carry CLOCK_MONOTONIC times. With
// --worker-csv, one more line per worker per kill says where that worker's
// time went: when it lost its first link, when its detector named the new
// leader and how many links it had lost by then, when it had told all its
// links (the fan-out's end), its first handshake and
// first answered agent registration, and its loop thread's CPU time and
// run-queue wait from the kill to each.
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <thread>

#include "base/asio.h"
#include "base/clock.h"
#include "base/flags.h"
#include "base/log.h"
#include "bench/failover/emulated_peers.h"
#include "ha/detector_factory.h"
#include "proto/connection.h"

namespace {

using namespace allot;

struct Settings {
  std::string zk;
  std::string masterBinary;
  std::string workDir = "/tmp/allot-failover-bench";
  int64_t masters = 3;
  int64_t agents = 200;
  int64_t frameworks = 200;
  int64_t kills = 5;
  std::string signal = "kill";
  double sessionTimeoutS = 1;
  int64_t peersPerWorker = 2500;
  double roundTimeoutS = 60;
  double statusRetryS = 10;
  int64_t fanoutChunk = 32;
  int64_t fanoutEqualPasses = 4;
  std::string workerCsv;     // per-worker diagnosis lines, appended ("" = none)
  std::string masterFlags;   // more flags for every allot-master, space-separated
  int64_t workerIndex = -1;  // >= 0: run as that worker
  int64_t workers = 0;
};

struct MasterProc {
  pid_t pid = -1;
  uint16_t port = 0;
};

// Where one worker's time went in one kill round (ms from the signal; loop
// CPU and run-queue wait from the driver's "finish", 10 ms before it).
struct WorkerRound {
  int64_t markCpuNs = -1, markWaitNs = -1;
  double firstLost = -1;
  struct Point {
    double ms = -1;
    int64_t lost = -1;
    double cpuMs = -1, waitMs = -1;
  };
  Point detected, toldAll, hello, agentBack;
};

// What one worker process has reported.
struct WorkerProc {
  pid_t pid = -1;
  std::unique_ptr<asio::posix::stream_descriptor> out;  // its events
  int in = -1;                                          // its commands
  std::unique_ptr<asio::streambuf> buffer;
  bool hasFrameworks = false;
  bool agentsFull = false, frameworksFull = false;
  bool agentsDropped = false, frameworksDropped = false;  // since the round began
  int64_t agentsFullNs = 0, frameworksFullNs = 0;
  int64_t running = 0;
  bool exited = false;
  WorkerRound round;
};

// User + system CPU time of a process so far, in milliseconds; 0 if gone.
double cpuMs(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto paren = text.rfind(')');
  if (paren == std::string::npos) return 0;
  std::istringstream fields(text.substr(paren + 2));
  std::string skip;
  for (int i = 3; i < 14; ++i) fields >> skip;  // state .. cmajflt
  double utime = 0, stime = 0;
  fields >> utime >> stime;
  return (utime + stime) * 1000.0 / static_cast<double>(sysconf(_SC_CLK_TCK));
}

int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(SteadyClock::now().time_since_epoch()).count();
}

class Bench {
 public:
  Bench(asio::io_context& io, Settings s) : io_(io), s_(std::move(s)) {}

  int run() {
    std::filesystem::create_directories(s_.workDir);
    for (int i = 0; i < s_.masters; ++i) {
      masters_.push_back(spawnMaster(i));
      if (masters_.back().port == 0) return fail("master " + std::to_string(i) + " did not start");
      // Masters join in order: the first leads.
      runFor(std::chrono::milliseconds(300));
    }
    auto detector = makeLeaderDetector(io_, s_.zk);
    if (!detector) return fail(detector.error().describe());
    detector_ = std::move(*detector);
    detector_->start([this](const std::optional<Leader>& l) { onLeader(l); });
    int64_t workers = std::max<int64_t>(1, (s_.agents + s_.frameworks + s_.peersPerWorker - 1) / s_.peersPerWorker);
    workers = std::min(workers, s_.agents);
    for (int64_t i = 0; i < workers; ++i) {
      if (auto st = spawnWorker(i, workers); !st) return fail(st.error().describe());
    }
    int64_t tasks = (s_.frameworks - 1) * (s_.kills + 1);
    if (!waitFor([&] { return allFull() && running() >= tasks; }, 180))
      return fail("set-up did not finish: running " + std::to_string(running()) + " of " +
                  std::to_string(tasks) + " tasks; " + describeWorkers());
    std::printf("agents,frameworks,signal,kill,elected_ms,detected_ms,accepting_ms,agents_ms,"
                "frameworks_ms,offers_ms,tasks_lost,updates_lost,reconciled,reconcile_wrong,reconcile_ms,"
                "leader_cpu_ms,clients_cpu_ms,load1,fenced,zk_late,first_detected_ms,first_hello_ms,"
                "probe_hello_ms,probe_answered_ms,first_agent_back_ms\n");
    std::fflush(stdout);
    for (int k = 1; k <= s_.kills; ++k) {
      if (int rc = killRound(k); rc != 0) return rc;
    }
    stopAll(SIGTERM);
    if (lost_ > 0) {
      std::cerr << "failover_bench: " << lost_ << " tasks reported LOST\n";
      return 1;
    }
    return 0;
  }

 private:
  int fail(const std::string& why) {
    std::cerr << "failover_bench: " << why << "\n";
    stopAll(SIGKILL);
    return 1;
  }

  void stopAll(int sig) {
    for (auto& w : workers_) {
      if (w.in >= 0) ::close(w.in);  // a worker stops when its stdin closes
      w.in = -1;
    }
    for (auto& m : masters_) stopMaster(m, sig);
    for (auto& w : workers_) {
      if (w.pid > 0) waitpid(w.pid, nullptr, 0);
      w.pid = -1;
    }
  }

  // ---------------------------------------------------------------- processes
  MasterProc spawnMaster(int index) {
    std::string portFile = s_.workDir + "/master" + std::to_string(index) + ".port";
    std::filesystem::remove(portFile);
    MasterProc m;
    std::vector<std::string> args = {s_.masterBinary, "--listen", "127.0.0.1:0", "--port-file",
                                     portFile, "--zk", s_.zk, "--zk-session-timeout",
                                     std::to_string(s_.sessionTimeoutS), "--agent-timeout", "600",
                                     "--failover-timeout", "600", "--stats-interval", "0"};
    std::istringstream extra(s_.masterFlags);
    for (std::string flag; extra >> flag;) args.push_back(flag);
    m.pid = spawn(args, -1, -1, s_.workDir + "/master" + std::to_string(index) + ".log");
    for (int i = 0; i < 1000 && m.port == 0; ++i) {
      std::ifstream(portFile) >> m.port;
      if (m.port == 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return m;
  }

  // fork + exec with stdin/stdout from the given fds (-1: /dev/null) and
  // stderr appended to `log`; the child dies with this process.
  static pid_t spawn(std::vector<std::string> args, int in, int out, const std::string& log) {
    pid_t pid = fork();
    if (pid != 0) return pid;
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    int null = open("/dev/null", O_RDWR);
    dup2(in >= 0 ? in : null, 0);
    dup2(out >= 0 ? out : null, 1);
    int err = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (err >= 0) dup2(err, 2);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }

  void stopMaster(MasterProc& m, int sig) {
    if (m.pid <= 0) return;
    kill(m.pid, sig);
    waitpid(m.pid, nullptr, 0);
    m.pid = -1;
  }

  Status spawnWorker(int64_t index, int64_t workers) {
    int toWorker[2], fromWorker[2];
    if (pipe2(toWorker, O_CLOEXEC) != 0 || pipe2(fromWorker, O_CLOEXEC) != 0)
      return Error::fromErrno("pipe for worker " + std::to_string(index));
    std::vector<std::string> args = {
        "/proc/self/exe", "--zk", s_.zk, "--worker-index", std::to_string(index),
        "--workers", std::to_string(workers), "--agents", std::to_string(s_.agents),
        "--frameworks", std::to_string(s_.frameworks), "--kills", std::to_string(s_.kills),
        "--status-retry", std::to_string(s_.statusRetryS), "--fanout-chunk",
        std::to_string(s_.fanoutChunk),
        "--fanout-equal-passes", std::to_string(s_.fanoutEqualPasses)};
    WorkerProc w;
    w.pid = spawn(args, toWorker[0], fromWorker[1], s_.workDir + "/worker" + std::to_string(index) + ".log");
    ::close(toWorker[0]);
    ::close(fromWorker[1]);
    w.in = toWorker[1];
    w.out = std::make_unique<asio::posix::stream_descriptor>(io_, fromWorker[0]);
    w.buffer = std::make_unique<asio::streambuf>();
    w.hasFrameworks = index < s_.frameworks;
    workers_.push_back(std::move(w));
    readWorker(workers_.size() - 1);
    return okStatus();
  }

  void readWorker(size_t i) {
    WorkerProc& w = workers_[i];
    asio::async_read_until(*w.out, *w.buffer, '\n', [this, i](const boost::system::error_code& ec, size_t) {
      WorkerProc& w = workers_[i];
      if (ec) {
        w.exited = true;
        return;
      }
      std::istream in(w.buffer.get());
      std::string line;
      std::getline(in, line);
      onEvent(w, line);
      readWorker(i);
    });
  }

  // ---------------------------------------------------------------- events
  void onEvent(WorkerProc& w, const std::string& line) {
    std::istringstream in(line);
    char kind = 0;
    int64_t t = 0;
    std::string value;
    in >> kind >> t >> value;
    double ms = round_.active ? (t - round_.t0Ns) / 1e6 : -1;
    bool fromNewLeader = round_.active && value != std::to_string(round_.oldPort) && ms >= 0;
    // D, H, R, S: "<lost> <cpu_ns> <wait_ns>" after the port.
    auto point = [&](WorkerRound::Point& p) {
      int64_t lost = -1, cpu = -1, wait = -1;
      if (!fromNewLeader || p.ms >= 0 || !(in >> lost >> cpu >> wait)) return;
      p.ms = ms;
      p.lost = lost;
      if (w.round.markCpuNs >= 0) {
        p.cpuMs = (cpu - w.round.markCpuNs) / 1e6;
        p.waitMs = (wait - w.round.markWaitNs) / 1e6;
      }
    };
    switch (kind) {
      case 'A':
        w.agentsFull = value == "1";
        if (w.agentsFull) w.agentsFullNs = t;
        else if (round_.active) w.agentsDropped = true;
        break;
      case 'F':
        w.frameworksFull = value == "1";
        if (w.frameworksFull) w.frameworksFullNs = t;
        else if (round_.active) w.frameworksDropped = true;
        break;
      case 'R':
        if (fromNewLeader && (round_.firstAgentBack < 0 || ms < round_.firstAgentBack))
          round_.firstAgentBack = ms;
        point(w.round.agentBack);
        break;
      case 'S':
        if (fromNewLeader && (round_.firstFrameworkBack < 0 || ms < round_.firstFrameworkBack))
          round_.firstFrameworkBack = ms;
        break;
      case 'K': {
        int64_t cpu = -1, wait = -1;  // after the round number, in `value`
        w.round = WorkerRound{};
        if (in >> cpu >> wait) {
          w.round.markCpuNs = cpu;
          w.round.markWaitNs = wait;
        }
        break;
      }
      case 'E':
        if (round_.active && w.round.firstLost < 0) w.round.firstLost = ms;
        break;
      case 'O':
        if (fromNewLeader && (round_.offers < 0 || ms < round_.offers)) round_.offers = ms;
        break;
      case 'D':
        if (fromNewLeader && ms > round_.detected) round_.detected = ms;
        if (fromNewLeader && (round_.firstDetected < 0 || ms < round_.firstDetected))
          round_.firstDetected = ms;
        point(w.round.detected);
        break;
      case 'G': point(w.round.toldAll); break;
      case 'H':
        if (fromNewLeader && (round_.firstHello < 0 || ms < round_.firstHello)) round_.firstHello = ms;
        point(w.round.hello);
        break;
      case 'U': w.running = std::stoll(value); break;
      case 'T': ++finished_[std::stoll(value)]; break;
      case 'L': ++lost_; break;
      case 'C': reconciled_ += std::stoll(value); break;
      case 'W':
        ++reconcileWrong_;
        LOG_WARNING("reconciliation answered " << value);
        break;
      default: LOG_WARNING("worker event not understood: " << line);
    }
  }

  bool allFull() const {
    for (const auto& w : workers_) {
      if (!w.agentsFull || (w.hasFrameworks && !w.frameworksFull)) return false;
    }
    return !workers_.empty();
  }
  int64_t running() const {
    int64_t n = 0;
    for (const auto& w : workers_) n += w.running;
    return n;
  }
  std::string describeWorkers() const {
    std::string text;
    for (size_t i = 0; i < workers_.size(); ++i) {
      const auto& w = workers_[i];
      text += "worker " + std::to_string(i) + (w.exited ? " exited" : "") +
              ": agents " + (w.agentsFull ? "all" : "not all") + " registered, frameworks " +
              (w.frameworksFull || !w.hasFrameworks ? "all" : "not all") + " registered; ";
    }
    return text + "logs in " + s_.workDir;
  }

  // Every worker went down and came back since the kill: the latest of
  // their "all registered" times.
  double recoveredMs(bool agents) const {
    int64_t latest = 0;
    for (const auto& w : workers_) {
      if (!agents && !w.hasFrameworks) continue;
      bool dropped = agents ? w.agentsDropped : w.frameworksDropped;
      bool full = agents ? w.agentsFull : w.frameworksFull;
      if (!dropped || !full) return -1;
      latest = std::max(latest, agents ? w.agentsFullNs : w.frameworksFullNs);
    }
    return (latest - round_.t0Ns) / 1e6;
  }

  // ---------------------------------------------------------------- rounds
  int killRound(int k) {
    size_t leaderIndex = masters_.size();
    for (size_t i = 0; i < masters_.size(); ++i) {
      if (leader_ && masters_[i].port == leader_->endpoint.port) leaderIndex = i;
    }
    if (leaderIndex == masters_.size()) return fail("no known leader among the masters");
    round_ = Round{};
    round_.k = k;
    for (auto& w : workers_) w.agentsDropped = w.frameworksDropped = false;
    // The agents end round k's tasks now: their updates race the kill.
    if (int rc = tellWorkers("finish " + std::to_string(k)); rc != 0) return rc;
    runFor(std::chrono::milliseconds(10));
    std::vector<double> mastersCpu, workersCpu;
    for (auto& m : masters_) mastersCpu.push_back(m.pid > 0 ? cpuMs(m.pid) : 0);
    for (auto& w : workers_) workersCpu.push_back(cpuMs(w.pid));
    int64_t fencedBefore = countInMasterLogs("no longer the leader");
    int64_t lateBefore = countInMasterLogs("zookeeper client thread ran late");
    round_.active = true;
    round_.oldPort = masters_[leaderIndex].port;
    round_.t0Ns = nowNs();
    kill(masters_[leaderIndex].pid, s_.signal == "term" ? SIGTERM : SIGKILL);
    int64_t expected = s_.frameworks - 1;
    bool done = waitFor([&] {
      round_.agents = recoveredMs(true);
      round_.frameworks = recoveredMs(false);
      return round_.offers >= 0 && round_.agents >= 0 && round_.frameworks >= 0 &&
             accepting() >= 0 && finished_[k] >= expected;
    }, s_.roundTimeoutS);
    // The probe is answered long before everyone is back; give a stalled
    // one a moment, then drop it.
    waitFor([&] { return round_.probeAnswered >= 0; }, 1);
    if (probe_) probe_->close("round over");
    probe_.reset();
    round_.active = false;
    round_.accepting = accepting();
    writeWorkerLines();
    // CPU spent from the kill to recovery by the new leader and by the
    // emulated clients: what the round cost, apart from waiting.
    double leaderCpu = -1, clientsCpu = 0;
    for (size_t i = 0; i < masters_.size(); ++i) {
      if (i != leaderIndex && leader_ && masters_[i].port == leader_->endpoint.port)
        leaderCpu = cpuMs(masters_[i].pid) - mastersCpu[i];
    }
    for (size_t i = 0; i < workers_.size(); ++i) clientsCpu += cpuMs(workers_[i].pid) - workersCpu[i];
    double reconcileMs = -1;
    int64_t running = (s_.frameworks - 1) * (1 + s_.kills - k);
    if (done) {
      if (int rc = tellWorkers("reconcile " + std::to_string(k)); rc != 0) return rc;
      int64_t asked = nowNs();
      reconciled_ = 0;
      bool confirmed = waitFor([&] { return reconciled_ >= running; }, s_.roundTimeoutS);
      if (confirmed) reconcileMs = (nowNs() - asked) / 1e6;
      // Answers that arrive after the last confirmation are checked too.
      runFor(std::chrono::milliseconds(200));
    }
    double load = 0;
    std::ifstream("/proc/loadavg") >> load;
    int64_t fenced = countInMasterLogs("no longer the leader") - fencedBefore;
    int64_t late = countInMasterLogs("zookeeper client thread ran late") - lateBefore;
    std::printf("%lld,%lld,%s,%d,%.0f,%.0f,%.0f,%.0f,%.0f,%.0f,%lld,%lld,%lld,%lld,%.0f,%.0f,%.0f,%.2f,"
                "%lld,%lld,%.0f,%.0f,%.0f,%.0f,%.0f\n",
                static_cast<long long>(s_.agents), static_cast<long long>(s_.frameworks),
                s_.signal.c_str(), k, round_.elected, round_.detected, round_.accepting,
                round_.agents, round_.frameworks, round_.offers, static_cast<long long>(lost_),
                static_cast<long long>(std::max<int64_t>(0, expected - finished_[k])),
                static_cast<long long>(reconciled_), static_cast<long long>(reconcileWrong_),
                reconcileMs, leaderCpu, clientsCpu, load, static_cast<long long>(fenced),
                static_cast<long long>(late), round_.firstDetected, round_.firstHello,
                round_.probeHello, round_.probeAnswered, round_.firstAgentBack);
    std::fflush(stdout);
    if (!done) return fail("round " + std::to_string(k) + " did not recover within --round-timeout: " + describeWorkers());
    if (fenced > 0)
      return fail("round " + std::to_string(k) + ": " + std::to_string(fenced) +
                  " master(s) fenced themselves (lost their ZooKeeper link); logs in " + s_.workDir);
    if (reconciled_ < running || reconcileWrong_ > 0)
      return fail("round " + std::to_string(k) + ": reconciliation confirmed " +
                  std::to_string(reconciled_) + " of " + std::to_string(running) +
                  " running tasks, " + std::to_string(reconcileWrong_) + " wrong answers");
    stopMaster(masters_[leaderIndex], SIGKILL);
    masters_[leaderIndex] = spawnMaster(static_cast<int>(leaderIndex));
    runFor(std::chrono::milliseconds(500));  // it joins as a standby
    return 0;
  }

  // Lines containing `text` in every master's log (restarted masters
  // append to their predecessor's).
  int64_t countInMasterLogs(const std::string& text) const {
    int64_t n = 0;
    for (int64_t i = 0; i < s_.masters; ++i) {
      std::ifstream in(s_.workDir + "/master" + std::to_string(i) + ".log");
      for (std::string line; std::getline(in, line);) n += line.find(text) != std::string::npos;
    }
    return n;
  }

  int tellWorkers(const std::string& line) {
    std::string command = line + "\n";
    for (auto& w : workers_) {
      if (::write(w.in, command.data(), command.size()) != static_cast<ssize_t>(command.size()))
        return fail("cannot write to a worker: " + describeWorkers());
    }
    return 0;
  }

  void onLeader(const std::optional<Leader>& leader) {
    bool changed = leader && (!leader_ || leader->endpoint != leader_->endpoint);
    leader_ = leader;
    if (changed && round_.active && round_.elected < 0 && leader->endpoint.port != round_.oldPort) {
      round_.elected = (nowNs() - round_.t0Ns) / 1e6;
      startProbe(leader->endpoint);
    }
  }

  double sinceKillMs() const { return (nowNs() - round_.t0Ns) / 1e6; }

  // The new leader's first answered registration, whoever sent it; -1: none yet.
  double accepting() const {
    double first = -1;
    for (double ms : {round_.probeAnswered, round_.firstAgentBack, round_.firstFrameworkBack}) {
      if (ms >= 0 && (first < 0 || ms < first)) first = ms;
    }
    return first;
  }

  // One line per worker for this round (--worker-csv).
  void writeWorkerLines() {
    if (s_.workerCsv.empty()) return;
    bool fresh = !std::filesystem::exists(s_.workerCsv);
    std::ofstream out(s_.workerCsv, std::ios::app);
    if (fresh) {
      out << "agents,signal,kill,worker,first_lost_ms,detected_ms,lost_by_detected,cpu_to_detected_ms,"
             "wait_to_detected_ms,told_all_ms,lost_by_told_all,cpu_to_told_all_ms,wait_to_told_all_ms,first_hello_ms,lost_by_hello,cpu_to_hello_ms,wait_to_hello_ms,"
             "first_agent_back_ms,lost_by_agent_back,cpu_to_agent_back_ms,wait_to_agent_back_ms\n";
    }
    char line[512];
    for (size_t i = 0; i < workers_.size(); ++i) {
      const WorkerRound& r = workers_[i].round;
      auto point = [](const WorkerRound::Point& p) {
        char text[128];
        std::snprintf(text, sizeof text, "%.1f,%lld,%.1f,%.1f", p.ms, static_cast<long long>(p.lost), p.cpuMs,
                      p.waitMs);
        return std::string(text);
      };
      std::snprintf(line, sizeof line, "%lld,%s,%d,%zu,%.1f,%s,%s,%s,%s\n", static_cast<long long>(s_.agents),
                    s_.signal.c_str(), round_.k, i, r.firstLost, point(r.detected).c_str(),
                    point(r.toldAll).c_str(), point(r.hello).c_str(), point(r.agentBack).c_str());
      out << line;
    }
  }

  // Connects to the new leader at once (no detector hop, no jitter) and
  // registers a throwaway framework: how soon the leader itself serves a
  // newcomer, apart from when the emulated clients arrive.
  void startProbe(const Endpoint& leader) {
    int k = round_.k;
    asyncConnect(io_, leader.host, leader.port, [this, k](Result<asio::ip::tcp::socket> s) {
      if (!s || !round_.active || round_.k != k) return;
      boost::system::error_code ignored;
      s->set_option(asio::ip::tcp::no_delay(true), ignored);
      Connection::Options o;
      o.localRole = wire::ROLE_SCHEDULER;
      o.localName = "failover-bench-probe";
      o.acceptRoles = {wire::ROLE_MASTER};
      probe_ = Connection::create(std::move(*s), o);
      Connection* conn = probe_.get();
      Connection::Handlers h;
      h.onHello = [this, k, conn](const wire::Hello&) {
        if (round_.k != k) return;
        round_.probeHello = sinceKillMs();
        wire::Envelope e;
        auto* r = e.mutable_register_framework();
        r->mutable_info()->set_name("failover-bench-probe-" + std::to_string(k));
        r->set_needs_offers(false);
        (void)conn->send(e);
      };
      h.onMessage = [this, k, conn](wire::Envelope& e) {
        if (round_.k != k || !e.has_framework_registered() || round_.probeAnswered >= 0) return;
        round_.probeAnswered = sinceKillMs();
        wire::Envelope bye;
        bye.mutable_unregister_framework()->set_framework_id(e.framework_registered().framework_id());
        (void)conn->send(bye);
      };
      h.onClose = [](const std::string&) {};
      probe_->start(std::move(h));
    });
  }

  // ---------------------------------------------------------------- loop
  bool waitFor(const std::function<bool()>& done, double seconds) {
    auto deadline = SteadyClock::now() + secondsToDuration(seconds);
    while (!done() && SteadyClock::now() < deadline) {
      io_.restart();
      io_.run_for(std::chrono::milliseconds(5));
    }
    return done();
  }
  void runFor(Duration d) { waitFor([] { return false; }, std::chrono::duration<double>(d).count()); }

  struct Round {
    bool active = false;
    int k = 0;
    uint16_t oldPort = 0;
    int64_t t0Ns = 0;
    double elected = -1, detected = -1, accepting = -1, agents = -1, frameworks = -1, offers = -1;
    double firstDetected = -1, firstHello = -1, probeHello = -1, probeAnswered = -1;
    double firstAgentBack = -1, firstFrameworkBack = -1;
  };

  asio::io_context& io_;
  Settings s_;
  std::vector<MasterProc> masters_;
  std::vector<WorkerProc> workers_;
  std::unique_ptr<LeaderDetector> detector_;
  std::shared_ptr<Connection> probe_;
  std::optional<Leader> leader_;
  int64_t lost_ = 0;
  int64_t reconciled_ = 0;      // running tasks confirmed in this round's reconciliation
  int64_t reconcileWrong_ = 0;  // answers, over the run, that were not the true state
  std::map<int64_t, int64_t> finished_;  // round -> terminal updates its frameworks received
  Round round_;
};

}  // namespace

int main(int argc, char** argv) {
  setLogProgram("failover_bench");
  Settings s;
  Flags flags("failover_bench", "Paper experiment 6.6: master failover through ZooKeeper.");
  flags.addString("zk", &s.zk, "zk://host:port/path of the masters' group");
  flags.addString("master-binary", &s.masterBinary, "path of allot-master");
  flags.addString("work-dir", &s.workDir, "directory for the masters' and workers' logs and port files");
  flags.addInt("masters", &s.masters, "masters to run");
  flags.addInt("agents", &s.agents, "emulated agents");
  flags.addInt("frameworks", &s.frameworks, "emulated frameworks (framework 0 is the offer probe)");
  flags.addInt("kills", &s.kills, "leader kills");
  flags.addString("signal", &s.signal, "kill (SIGKILL) or term (SIGTERM)");
  flags.addDouble("zk-session-timeout", &s.sessionTimeoutS, "the masters' --zk-session-timeout");
  flags.addString("master-flags", &s.masterFlags,
                  "more flags for every allot-master, space-separated (e.g. \"--zk-client-priority 0\")");
  flags.addInt("peers-per-worker", &s.peersPerWorker, "agents + frameworks per worker process");
  flags.addDouble("round-timeout", &s.roundTimeoutS, "give up on a round after this many seconds");
  flags.addDouble("status-retry", &s.statusRetryS,
                  "emulated agents resend unacknowledged updates this often (the agent's default)");
  flags.addInt("fanout-chunk", &s.fanoutChunk,
               "a worker tells this many of its links of a new leader in each of the first "
               "--fanout-equal-passes loop handlers, then twice as many in each next one, one handler "
               "per pass of the loop (0: all in one handler)");
  flags.addInt("fanout-equal-passes", &s.fanoutEqualPasses,
               "handlers of --fanout-chunk links each before the chunks double (a large value: "
               "equal chunks throughout, as at 1b71289)");
  flags.addString("worker-csv", &s.workerCsv,
                  "append one line per worker per kill to this CSV file: where each worker's time "
                  "went (first link lost, detector, first handshake, first agent answered, and its "
                  "loop thread's CPU time and run-queue wait from the kill to each)");
  flags.addInt("worker-index", &s.workerIndex, "internal: run as this worker");
  flags.addInt("workers", &s.workers, "internal: the number of workers");
  if (int rc = handleFlags(flags, argc, argv); rc >= 0) return rc;
  if (s.fanoutChunk < 0 || s.fanoutEqualPasses < 1) {
    std::cerr << "failover_bench: --fanout-chunk must be >= 0 (0: all links in one handler) and "
                 "--fanout-equal-passes >= 1\n";
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);
  rlimit limit{};
  getrlimit(RLIMIT_NOFILE, &limit);
  limit.rlim_cur = limit.rlim_max;
  setrlimit(RLIMIT_NOFILE, &limit);
  if (s.workerIndex >= 0) {
    setLogLevel(LogLevel::kError);  // a warning per link per failover drowns the log
    WorkerSettings w{s.zk, s.workerIndex, s.workers, s.agents, s.frameworks, s.kills, s.statusRetryS};
    w.fanoutChunk = s.fanoutChunk;
    w.fanoutEqualPasses = s.fanoutEqualPasses;
    return runWorker(w);
  }
  if (s.zk.empty() || s.masterBinary.empty() || s.masters < 2 || s.agents < 1 || s.frameworks < 2 ||
      s.kills < 1 || s.frameworks * 0.1 * (s.kills + 1) > s.agents * 2 ||
      (s.signal != "kill" && s.signal != "term") || s.peersPerWorker < 100 || s.fanoutChunk < 0) {
    std::cerr << "failover_bench: need --zk, --master-binary, --masters >= 2, --frameworks >= 2, "
                 "--kills >= 1, --signal kill|term, --peers-per-worker >= 100, --fanout-chunk >= 0 and room for every task\n";
    return 2;
  }
  asio::io_context io(1);
  Bench bench(io, s);
  return bench.run();
}
