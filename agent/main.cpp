// allot-agent: one per node. Detects the node's resources, registers with
// the master, launches and supervises executors, reports their tasks
// reliably and re-attaches to them after its own restart.
//
// Exit codes: 0 stopped by SIGTERM/SIGINT (executors keep running and are
// re-attached by the next agent), 1 a start-up failure, 2 bad flags.
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/statfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <functional>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "agent/agent.h"
#include "agent/http_api.h"
#include "base/rotating_log.h"
#include "systemd/notify.h"
#include "agent/run_as.h"
#include "agent/resources_detect.h"
#include "base/files.h"
#include "base/flags.h"
#include "proto/shard_placement.h"
#include "base/log.h"
#include "base/uring_poller.h"
#include "base/worker_pool.h"
#include "ha/detector_factory.h"
#include "ha/zk_session.h"
#include "proto/tls.h"
#include "launcher/launcher.h"
#ifdef ALLOT_HAVE_ISOLATORS
#include "agent/image_service.h"
#include "isolators/isolator_table.h"
#endif

namespace {

using namespace allot;

struct Settings {
  std::string master;
  std::string zk;
  std::string shards;
  TlsFiles tls;
  std::string resources;
  std::string isolation = "seccomp";
  std::string workDir = "/var/lib/allot-agent";
  std::string attributes;
  std::string hostname;
  std::string executorPath;
  int64_t sandboxMaxAgeS = 7 * 24 * 3600;
  double recoveryTimeoutS = 900;
  double statusRetryS = 10;
  double usageIntervalS = 10;
  double executorIdleS = 1;
  double registerTimeoutS = 30;
  std::string httpListen;
  std::string httpPortFile;
  bool insecure = false;
  std::string defaultUser = "nobody";
  std::string taskLogMax = "10MiB";
  int64_t taskLogFiles = 5;
#ifdef ALLOT_HAVE_ISOLATORS
  IsolatorOptions isolatorOptions;
  std::string imageCacheMax = "10GiB";
  std::string registryCa;
  std::string insecureRegistries;
  std::string registryCredentials;
#endif
};

void addFlags(Flags& f, Settings* s) {
  f.addString("master", &s->master, "HOST:PORT of the master, or zk://host:port,.../path");
  f.addString("zk", &s->zk, "zk://host:port,.../path to find the leading master (= --master)");
  f.addString("shards", &s->shards,
              "HOST:PORT,... or zk://host:port,.../path (where shards announce themselves): reach the "
              "master through these link shards (allot-shard), "
              "instead of --master (with --tls-*: shards hold `shard` certificates)");
  addTlsFlags(f, &s->tls);
  f.addString("resources", &s->resources,
              "what this node offers, e.g. \"cpus:4;mem:4096;disk:10240;ports:[31000-32000]\"; "
              "cpus, mem and disk not named are detected");
  f.addString("isolation", &s->isolation,
              "comma list of isolators, e.g. seccomp,cgroups/cpu,cgroups/mem ('' for none)");
  f.addString("work-dir", &s->workDir, "sandboxes, checkpoints and the executor socket live here");
  f.addString("default-user", &s->defaultUser,
              "run-as user of executors whose framework names none (an agent that is not root runs "
              "every executor as itself)");
  f.addString("attributes", &s->attributes, "\"rack:r1;zone:a\" passed to frameworks in offers");
  f.addString("hostname", &s->hostname, "hostname reported to the master (default: gethostname)");
  f.addString("executor-path", &s->executorPath,
              "the built-in allot-executor (default: next to allot-agent)");
  f.addInt("sandbox-max-age", &s->sandboxMaxAgeS, "seconds an ended executor's sandbox is kept");
  f.addDouble("recovery-timeout", &s->recoveryTimeoutS,
              "seconds executors wait for a restarted agent (and it for them)");
  f.addString("http-listen", &s->httpListen,
              "HOST:PORT for /health, /state and /metrics (empty: none; mutual TLS with the --tls-* "
              "files; plaintext: loopback unless --insecure)");
  f.addBool("insecure", &s->insecure, "allow plaintext on a non-loopback --http-listen address");
  f.addString("http-port-file", &s->httpPortFile, "write the bound HTTP port to this file once listening");
  f.addDouble("usage-interval", &s->usageIntervalS,
              "seconds between reports of every executor's resource usage to the master");
  f.addDouble("status-update-retry", &s->statusRetryS,
              "seconds between resends of unacknowledged status updates");
  f.addDouble("executor-idle-timeout", &s->executorIdleS,
              "seconds an executor without tasks lives before it is asked to exit");
  f.addDouble("executor-register-timeout", &s->registerTimeoutS,
              "seconds a started executor has to register before it is killed");
  f.addString("task-log-max", &s->taskLogMax,
              "size at which a command task's stdout or stderr is rotated (bytes, or with KiB, MiB, GiB)");
  f.addInt("task-log-files", &s->taskLogFiles,
           "files kept of each command task's stdout and stderr, the current one included (2..100)");
#ifdef ALLOT_HAVE_ISOLATORS
  s->isolatorOptions.cgroupsRoot = "";  // defaultCgroupsRoot(work dir)
  addIsolatorFlags(f, &s->isolatorOptions);
  f.addString("image-cache-max", &s->imageCacheMax,
              "filesystem/linux: unpacked image layers kept under <work-dir>/images (bytes, or with KiB, MiB, "
              "GiB); the least recently used layers no running executor uses go first");
  f.addString("registry-ca", &s->registryCa, "filesystem/linux: PEM file of the CAs registries' HTTPS is checked "
                                             "against (default: the system's)");
  f.addString("insecure-registries", &s->insecureRegistries,
              "filesystem/linux: comma-separated registries (host or host:port) reached over plain HTTP "
              "(loopback registries always are)");
  f.addString("registry-credentials", &s->registryCredentials,
              "filesystem/linux: file of \"REGISTRY USER PASSWORD\" lines for registries that ask for "
              "credentials (Basic or bearer tokens)");
#endif
}

std::string defaultExecutorPath() {
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return "allot-executor";
  std::filesystem::path dir = std::filesystem::path(std::string(self, n)).parent_path();
  // Installed: side by side. Build tree: agent/ and cli/ are siblings.
  for (auto candidate : {dir / "allot-executor", dir.parent_path() / "cli" / "allot-executor"}) {
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return dir / "allot-executor";
}

bool positive(double v, double max) { return v > 0 && v <= max; }

// "10MiB", "512KiB", "1GiB", "65536".
Result<uint64_t> parseByteSize(const std::string& text, const std::string& flag) {
  size_t digits = 0;
  while (digits < text.size() && digits < 15 && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  std::string unit = text.substr(digits);
  uint64_t scale = unit.empty() || unit == "B" ? 1
                   : unit == "KiB" || unit == "K" ? 1024
                   : unit == "MiB" || unit == "M" ? 1024 * 1024
                   : unit == "GiB" || unit == "G" ? 1024 * 1024 * 1024
                   : 0;
  if (digits == 0 || scale == 0) return Error{flag + " " + text + ": expected a size like 10MiB"};
  return std::stoull(text.substr(0, digits)) * scale;
}

// Root switches executors to their run-as users (agent/run_as.h); they
// must then reach the work dir. Another user runs every executor as itself.
Status runAsSettings(const Settings& s, AgentConfig* c) {
  if (geteuid() != 0) {
    LOG_WARNING("not running as root: executors run as this agent's user, not as their frameworks' users");
    return okStatus();
  }
  if (s.defaultUser.empty()) return Error{"--default-user must not be empty"};
  auto user = resolveUser(s.defaultUser);
  if (!user) return Error{"--default-user: " + user.error().describe()};
  if (user->isRoot()) LOG_WARNING("--default-user " << s.defaultUser
                                          << " is root: executors run as root (confined: Docker's default "
                                             "capabilities, own PID namespace, host filesystems read-only)");
  if (auto st = checkSearchableByOthers(c->workDir); !st) return Error{"--work-dir: " + st.error().describe()};
  c->executors.defaultUser = s.defaultUser;
  return okStatus();
}

Status masterConfig(const Settings& s, AgentConfig* c) {
  if (!s.zk.empty() + !s.master.empty() + !s.shards.empty() > 1) {
    return Error{"give one of --master, --zk and --shards"};
  }
  if (isZooKeeperUrl(s.shards)) {
    if (auto url = parseZkUrl(s.shards); !url) return Error{"--shards: " + url.error().describe()};
    c->shardsZk = s.shards;
    return okStatus();
  }
  if (!s.shards.empty()) {
    auto shards = parseShardList(s.shards);
    if (!shards) return Error{"--shards: " + shards.error().describe()};
    c->shards = *shards;
    return okStatus();
  }
  c->master = s.zk.empty() ? s.master : s.zk;
  if (c->master.empty()) return Error{"--master HOST:PORT, zk://... or --shards is required"};
  if (!isZooKeeperUrl(c->master)) {
    if (auto endpoint = parseEndpoint(c->master); !endpoint) {
      return Error{"--master: " + endpoint.error().describe()};
    }
  }
  return okStatus();
}

Result<AgentConfig> makeConfig(const Settings& s) {
  AgentConfig c;
  if (Status st = masterConfig(s, &c); !st) return st.error();
  auto tls = tlsContextFromFlags(s.tls, TlsSide::kClient);
  if (!tls) return tls.error();
  c.tls = *tls;
  if (s.workDir.empty()) return Error{"--work-dir must not be empty"};
  std::error_code ec;
  std::filesystem::create_directories(s.workDir, ec);
  if (ec) return Error{"--work-dir " + s.workDir + ": " + ec.message()};
  c.workDir = std::filesystem::canonical(s.workDir, ec);
  if (ec) return Error{"--work-dir " + s.workDir + ": " + ec.message()};
  auto facts = readNodeFacts(c.workDir);
  if (!facts) return facts.error();
  auto resources = agentResources(s.resources, *facts);
  if (!resources) return resources.error();
  c.resources = *resources;
  auto attributes = parseAttributes(s.attributes);
  if (!attributes) return attributes.error();
  c.attributes = *attributes;
  c.hostname = s.hostname;
  if (c.hostname.empty()) {
    char host[HOST_NAME_MAX + 1] = {};
    gethostname(host, sizeof host - 1);
    c.hostname = host;
  }
  if (s.sandboxMaxAgeS < 0) return Error{"--sandbox-max-age must be >= 0"};
  c.sandboxMaxAge = std::chrono::seconds(s.sandboxMaxAgeS);
  if (!positive(s.recoveryTimeoutS, 86400 * 30)) return Error{"--recovery-timeout must be in (0, 30 days]"};
  if (!positive(s.statusRetryS, 86400)) return Error{"--status-update-retry must be in (0, 86400]"};
  if (!(s.executorIdleS >= 0 && s.executorIdleS <= 86400)) return Error{"--executor-idle-timeout must be in [0, 86400]"};
  if (!positive(s.registerTimeoutS, 86400)) return Error{"--executor-register-timeout must be in (0, 86400]"};
  c.statusRetry = secondsToDuration(s.statusRetryS);
  if (!positive(s.usageIntervalS, 86400)) return Error{"--usage-interval must be in (0, 86400]"};
  c.usageInterval = secondsToDuration(s.usageIntervalS);
  c.executors.executorPath = s.executorPath.empty() ? defaultExecutorPath() : s.executorPath;
  if (access(c.executors.executorPath.c_str(), X_OK) != 0) {
    return Error::fromErrno("--executor-path " + c.executors.executorPath + " is not executable");
  }
  if (auto st = runAsSettings(s, &c); !st) return st.error();
  c.executors.recoveryTimeout = secondsToDuration(s.recoveryTimeoutS);
  c.executors.idleShutdown = secondsToDuration(s.executorIdleS);
  c.executors.registerTimeout = secondsToDuration(s.registerTimeoutS);
  auto logMax = parseByteSize(s.taskLogMax, "--task-log-max");
  if (!logMax) return logMax.error();
  if (*logMax < kLogBytesMin) return Error{"--task-log-max must be at least " + std::to_string(kLogBytesMin) + " bytes"};
  if (s.taskLogFiles < static_cast<int64_t>(kLogFilesMin) || s.taskLogFiles > static_cast<int64_t>(kLogFilesMax)) {
    return Error{"--task-log-files must be in [2, 100]"};
  }
  c.executors.taskLogMaxBytes = *logMax;
  c.executors.taskLogFiles = static_cast<size_t>(s.taskLogFiles);
  return c;
}

// The agent's own cgroup when systemd delegated it (a unit with Delegate=yes
// on a unified host: systemd marks the cgroup with the trusted.delegate
// xattr), relative to /sys/fs/cgroup; "" otherwise.
std::string systemdDelegatedCgroup() {
  struct statfs fs {};
  if (statfs("/sys/fs/cgroup", &fs) != 0 || fs.f_type != CGROUP2_SUPER_MAGIC) return "";
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  std::string own;
  while (std::getline(in, line)) {
    if (line.rfind("0::/", 0) == 0) own = line.substr(4);
  }
  if (own.empty() || own.find("..") != std::string::npos) return "";
  char value[8] = {};
  ssize_t n = getxattr(("/sys/fs/cgroup/" + own).c_str(), "trusted.delegate", value, sizeof value - 1);
  return n == 1 && value[0] == '1' ? own : "";
}

// The agent's cgroup subtree when --cgroups-root is not given. Under systemd
// with Delegate=yes: the unit's own cgroup (the agent moves itself into its
// "agent" leaf, executors get sibling cgroups: systemd's delegation rules).
// Else "allot" for the default work dir, or named after the work dir
// ("allot.tmp.x.agent"), so that agents with their own work dirs on one host
// (tests, emulation) never reap each other's executors.
std::string defaultCgroupsRoot(const std::string& workDir) {
  if (std::string delegated = systemdDelegatedCgroup(); !delegated.empty()) return delegated;
  std::filesystem::path abs = std::filesystem::absolute(workDir).lexically_normal();
  std::string dir = abs.string();
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  if (dir == Settings().workDir) return "allot";
  std::string out = "allot";
  for (const auto& part : std::filesystem::path(dir).relative_path()) out += "." + escapeId(part.string());
  if (out.size() > 200) out = out.substr(0, 180) + "." + std::to_string(std::hash<std::string>{}(out));
  return out;
}

#ifdef ALLOT_HAVE_ISOLATORS
std::vector<std::string> commaList(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

// filesystem/linux's images: the layer store for the isolator, the puller
// for the executor manager; none without that isolator.
Result<std::unique_ptr<ImageService>> makeImages(Settings& s, asio::io_context& io, AgentConfig* config) {
  std::vector<std::string> names = commaList(s.isolation);
  if (std::find(names.begin(), names.end(), "filesystem/linux") == names.end()) return std::unique_ptr<ImageService>();
  auto cap = parseByteSize(s.imageCacheMax, "--image-cache-max");
  if (!cap) return cap.error();
  ImageServiceOptions o{.workDir = config->workDir, .cacheBytesMax = *cap};
  o.registry.caFile = s.registryCa;
  o.registry.credentialsFile = s.registryCredentials;
  o.registry.insecureRegistries = commaList(s.insecureRegistries);
  auto service = ImageService::create(io, o);
  if (!service) return service.error();
  std::string socket = config->workDir + "/agent.sock";
  s.isolatorOptions.imageStore = &(*service)->store();
  s.isolatorOptions.rootfsDir = config->workDir + "/rootfs";
  s.isolatorOptions.hostBinds = {{socket, socket, false}};  // a custom executor inside its image reaches the agent
  ImageService* images = service->get();
  config->executors.pullImage = [images](const std::string& reference, ExecutorManagerOptions::ImageDone done) {
    images->pull(reference, std::move(done));
  };
  return service;
}
#endif

// The isolators, and filesystem/linux's images kept in *images.
Result<std::vector<std::unique_ptr<Isolator>>> makeIsolators(Settings& s, UringPoller& poller, asio::io_context& io,
                                                             WorkerPool& pool, AgentConfig* config,
                                                             std::shared_ptr<void>* images) {
#ifdef ALLOT_HAVE_ISOLATORS
  auto service = makeImages(s, io, config);
  if (!service) return service.error();
  *images = std::shared_ptr<ImageService>(std::move(*service));
  s.isolatorOptions.poller = &poller;
  s.isolatorOptions.io = &io;
  s.isolatorOptions.pool = &pool;
  if (s.isolatorOptions.cgroupsRoot.empty()) s.isolatorOptions.cgroupsRoot = defaultCgroupsRoot(s.workDir);
  auto made = createIsolators(s.isolation, s.isolatorOptions);
  if (!made) return Error{"--isolation: " + made.error().describe()};
  return made;
#else
  (void)poller;
  (void)io;
  (void)pool;
  (void)config;
  (void)images;
  if (s.isolation.empty()) return std::vector<std::unique_ptr<Isolator>>{};
  return Error{"--isolation " + s.isolation + ": isolation is not built into this allot-agent yet"};
#endif
}


Result<std::unique_ptr<AgentHttp>> startHttp(asio::io_context& io, Agent& agent,
                                             const Settings& s) {
  // As on the master: the agent's certificate serves HTTPS to clients with a
  // certificate from the same CA; plaintext stays on loopback unless --insecure.
  auto options = http::serverOptionsFromFlags(s.httpListen, s.tls, s.insecure);
  if (!options) return options.error();
  auto http = AgentHttp::create(io, agent, *options);
  if (!http) return http.error();
  (*http)->start();
  // Reported to the master (AgentInfo.http_address) so that clients find a
  // task's files through it; a wildcard address is reached by hostname.
  std::string host = options->listen.host;
  if (host.empty() || host == "0.0.0.0" || host == "::") host = agent.config().hostname;
  if (host.find(':') != std::string::npos) host = "[" + host + "]";
  agent.setHttpAddress(host + ":" + std::to_string((*http)->port()));
  if (!s.httpPortFile.empty()) {
    std::string port = std::to_string((*http)->port()) + "\n";
    if (auto st = writeFileAtomically(s.httpPortFile, port, /*durable=*/false, 0644); !st) return st.error();
  }
  return http;
}

// File descriptors the agent's table holds from the start: the executors
// (pidfd, socket, setup pipe, cgroup fds each) and the master, HTTP and
// ZooKeeper links of a full agent (kExecutorsMax 1000), within RLIMIT_NOFILE.
constexpr rlim_t kFdTablePresize = 8192;

// The kernel grows a process's fd table by doubling, and in a process
// with threads every growth waits for an RCU grace period (expand_fdtable:
// synchronize_rcu, tens of ms on a loaded host) inside the syscall that
// made the fd: a clone3(CLONE_PIDFD), accept or open on the loop. Grown
// once here, before any thread exists, it does not grow under load.
void presizeFdTable() {
  struct rlimit nofile {};
  if (getrlimit(RLIMIT_NOFILE, &nofile) != 0) return;
  rlim_t size = std::min(nofile.rlim_cur, kFdTablePresize);
  if (size < 2) return;
  int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  int high = ::fcntl(fd, F_DUPFD_CLOEXEC, static_cast<int>(size - 1));
  if (high >= 0) ::close(high);
  ::close(fd);
}

// Builds the agent from its settings and runs its loop until SIGTERM/SIGINT.
int run(Settings& settings, AgentConfig config) {
  presizeFdTable();
  signal(SIGPIPE, SIG_IGN);
  asio::io_context io;
  auto poller = UringPoller::create(io);
  if (!poller) {
    LOG_ERROR("io_uring poller: " << poller.error().describe());
    return 1;
  }
  // The isolators' own blocking work (disk/du's sandbox scans), apart from the executor manager's
  // reaping: a long scan never delays a reap. Niced: a scan never takes the loop's CPU.
  WorkerPool isolatorPool(io,
                          {.threads = 1, .queueMax = 4096, .niceness = kBackgroundNiceness, .name = "allot-isolate"});
  std::shared_ptr<void> images;  // filesystem/linux's (agent/image_service.h), outlives the agent
  auto isolators = makeIsolators(settings, **poller, io, isolatorPool, &config, &images);
  if (!isolators) {
    std::fprintf(stderr, "allot-agent: %s\n", isolators.error().describe().c_str());
    return 2;
  }
  // Orphans of tasks (daemonized children whose executor died) come back
  // to the agent, and the launcher reaps them.
  if (auto st = becomeSubreaper(); !st) LOG_WARNING(st.error().describe());
  auto launcher = Launcher::create(io, **poller);
  if (!launcher) {
    LOG_ERROR("launcher: " << launcher.error().describe());
    return 1;
  }
  Agent agent(io, std::move(config), **launcher, *isolators);
  SystemdNotifier notifier(io);
  notifier.status("registering with the master at " + settings.master);
  agent.setRegisteredHook([&notifier](const std::string& agentId) {
    notifier.ready("registered as agent " + agentId);
  });
  if (auto st = agent.start(); !st) {
    LOG_ERROR("cannot start: " << st.error().describe());
    return 1;
  }
  std::unique_ptr<AgentHttp> http;
  if (!settings.httpListen.empty()) {
    auto created = startHttp(io, agent, settings);
    if (!created) {
      LOG_ERROR(created.error().describe());
      return 1;
    }
    http = std::move(*created);
  }
  LOG_INFO("agent on " << (settings.shards.empty() ? settings.master : "shards " + settings.shards) << " with work dir " << settings.workDir
                       << " (supervision: " << (*poller)->backend() << ")");
  asio::signal_set signals(io, SIGTERM, SIGINT);
  signals.async_wait([&](const boost::system::error_code& ec, int sig) {
    if (ec) return;
    LOG_INFO("signal " << sig << ": stopping; executors keep running for the next agent");
    notifier.stopping();
    if (http) http->stop();
    agent.stop();
    io.stop();
  });
  io.run();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  setLogProgram("allot-agent");
  Settings settings;
  Flags flags("allot-agent", "Runs the allot agent: offers this node's resources to the master "
                             "and runs the frameworks' executors.");
  addFlags(flags, &settings);
  if (int rc = handleFlags(flags, argc, argv); rc >= 0) return rc;
  auto config = makeConfig(settings);
  if (!config) {
    LOG_ERROR(config.error().describe());
    std::fprintf(stderr, "allot-agent: %s\n", config.error().describe().c_str());
    return 2;
  }
  return run(settings, std::move(*config));
}
