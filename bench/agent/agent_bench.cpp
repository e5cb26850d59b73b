// agent_bench: the agent's footprint and launch latency (docs/benchmarks.md,
// "## Agent"). Plays the master on loopback for one real allot-agent:
//   1. idle: RSS and CPU of the registered agent over --window seconds;
//   2. launch latency: --launches RunTasks one after another, each timed
//      from RunTask sent to the task's RUNNING update received (fork + exec
//      confirmed by allot-executor), p50/p99; the first launch (which also
//      starts the executor) is reported apart;
//   3. busy: RSS and CPU with --running tasks (sleep) running, then killed;
//   4. the agent's loop stalls (allot_agent_loop_lateness_seconds from its
//      /metrics): the longest lateness since it started, and how many stall
//      meter ticks ran 10 ms late or more during the launches and kills.
// With --tls-dir DIR (made by scripts/allot-certs) the link is mutual TLS:
// the fake master presents DIR/master.crt, the agent DIR/agent.crt (its
// /metrics is then HTTPS, read with the master certificate).
// With --isolation LIST (root) the agent isolates its executors (cgroups
// root allot-bench-<pid>, removed at the end); with --executor-per-task each
// task is its own framework's, so every launch makes a container and every
// task's end reaps one (executors idle 0.1 s exit): the agent's heaviest
// path, for the loop-stall target.
// With --pin-bench / --pin-agent / --pin-executor CPU the bench, the agent
// (all its threads) and the command executor (with the tasks it forks) run
// on that CPU only (-1: wherever the kernel puts them); the plain launch p50
// depends on where the three run on a 2-CPU machine (docs/benchmarks.md);
// unpinned, the launches are also reported by where the three last ran.
// Usage: agent_bench --agent PATH [--launches 1000] [--running 100] [--window 10]
//                    [--tls-dir DIR] [--isolation LIST] [--executor-per-task]
//                    [--pin-bench CPU] [--pin-agent CPU] [--pin-executor CPU]
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <vector>

#include "base/asio.h"
#include "diag/cpu_steal.h"
#include "base/flags.h"
#include "http/client.h"
#include "proto/connection.h"
#include "proto/tls.h"
#include "bench/stats.h"

namespace {

using namespace allot;
using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

struct Sample {
  double rssMib = 0;
  double cpuSeconds = 0;
};

Sample sample(pid_t pid) {
  Sample s;
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string key;
  while (status >> key) {
    if (key == "VmRSS:") {
      double kib;
      status >> kib;
      s.rssMib = kib / 1024;
      break;
    }
  }
  std::ifstream statFile("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  std::getline(statFile, stat);
  std::istringstream f(stat.substr(stat.rfind(')') + 2));
  std::string field;
  for (int i = 3; i < 14; ++i) f >> field;
  double utime = 0, stime = 0;
  f >> utime >> stime;
  s.cpuSeconds = (utime + stime) / sysconf(_SC_CLK_TCK);
  return s;
}

class FakeMaster {
 public:
  FakeMaster(asio::io_context& io, std::shared_ptr<ssl::context> tls)
      : io_(io), acceptor_(io) {
    asio::ip::tcp::endpoint ep(asio::ip::make_address("127.0.0.1"), 0);
    acceptor_.open(ep.protocol());
    acceptor_.bind(ep);
    acceptor_.listen();
    acceptor_.async_accept([this, tls](const boost::system::error_code& ec, asio::ip::tcp::socket s) {
      if (ec) return;
      Connection::Options o;
      o.localRole = wire::ROLE_MASTER;
      o.acceptRoles = {wire::ROLE_AGENT};
      o.tls = tls;
      o.tlsSide = TlsSide::kServer;
      conn_ = Connection::create(std::move(s), o);
      Connection::Handlers h;
      h.onMessage = [this](wire::Envelope& e) { onMessage(e); };
      conn_->start(std::move(h));
    });
  }
  uint16_t port() const { return acceptor_.local_endpoint().port(); }

  void onMessage(wire::Envelope& e) {
    if (e.has_register_agent()) {
      wire::Envelope r;
      r.mutable_agent_registered()->set_agent_id("bench-agent");
      r.mutable_agent_registered()->set_master_id("bench-master");
      r.mutable_agent_registered()->set_heartbeat_interval_s(5);
      (void)conn_->send(r);
      registered = true;
    } else if (e.has_heartbeat()) {
      wire::Envelope a;
      a.mutable_heartbeat_ack()->set_sequence(e.heartbeat().sequence());
      (void)conn_->send(a);
    } else if (e.has_status_update()) {
      const auto& s = e.status_update().status();
      states[s.task_id()] = s.state();
      if (s.state() == wire::TASK_RUNNING && !runningAt.count(s.task_id())) runningAt[s.task_id()] = Clock::now();
      wire::Envelope a;
      a.mutable_status_acknowledgement()->set_framework_id(s.framework_id());
      a.mutable_status_acknowledgement()->set_task_id(s.task_id());
      a.mutable_status_acknowledgement()->set_update_id(s.update_id());
      (void)conn_->send(a);
    }
  }

  // With executorPerTask every task is its own framework's, so it gets its
  // own command executor (and container: cgroups made and removed).
  void run(const std::string& id, const std::string& shell) {
    wire::Envelope e;
    e.mutable_run_task()->mutable_framework()->set_id(frameworkOf(id));
    e.mutable_run_task()->mutable_framework()->set_name("agent_bench");
    auto* t = e.mutable_run_task()->mutable_task();
    t->set_task_id(id);
    t->mutable_command()->set_shell(shell);
    sentAt[id] = Clock::now();
    (void)conn_->send(e);
  }

  void kill(const std::string& id) {
    wire::Envelope e;
    e.mutable_kill_task()->set_framework_id(frameworkOf(id));
    e.mutable_kill_task()->set_task_id(id);
    e.mutable_kill_task()->set_grace_s(1);
    (void)conn_->send(e);
  }

  std::string frameworkOf(const std::string& taskId) const {
    return executorPerTask ? "bench-fw-" + taskId : "bench-fw";
  }

  // Ends every framework the bench ran tasks for: their executors go.
  void shutdownFrameworks() {
    std::set<std::string> frameworks;
    for (const auto& [id, state] : states) frameworks.insert(frameworkOf(id));
    for (const auto& f : frameworks) {
      wire::Envelope e;
      e.mutable_shutdown_framework()->set_framework_id(f);
      (void)conn_->send(e);
    }
  }

  bool executorPerTask = false;
  bool registered = false;
  std::map<std::string, wire::TaskState> states;
  std::map<std::string, Clock::time_point> sentAt, runningAt;

 private:
  asio::io_context& io_;
  asio::ip::tcp::acceptor acceptor_;
  std::shared_ptr<Connection> conn_;
};

bool runUntil(asio::io_context& io, const std::function<bool()>& done, std::chrono::milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  while (!done() && Clock::now() < deadline) {
    io.restart();
    io.run_for(std::chrono::milliseconds(5));
  }
  return done();
}

Sample window(asio::io_context& io, pid_t pid, double seconds, double* cpuPercent) {
  Sample a = sample(pid);
  runUntil(io, [] { return false; }, std::chrono::milliseconds(static_cast<int>(seconds * 1000)));
  Sample b = sample(pid);
  *cpuPercent = 100 * (b.cpuSeconds - a.cpuSeconds) / seconds;
  return b;
}

// GET /metrics from the agent's HTTP port: the text exposition.
std::string scrape(uint16_t port, const http::ClientTls& tls) {
  if (tls.context) {
    auto r = http::fetch({"127.0.0.1", port}, "GET", "/metrics", "", std::chrono::seconds(10), tls);
    return r && r->status == 200 ? "\n" + r->body : "";
  }
  asio::ip::tcp::iostream s("127.0.0.1", std::to_string(port));
  if (!s) return "";
  s << "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n" << std::flush;
  std::ostringstream body;
  body << s.rdbuf();
  return body.str();
}

// The value of the sample line starting with `name` (with its labels).
double metric(const std::string& text, const std::string& name) {
  auto at = text.find("\n" + name + " ");
  if (at == std::string::npos) return -1;
  return std::strtod(text.c_str() + at + name.size() + 2, nullptr);
}

struct LoopStalls {
  double ticks = 0, under10ms = 0;
};

LoopStalls loopStalls(const std::string& text) {
  return {metric(text, "allot_agent_loop_lateness_seconds_count"),
          metric(text, "allot_agent_loop_lateness_seconds_bucket{le=\"0.01\"}")};
}

uint16_t readPort(const std::string& file) {
  std::ifstream in(file);
  unsigned port = 0;
  in >> port;
  return static_cast<uint16_t>(port);
}

std::string loadAverage() {
  std::ifstream in("/proc/loadavg");
  std::string one;
  in >> one;
  return one;
}

// The allot-executor processes running in the bench's work dir.
std::vector<pid_t> executorPids(const std::string& dir) {
  std::vector<pid_t> out;
  for (const auto& e : fs::directory_iterator("/proc")) {
    std::error_code ec;
    auto cwd = fs::read_symlink(e.path() / "cwd", ec);
    if (ec || cwd.string().rfind(dir, 0) != 0) continue;
    std::ifstream comm(e.path() / "comm");
    std::string name;
    comm >> name;
    if (name == "allot-executor") out.push_back(std::stoi(e.path().filename()));
  }
  return out;
}

// Runs every thread of `pid` (0: this process) on `cpu` only, or on every
// online CPU when cpu is -1. False when the kernel refuses.
bool pin(pid_t pid, int64_t cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  for (long c = 0; c < cpus; ++c) {
    if (cpu < 0 || c == cpu) CPU_SET(static_cast<int>(c), &set);
  }
  if (pid == 0) return sched_setaffinity(0, sizeof set, &set) == 0;
  bool ok = true;
  std::error_code ec;
  for (const auto& t : fs::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
    ok = sched_setaffinity(std::stoi(t.path().filename()), sizeof set, &set) == 0 && ok;
  }
  return ok && !ec;
}

std::string placement(int64_t cpu) { return cpu < 0 ? "any" : "cpu " + std::to_string(cpu); }

// The CPU thread `pid` last ran on (/proc/<pid>/stat field 39), -1 unknown.
int lastCpu(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto close = text.rfind(')');  // the command name may hold spaces
  if (close == std::string::npos) return -1;
  std::istringstream rest(text.substr(close + 2));
  std::string field;
  for (int i = 3; i <= 39 && rest >> field; ++i) {
    if (i == 39) return std::atoi(field.c_str());
  }
  return -1;
}

// What the agent left of its cgroups root (executors killed by the bench
// after the agent stopped): deepest directories first, in every hierarchy.
void removeCgroupRoot(const std::string& root) {
  std::vector<fs::path> dirs;
  for (const auto& h : fs::directory_iterator("/sys/fs/cgroup")) {
    fs::path top = h.path() / root;
    std::error_code ec;
    if (!fs::is_directory(top, ec)) continue;
    for (const auto& d : fs::recursive_directory_iterator(top, ec)) {
      if (d.is_directory(ec)) dirs.push_back(d.path());
    }
    dirs.push_back(top);
  }
  std::sort(dirs.begin(), dirs.end(), [](const fs::path& a, const fs::path& b) {
    return a.string().size() > b.string().size();
  });
  for (const auto& d : dirs) {
    for (int attempt = 0; attempt < 100 && ::rmdir(d.c_str()) != 0 && errno == EBUSY; ++attempt) usleep(10000);
  }
}

using bench::percentile;

// The launch path's loop sections since the agent started (launches, the
// sleepers and their kills): runs, runs past 5 ms and the longest, from the
// agent's allot_agent_loop_section_* metrics (agent/metrics.h).
void printLaunchSections(const std::string& metrics) {
  const std::string countPrefix = "\nallot_agent_loop_section_seconds_count{section=\"";
  bool header = false;
  for (size_t at = metrics.find(countPrefix); at != std::string::npos; at = metrics.find(countPrefix, at + 1)) {
    size_t nameAt = at + countPrefix.size();
    std::string section = metrics.substr(nameAt, metrics.find('"', nameAt) - nameAt);
    bool launchPath = false;
    for (const char* prefix : {"launcher start", "launch", "prepare ", "isolate ", "reaped", "cleanup ", "executor exit"}) {
      launchPath = launchPath || section.rfind(prefix, 0) == 0;
    }
    if (!launchPath) continue;
    std::string label = "{section=\"" + section + "\"";
    double runs = metric(metrics, "allot_agent_loop_section_seconds_count" + label + "}");
    double upTo5 = metric(metrics, "allot_agent_loop_section_seconds_bucket" + label + ",le=\"0.005\"}");
    double longest = metric(metrics, "allot_agent_loop_section_longest_seconds" + label + "}");
    if (!header) {
      std::printf("\n| loop section (since the agent started) | runs | > 5 ms | longest |\n|---|---|---|---|\n");
      header = true;
    }
    std::printf("| %s | %.0f | %.0f | %.2f ms |\n", section.c_str(), runs, runs - upTo5, 1000 * longest);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string agent;
  int64_t launches = 1000, running = 100;
  double windowS = 10;
  std::string command = "true";
  std::string base = "/tmp";
  Flags flags("agent_bench", "Agent footprint and launch latency against a fake master.");
  flags.addString("agent", &agent, "path of allot-agent (required)");
  flags.addInt("launches", &launches, "sequential launches to time");
  flags.addInt("running", &running, "tasks kept running for the busy footprint");
  flags.addDouble("window", &windowS, "seconds per CPU/RSS window");
  flags.addString("command", &command, "shell command of each timed launch");
  flags.addString("dir", &base, "parent of the agent's temporary work dir (its file system matters)");
  std::string isolation;
  flags.addString("isolation", &isolation,
                  "the agent's --isolation (as root; its cgroups root is allot-bench-<pid>)");
  bool executorPerTask = false;
  flags.addBool("executor-per-task", &executorPerTask,
                "every task in its own executor (a container made and reaped per launch; executors "
                "idle 0.1 s exit)");
  std::string tlsDir;
  flags.addString("tls-dir", &tlsDir,
                  "mutual TLS with the certificates scripts/allot-certs wrote into DIR");
  int64_t pinBench = -1, pinAgent = -1, pinExecutor = -1;
  flags.addInt("pin-bench", &pinBench, "run the bench (the fake master) on this CPU only (-1: any)");
  flags.addInt("pin-agent", &pinAgent, "run the agent on this CPU only (-1: any)");
  flags.addInt("pin-executor", &pinExecutor,
               "run the command executor and its tasks on this CPU only (-1: any)");
  if (int rc = handleFlags(flags, argc, argv); rc >= 0) return rc;
  long onlineCpus = sysconf(_SC_NPROCESSORS_ONLN);
  for (int64_t cpu : {pinBench, pinAgent, pinExecutor}) {
    if (cpu < -1 || cpu >= onlineCpus) {
      std::fprintf(stderr, "agent_bench: --pin-*: %lld is not -1 or an online CPU (0..%ld)\n",
                   static_cast<long long>(cpu), onlineCpus - 1);
      return 2;
    }
  }
  if (pinBench >= 0 && !pin(0, pinBench)) {
    std::perror("agent_bench: --pin-bench");
    return 1;
  }
  if (agent.empty()) {
    std::fprintf(stderr, "agent_bench: --agent PATH is required\n");
    return 2;
  }
  std::shared_ptr<ssl::context> tls;
  if (!tlsDir.empty()) {
    auto ctx = makeTlsContext({tlsDir + "/master.crt", tlsDir + "/master.key", tlsDir + "/ca.crt"},
                              TlsSide::kServer);
    if (!ctx) {
      std::fprintf(stderr, "agent_bench: --tls-dir: %s\n", ctx.error().describe().c_str());
      return 2;
    }
    tls = *ctx;
  }
  asio::io_context io;
  FakeMaster master(io, tls);
  master.executorPerTask = executorPerTask;
  http::ClientTls metricsTls;
  if (tls) {
    auto ctx = makeTlsContext({tlsDir + "/master.crt", tlsDir + "/master.key", tlsDir + "/ca.crt"},
                              TlsSide::kClient);
    if (!ctx) {
      std::fprintf(stderr, "agent_bench: --tls-dir: %s\n", ctx.error().describe().c_str());
      return 2;
    }
    metricsTls = {*ctx, "agent"};
  }
  std::string tmpl = base + "/allot-agent-bench-XXXXXX";
  if (!mkdtemp(tmpl.data())) {
    std::perror(("agent_bench: mkdtemp in " + base).c_str());
    return 1;
  }
  std::string dir = tmpl;
  chmod(dir.c_str(), 0711);  // executors run as the agent's --default-user (nobody)
  pid_t pid = fork();
  if (pid == 0) {
    freopen((dir + "/agent.log").c_str(), "w", stderr);
    // The bench's own pin is not the agent's: any CPU unless --pin-agent.
    if (!pin(0, pinAgent)) _exit(126);
    std::string m = "127.0.0.1:" + std::to_string(master.port());
    std::vector<std::string> args = {agent, "--master", m, "--work-dir", dir + "/work",
                                     "--resources", "cpus:64;mem:65536;disk:1024",
                                     "--recovery-timeout", "10", "--executor-idle-timeout",
                                     executorPerTask ? "0.1" : "30",
                                     "--http-listen", "127.0.0.1:0", "--http-port-file",
                                     dir + "/http.port"};
    if (!isolation.empty()) {
      args.insert(args.end(), {"--isolation", isolation, "--cgroups-root",
                               "allot-bench-" + std::to_string(getppid())});
    }
    if (tls) {
      args.insert(args.end(), {"--tls-cert", tlsDir + "/agent.crt", "--tls-key",
                               tlsDir + "/agent.key", "--tls-ca", tlsDir + "/ca.crt"});
    }
    std::vector<char*> argv2;
    for (auto& a : args) argv2.push_back(a.data());
    argv2.push_back(nullptr);
    execv(agent.c_str(), argv2.data());
    _exit(127);
  }
  // For attribution (bench/agent/loop_sampler.py --pid N).
  std::fprintf(stderr, "agent_bench: allot-agent pid %d, log %s/agent.log\n", static_cast<int>(pid), dir.c_str());
  int rc = 0;
  auto fail = [&](const char* what) {
    std::fprintf(stderr, "agent_bench: %s (agent log in %s/agent.log)\n", what, dir.c_str());
    rc = 1;
  };
  if (!runUntil(io, [&] { return master.registered; }, std::chrono::seconds(15))) {
    fail("agent did not register");
  }
  double idleCpu = 0, busyCpu = 0;
  Sample idle, busy;
  std::vector<double> latenciesMs;
  double firstMs = 0;
  double agentCpuStart = 0, executorCpuStart = 0, agentCpuPerLaunchMs = 0, executorCpuPerLaunchMs = 0;
  pid_t executorPid = 0;
  std::map<std::string, std::vector<double>> byPlacementMs;  // "bench / agent / executor" CPUs
  std::string loadBefore, loadAfter;
  uint16_t httpPort = 0;
  LoopStalls stallsBefore, stallsAfter;
  // The machine's steal per CPU over the launches and kills (the host's: a
  // virtual machine's vCPUs not run), beside the agent's own account.
  CpuSteal stealReader;
  CpuSteal::Sample stealBefore, stealAfter;
  bool stealKnown = false;
  std::string metricsAfter;
  if (rc == 0) {
    runUntil(io, [] { return false; }, std::chrono::seconds(1));
    idle = window(io, pid, windowS, &idleCpu);
    httpPort = readPort(dir + "/http.port");
    stallsBefore = loopStalls(scrape(httpPort, metricsTls));
    stealKnown = stealReader.read(stealBefore).ok();
    loadBefore = loadAverage();
    for (int64_t i = 0; i < launches && rc == 0; ++i) {
      if (i == 1 && executorPerTask) agentCpuStart = sample(pid).cpuSeconds;
      if (i == 1 && !executorPerTask) {
        agentCpuStart = sample(pid).cpuSeconds;
        auto ex = executorPids(dir);
        executorPid = ex.empty() ? 0 : ex[0];
        if (executorPid) executorCpuStart = sample(executorPid).cpuSeconds;
      }
      // The executor the first launch started inherited the agent's CPUs.
      if (i == 1 && !executorPerTask && (pinAgent >= 0 || pinExecutor >= 0)) {
        auto ex = executorPids(dir);
        if (ex.empty() || !pin(ex[0], pinExecutor)) fail("could not pin the command executor");
      }
      std::string id = "launch-" + std::to_string(i);
      master.run(id, command);
      if (!runUntil(io, [&] { return master.runningAt.count(id) > 0; }, std::chrono::seconds(30))) {
        fail("a task did not reach RUNNING within 30 s");
        break;
      }
      double ms = std::chrono::duration<double, std::milli>(master.runningAt[id] - master.sentAt[id]).count();
      if (i == 0) {
        firstMs = ms;
      } else {
        latenciesMs.push_back(ms);
        // Where the three ran last, once RUNNING is in (outside the timing).
        if (!executorPerTask && executorPid) {
          std::string where = std::to_string(sched_getcpu()) + " / " + std::to_string(lastCpu(pid)) + " / " +
                              std::to_string(lastCpu(executorPid));
          byPlacementMs[where].push_back(ms);
        }
      }
    }
    agentCpuPerLaunchMs = 1000 * (sample(pid).cpuSeconds - agentCpuStart) / std::max<size_t>(1, latenciesMs.size());
    if (executorPid) {
      executorCpuPerLaunchMs =
          1000 * (sample(executorPid).cpuSeconds - executorCpuStart) / std::max<size_t>(1, latenciesMs.size());
    }
    loadAfter = loadAverage();
  }
  if (rc == 0) {
    for (int64_t i = 0; i < running; ++i) master.run("sleeper-" + std::to_string(i), "sleep 600");
    bool allRunning = runUntil(io, [&] {
      for (int64_t i = 0; i < running; ++i) {
        if (!master.runningAt.count("sleeper-" + std::to_string(i))) return false;
      }
      return true;
    }, std::chrono::seconds(60));
    if (!allRunning) fail("not every sleeper reached RUNNING");
    runUntil(io, [] { return false; }, std::chrono::seconds(1));
    busy = window(io, pid, windowS, &busyCpu);
    for (int64_t i = 0; i < running; ++i) master.kill("sleeper-" + std::to_string(i));
    runUntil(io, [&] {
      for (int64_t i = 0; i < running; ++i) {
        auto s = master.states["sleeper-" + std::to_string(i)];
        if (s != wire::TASK_KILLED) return false;
      }
      return true;
    }, std::chrono::seconds(30));
    metricsAfter = scrape(httpPort, metricsTls);
    stallsAfter = loopStalls(metricsAfter);
    stealKnown = stealKnown && stealReader.read(stealAfter).ok();
  }
  // An agent that stops with executors left keeps its cgroup root for its
  // successor; with none left it removes the root. The bench has no
  // successor: its frameworks end, and the agent reaps every executor
  // (allot_agent_executors 0) before it is stopped.
  if (httpPort != 0) {
    master.shutdownFrameworks();
    for (int i = 0; i < 100; ++i) {
      runUntil(io, [] { return false; }, std::chrono::milliseconds(200));
      if (metric(scrape(httpPort, metricsTls), "allot_agent_executors") == 0) break;
    }
  }
  kill(pid, SIGTERM);
  waitpid(pid, nullptr, 0);
  // Leftover executors (the agent leaves them for its successor) go too.
  for (const auto& e : fs::directory_iterator("/proc")) {
    std::error_code ec;
    auto cwd = fs::read_symlink(e.path() / "cwd", ec);
    if (!ec && cwd.string().rfind(dir, 0) == 0) ::kill(std::stoi(e.path().filename()), SIGKILL);
  }
  if (!isolation.empty()) removeCgroupRoot("allot-bench-" + std::to_string(getpid()));
  if (rc != 0) return rc;
  // The agent's own account of its late ticks (how much of each was a wait
  // for a CPU): its loop lines, before the log goes.
  std::ifstream agentLog(dir + "/agent.log");
  for (std::string line; std::getline(agentLog, line);) {
    if (line.find("loop") != std::string::npos && line.find("late") != std::string::npos) {
      std::fprintf(stderr, "agent log: %s\n", line.c_str());
    }
  }
  fs::remove_all(dir);
  double p50 = percentile(latenciesMs, 0.5), p99 = percentile(latenciesMs, 0.99);
  std::printf("| measure | allot-agent | target | kubelet anchor |\n|---|---|---|---|\n");
  std::printf("| RSS idle | %.1f MiB | < 20 MiB | 200 MiB limit |\n", idle.rssMib);
  std::printf("| CPU idle | %.2f %% of a core | < 1 %% | 10 %% (0.1 core) |\n", idleCpu);
  std::printf("| RSS, %lld tasks running | %.1f MiB | < 20 MiB | |\n", static_cast<long long>(running), busy.rssMib);
  std::printf("| CPU, %lld tasks running | %.2f %% of a core | < 1 %% | |\n", static_cast<long long>(running), busyCpu);
  std::printf("| launch latency p50 (n=%zu) | %.2f ms | < 2 ms | |\n", latenciesMs.size(), p50);
  std::printf("| launch latency p99 | %.2f ms | | |\n", p99);
  std::printf("| first launch (starts the executor) | %.2f ms | | |\n", firstMs);
  std::printf("| CPU per launch: agent / allot-executor | %.3f / %.3f ms | | |\n", agentCpuPerLaunchMs,
              executorCpuPerLaunchMs);
  double phaseTicks = stallsAfter.ticks - stallsBefore.ticks;
  double phaseLate = phaseTicks - (stallsAfter.under10ms - stallsBefore.under10ms);
  double maxLateMs = 1000 * metric(metricsAfter, "allot_agent_loop_lateness_max_seconds");
  std::printf("| loop stall meter ticks >= 10 ms late, launches + kills | %.0f of %.0f | 0 | |\n", phaseLate,
              phaseTicks);
  std::printf("| loop lateness, longest since the agent started | %.2f ms | < 10 ms | |\n", maxLateMs);
  std::printf("| the same less the host's steal on the loop's CPU | %.2f ms | | |\n",
              1000 * metric(metricsAfter, "allot_agent_loop_lateness_less_steal_max_seconds"));
  std::printf("| host steal within late ticks, since the agent started | %.1f ms | | |\n",
              1000 * metric(metricsAfter, "allot_agent_loop_late_steal_seconds_total"));
  std::string stealPerCpu;
  for (size_t cpu = 0; stealKnown && cpu < stealAfter.cpus; ++cpu) {
    char one[64];
    std::snprintf(one, sizeof one, "%scpu%zu %.0f ms", cpu ? ", " : "", cpu,
                  stealAfter.stealMsSince(stealBefore, static_cast<int>(cpu)));
    stealPerCpu += one;
  }
  std::printf("| machine's steal per CPU, launches + kills (/proc/stat) | %s | | |\n",
              stealKnown ? stealPerCpu.c_str() : "unknown");
  std::printf("| link to the master | %s | | |\n", tls ? "mutual TLS 1.3" : "plaintext");
  std::printf("| placement: bench / agent / executor | %s / %s / %s | | |\n", placement(pinBench).c_str(),
              placement(pinAgent).c_str(), placement(pinExecutor).c_str());
  std::printf("| isolation | %s%s | | |\n", isolation.empty() ? "none" : isolation.c_str(),
              executorPerTask ? ", an executor per task" : ", one command executor");
  if (!byPlacementMs.empty()) {
    // The plain launch p50 is bimodal on a 2-CPU machine: by where the bench,
    // the agent's loop and the executor last ran when RUNNING came in.
    std::printf("\n| last CPU at RUNNING: bench / agent / executor | launches | p50 | p99 |\n|---|---|---|---|\n");
    for (auto& [where, ms] : byPlacementMs) {
      std::printf("| %s | %zu | %.2f ms | %.2f ms |\n", where.c_str(), ms.size(), percentile(ms, 0.5),
                  percentile(ms, 0.99));
    }
  }
  printLaunchSections(metricsAfter);
  std::printf("\nload average (1 min) %s before the launches, %s after, on %ld CPUs\n", loadBefore.c_str(),
              loadAfter.c_str(), sysconf(_SC_NPROCESSORS_ONLN));
  bool met = idle.rssMib < 20 && idleCpu < 1 && busy.rssMib < 20 && busyCpu < 1 && p50 < 2 && phaseTicks > 0 &&
             phaseLate == 0;
  std::printf("\ntargets %s\n", met ? "met" : "NOT met");
  return 0;
}
