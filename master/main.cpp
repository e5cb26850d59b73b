// allot-master: holds the cluster's soft state and makes resource offers.
#include <sys/resource.h>

#include <algorithm>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <iostream>

#include "base/asio.h"
#include "diag/loop_stall_meter.h"
#include "base/files.h"
#include "base/flags.h"
#include "base/log.h"
#include "ha/contender.h"
#include "ha/group.h"
#include "ha/zk_session.h"
#include "master/agent_shard.h"
#include "master/allocator/allocator.h"
#include "master/http_api.h"
#include "master/identity_store_zk.h"
#include "master/role_store_zk.h"
#include "master/server.h"
#include "systemd/notify.h"

namespace {

using namespace allot;

struct Settings {
  std::string listen = "127.0.0.1:5050";
  std::string portFile;
  std::string workDir;
  std::string zk;
  std::string zkCredentials;
  double zkSessionTimeoutS = 10;
  int64_t zkClientPriority = 10;
  std::string advertise;
  std::string allocator = "drf";
  std::string minOffer = "cpus:0.01;mem:32";
  double offerTimeoutS = 30;
  double allocationIntervalS = 1;
  double agentTimeoutS = 15;
  double heartbeatIntervalS = 0;
  double refuseSeconds = 5;
  double failoverTimeoutS = 60;
  int64_t maxFrameBytes = static_cast<int64_t>(kMaxFrameBytes);
  int64_t maxPendingHandshakes = static_cast<int64_t>(kMaxPendingHandshakes);
  double handshakeTimeoutS = 10;
  double statsIntervalS = 60;
  TlsFiles tls;
  bool insecure = false;
  std::string httpListen;
  std::string httpPortFile;
  std::string acls;
  double registrationTimeoutS = limits::kRegistrationTimeoutSeconds;
  std::string roleWeights;
  std::string quota;
  std::string guarantee;
  bool revocation = false;
  double revocationGraceS = 30;
  double reservationTimeoutS = 10;
  double revocationGraceMaxS = 300;
  std::string longTaskMax;
  std::string shardListen;
  std::string shardPortFile;
  AgentShardSettings agentShard;
};

// Where the master listens, keeps its files and meets the other masters.
void addPlaceFlags(Flags& flags, Settings* s) {
  flags.addString("listen", &s->listen, "HOST:PORT to listen on (port 0: any free port)");
  flags.addString("port-file", &s->portFile, "write the bound port to this file once listening");
  flags.addString("shard-listen", &s->shardListen,
                  "HOST:PORT where link shards (allot-shard) connect; empty: no shards");
  flags.addString("shard-port-file", &s->shardPortFile,
                  "write the bound --shard-listen port to this file once listening");
  addAgentShardFlags(flags, &s->agentShard);
  flags.addString("work-dir", &s->workDir,
                  "directory for the master's files: without --zk, the run-time role settings "
                  "(allotctl role) are kept in DIR/role-settings (state is otherwise soft)");
  flags.addString("zk", &s->zk,
                  "zk://host:port[,host:port...]/path: elect the leader among the masters "
                  "there (empty: standalone)");
  flags.addString("zk-credentials", &s->zkCredentials,
                  "file holding user:password: authenticate to ZooKeeper (digest) and create "
                  "the group's znodes writable only by that identity, readable by anyone "
                  "(empty: no authentication, znodes open to all)");
  flags.addDouble("zk-session-timeout", &s->zkSessionTimeoutS,
                  "seconds of ZooKeeper session: a crashed leader is replaced after about this "
                  "long (the servers clamp it to 2..20 ticks)");
  flags.addInt("zk-client-priority", &s->zkClientPriority,
               "nice levels above the master's own at which the ZooKeeper client's threads run "
               "(0: none), so a leader on a loaded host keeps its session; needs CAP_SYS_NICE "
               "or LimitNICE=");
  flags.addString("advertise", &s->advertise,
                  "HOST:PORT other peers reach this master at, published in ZooKeeper "
                  "(default: --listen's host and the bound port)");
}

// How offers are made and how long peers and offers are waited for.
void addAllocationFlags(Flags& flags, Settings* s) {
  flags.addString("allocator", &s->allocator, "allocation module: drf, priority or lottery");
  flags.addString("min-offer", &s->minOffer,
                  "offer an agent only when its free resources reach one of these");
  flags.addDouble("offer-timeout", &s->offerTimeoutS, "seconds before an unanswered offer is rescinded");
  flags.addDouble("allocation-interval", &s->allocationIntervalS, "seconds between full allocation cycles");
  flags.addDouble("agent-timeout", &s->agentTimeoutS, "seconds of silence before an agent is removed");
  flags.addDouble("heartbeat-interval", &s->heartbeatIntervalS,
                  "seconds of an agent's heartbeat interval: it heartbeats after one without traffic "
                  "both ways (below half of --agent-timeout; 0: a third of it, at most 5)");
  flags.addDouble("refuse-seconds", &s->refuseSeconds, "default refusal time of a declined offer");
  flags.addDouble("failover-timeout", &s->failoverTimeoutS,
                  "seconds a disconnected framework keeps its tasks when it set none");
}

// Who may do what, and the limits on what peers and connections cost.
void addLimitFlags(Flags& flags, Settings* s) {
  flags.addString("acls", &s->acls,
                  "ACL file: who may register frameworks (as which users, roles, weights), "
                  "agents, and operate (docs/acls.md); default: anyone, tasks never as root");
  flags.addDouble("registration-timeout", &s->registrationTimeoutS,
                  "seconds a scheduler or agent may stay connected without registering");
  flags.addInt("max-frame-bytes", &s->maxFrameBytes, "largest protocol frame accepted");
  flags.addInt("max-pending-handshakes", &s->maxPendingHandshakes,
               "connections at once that are accepted but not through TLS + Hello; beyond "
               "it, new connections wait in the listen backlog");
  flags.addDouble("handshake-timeout", &s->handshakeTimeoutS,
                  "seconds a new connection has to finish TLS + Hello");
  flags.addDouble("stats-interval", &s->statsIntervalS,
                  "seconds between 'stats:' log lines (0: none)");
  addTlsFlags(flags, &s->tls);
  flags.addBool("insecure", &s->insecure,
                "allow plaintext on a non-loopback --listen (or --http-listen) address");
  flags.addString("http-listen", &s->httpListen,
                  "HOST:PORT for /health, /state, /metrics, the web UI and allotctl (empty: none; "
                  "mutual TLS with the --tls-* files; plaintext: loopback unless --insecure)");
  flags.addString("http-port-file", &s->httpPortFile,
                  "write the bound HTTP port to this file once listening");
}

// Sharing between roles and frameworks: weights, quotas, guarantees,
// revocation.
void addPolicyFlags(Flags& flags, Settings* s) {
  flags.addString("role-weight", &s->roleWeights,
                  "role weights for DRF across roles, e.g. \"batch:2 web:1\" (others: 1)");
  flags.addString("quota", &s->quota,
                  "per-role minimum and cap, e.g. \"batch:cpus:10;mem:10240 web:cpus:4\"");
  flags.addString("guarantee", &s->guarantee,
                  "most each framework of a role may be guaranteed (its default), e.g. "
                  "\"mpi:cpus:8;mem:8192\"; frameworks of other roles get none");
  flags.addBool("revocation", &s->revocation,
                "revoke tasks of frameworks above their guarantee and fair share for starved ones");
  flags.addDouble("reservation-timeout", &s->reservationTimeoutS,
                  "seconds an agent's freed resources may be held for a starved framework of "
                  "large tasks (its standing min_free) before others get them; 0: never");
  flags.addDouble("revocation-grace", &s->revocationGraceS,
                  "seconds a revoked task has before its executor is killed");
  flags.addDouble("revocation-grace-max", &s->revocationGraceMaxS,
                  "largest grace a framework may ask for (FrameworkInfo.revocation_grace_s)");
  flags.addString("long-task-max", &s->longTaskMax,
                  "per-agent cap on long-lived tasks: a fraction (0.5) or resources (cpus:8;mem:8192)");
}

// --shard-listen: where link shards connect (master/shard_hub.h).
Status shardOptions(const Settings& s, ServerOptions* server) {
  if (s.shardListen.empty()) return okStatus();
  auto listen = parseHostPort(s.shardListen);
  if (!listen) return Error{"--shard-listen: " + listen.error().describe()};
  server->shardListen = *listen;
  return checkPlaintextOnLoopback("--shard-listen", listen->host, server->tls != nullptr, s.insecure,
                                  "plaintext");
}

void addFlags(Flags& flags, Settings* s) {
  addPlaceFlags(flags, s);
  addAllocationFlags(flags, s);
  addLimitFlags(flags, s);
  addPolicyFlags(flags, s);
}

bool positive(double v) { return v > 0 && v < 1e7; }

// The protocol server's flags: address, TLS, frames, handshakes.
Result<ServerOptions> toServerOptions(const Settings& s) {
  ServerOptions server;
  auto listen = parseHostPort(s.listen);
  if (!listen) return Error{"--listen: " + listen.error().describe()};
  server.listen = *listen;
  auto tls = tlsContextFromFlags(s.tls, TlsSide::kServer);
  if (!tls) return tls.error();
  server.tls = *tls;
  if (auto st = checkPlaintextOnLoopback("--listen", server.listen.host, server.tls != nullptr, s.insecure, "plaintext");
      !st) {
    return st.error();
  }
  if (Status st = shardOptions(s, &server); !st) return st.error();
  if (s.maxFrameBytes < 1024 || s.maxFrameBytes > static_cast<int64_t>(kMaxFrameBytes)) {
    return Error{"--max-frame-bytes must be between 1024 and " + std::to_string(kMaxFrameBytes)};
  }
  server.maxFrameBytes = static_cast<size_t>(s.maxFrameBytes);
  if (s.maxPendingHandshakes < 1 || s.maxPendingHandshakes > 65536) {
    return Error{"--max-pending-handshakes must be between 1 and 65536"};
  }
  server.maxPendingHandshakes = static_cast<size_t>(s.maxPendingHandshakes);
  if (!(s.handshakeTimeoutS >= 0.01 && s.handshakeTimeoutS <= 3600)) {
    return Error{"--handshake-timeout must be between 0.01 and 3600 seconds"};
  }
  server.handshakeTimeout = std::chrono::duration_cast<std::chrono::milliseconds>(
      secondsToDuration(s.handshakeTimeoutS));
  if (!(s.statsIntervalS >= 0)) return Error{"--stats-interval must be >= 0"};
  server.statsInterval = secondsToDuration(s.statsIntervalS);
  return server;
}

// Offers, timeouts and ACLs.
Status setTimings(const Settings& s, MasterOptions* out) {
  MasterOptions& master = *out;
  if (!positive(s.offerTimeoutS)) return Error{"--offer-timeout must be positive"};
  if (!positive(s.allocationIntervalS)) return Error{"--allocation-interval must be positive"};
  if (!positive(s.agentTimeoutS)) return Error{"--agent-timeout must be positive"};
  if (!(s.refuseSeconds >= 0 && s.refuseSeconds < 1e7)) return Error{"--refuse-seconds must be >= 0"};
  if (!positive(s.failoverTimeoutS)) return Error{"--failover-timeout must be positive"};
  // A busy agent heartbeats only after an interval without traffic both
  // ways, so its frames may come two intervals apart.
  if (!(s.heartbeatIntervalS >= 0 && 2 * s.heartbeatIntervalS < s.agentTimeoutS)) {
    return Error{"--heartbeat-interval must be below half of --agent-timeout"};
  }
  auto minOffer = Resources::parse(s.minOffer);
  if (!minOffer) return Error{"--min-offer: " + minOffer.error().describe()};
  master.minOffer = *minOffer;
  master.allocator = s.allocator;
  master.offerTimeout = secondsToDuration(s.offerTimeoutS);
  master.allocationInterval = secondsToDuration(s.allocationIntervalS);
  master.agentTimeout = secondsToDuration(s.agentTimeoutS);
  double heartbeat = s.heartbeatIntervalS > 0 ? s.heartbeatIntervalS
                                              : std::min(5.0, s.agentTimeoutS / 3);
  master.heartbeatInterval = secondsToDuration(heartbeat);
  master.refuseDefault = secondsToDuration(s.refuseSeconds);
  master.failoverTimeoutDefault = secondsToDuration(s.failoverTimeoutS);
  if (!positive(s.registrationTimeoutS)) return Error{"--registration-timeout must be positive"};
  master.registrationTimeout = secondsToDuration(s.registrationTimeoutS);
  if (!s.acls.empty()) {
    auto acls = Acls::load(s.acls);
    if (!acls) return Error{"--acls: " + acls.error().describe()};
    master.acls = std::move(*acls);
  }
  return okStatus();
}

// Roles, quotas, guarantees, revocation (after setTimings: revocation's
// starvation period is the allocation interval).
Status setPolicy(const Settings& s, MasterOptions* master) {
  PolicyOptions& policy = master->policy;
  if (auto st = parseRoleWeights(s.roleWeights, &policy.roles); !st) return st.error();
  if (auto st = parseQuotas(s.quota, &policy.roles); !st) return st.error();
  auto guarantees = parseGuarantees(s.guarantee);
  if (!guarantees) return guarantees.error();
  policy.guarantees = std::move(*guarantees);
  auto longTaskMax = parseLongTaskMax(s.longTaskMax);
  if (!longTaskMax) return longTaskMax.error();
  policy.longTaskMax = *longTaskMax;
  if (!positive(s.revocationGraceS)) return Error{"--revocation-grace must be positive"};
  if (!(s.revocationGraceMaxS >= s.revocationGraceS && s.revocationGraceMaxS < 1e7)) {
    return Error{"--revocation-grace-max must be at least --revocation-grace"};
  }
  if (!(s.reservationTimeoutS >= 0 && s.reservationTimeoutS < 1e7)) {
    return Error{"--reservation-timeout must be >= 0"};
  }
  policy.reservationTimeout = secondsToDuration(s.reservationTimeoutS);
  policy.revocation.enabled = s.revocation;
  policy.revocation.grace = secondsToDuration(s.revocationGraceS);
  policy.revocation.graceMax = secondsToDuration(s.revocationGraceMaxS);
  policy.revocation.starvation = master->allocationInterval;
  return okStatus();
}

Result<std::pair<ServerOptions, MasterOptions>> toOptions(const Settings& s) {
  auto server = toServerOptions(s);
  if (!server) return server.error();
  MasterOptions master;
  if (auto st = setTimings(s, &master); !st) return st.error();
  if (auto st = setPolicy(s, &master); !st) return st.error();
  return std::make_pair(std::move(*server), std::move(master));
}

// Every agent and scheduler holds a socket: raise the soft fd limit to the
// hard one so tens of thousands of agents fit, and say so when the result
// is below kWanted: past it accept fails (EMFILE) and peers wait in the
// backlog, so the operator should know the ceiling.
void raiseFileLimitOrWarn() {
  constexpr rlim_t kWanted = 262144;
  rlim_t got = allot::raiseFileLimit(kWanted);
  if (got >= kWanted) return;
  rlimit limit{};
  getrlimit(RLIMIT_NOFILE, &limit);
  LOG_WARNING("open file limit (RLIMIT_NOFILE) is " << got << ", hard limit " << limit.rlim_max
              << ": fewer than " << got
              << " agents and frameworks fit (raise LimitNOFILE= or ulimit -Hn)");
}

Status writePortFile(const std::string& path, uint16_t port) {
  return writeFileAtomically(path, std::to_string(port) + "\n", /*durable=*/false, 0644);
}

// --port-file and --shard-port-file, when given.
Status writePortFiles(const Settings& s, const MasterServer& server) {
  if (!s.portFile.empty()) {
    if (auto st = writePortFile(s.portFile, server.port()); !st) return st;
  }
  if (!s.shardPortFile.empty()) return writePortFile(s.shardPortFile, server.shardPort());
  return okStatus();
}

// What the in-process link shard (--agent-shard-listen) takes from the
// master's own flags.
AgentShardContext agentShardContext(const Settings& s, const ServerOptions& options, const MasterServer& server) {
  AgentShardContext c;
  c.tls = s.tls;
  c.acls = s.acls;
  c.insecure = s.insecure;
  c.zk = s.zk;
  if (server.shardPort() != 0) c.shardListen = HostPort{options.shardListen.host, server.shardPort()};
  return c;
}

// The address published in ZooKeeper for clients to connect to.
Result<Endpoint> advertisedAddress(const Settings& s, uint16_t boundPort) {
  if (!s.advertise.empty()) {
    auto endpoint = parseEndpoint(s.advertise);
    if (!endpoint || endpoint->kind != Endpoint::Kind::kTcp)
      return Error{"--advertise: expected HOST:PORT, got '" + s.advertise + "'"};
    return *endpoint;
  }
  auto listen = parseHostPort(s.listen);
  if (!listen) return listen.error();
  if (!s.zk.empty() && (listen->host == "0.0.0.0" || listen->host == "::"))
    return Error{"--listen " + s.listen + " is not an address peers can reach: give --advertise"};
  return Endpoint{Endpoint::Kind::kTcp, listen->host, boundPort, ""};
}

// The HTTP address published in ZooKeeper beside the protocol address (for
// allotctl --master zk://...): --http-listen's host with the bound port, or
// the advertised host when --http-listen is a wildcard address.
std::optional<Endpoint> advertisedHttp(const Settings& s, const Endpoint& advertise,
                                       const MasterHttp* http) {
  if (http == nullptr) return std::nullopt;
  auto listen = parseHostPort(s.httpListen);
  if (!listen) return std::nullopt;
  std::string host = listen->host == "0.0.0.0" || listen->host == "::" ? advertise.host : listen->host;
  return Endpoint{Endpoint::Kind::kTcp, host, http->port(), ""};
}

// The --shard-listen address published beside it, as advertisedHttp does.
std::optional<Endpoint> advertisedShards(const Settings& s, const Endpoint& advertise, const MasterServer& server) {
  if (server.shardPort() == 0) return std::nullopt;
  auto listen = parseHostPort(s.shardListen);
  if (!listen) return std::nullopt;
  std::string host = listen->host == "0.0.0.0" || listen->host == "::" ? advertise.host : listen->host;
  return Endpoint{Endpoint::Kind::kTcp, host, server.shardPort(), ""};
}

// What runs beside the protocol server: the HTTP endpoints (may be null)
// and the systemd notifier.
struct Operating {
  MasterHttp* http;
  SystemdNotifier& notifier;
  void stop() {
    notifier.stopping();
    if (http) http->stop();
  }
};

// --http-listen: the endpoints start at once (a standby answers /health
// too); null without the flag.
Result<std::unique_ptr<MasterHttp>> startHttp(asio::io_context& io, const Settings& s,
                                              MasterServer& server) {
  if (s.httpListen.empty()) return std::unique_ptr<MasterHttp>();
  // The same rule as the protocol port: plaintext only on loopback unless
  // --insecure; with --tls-* the HTTP port is mutual TLS with the same files.
  auto listen = http::serverOptionsFromFlags(s.httpListen, s.tls, s.insecure);
  if (!listen) return listen.error();
  MasterHttpOptions options;
  options.server = *listen;
  options.aclsFromFile = !s.acls.empty();
  auto http = MasterHttp::create(io, server, options);
  if (!http) return http.error();
  (*http)->start();
  if (!s.httpPortFile.empty()) {
    if (auto st = writePortFile(s.httpPortFile, (*http)->port()); !st) return st.error();
  }
  return http;
}

// Without --zk the run-time role settings live in --work-dir (none without
// one); with --zk in the group's znode (runContending).
Result<std::unique_ptr<RoleStore>> standaloneRoleStore(asio::io_context& io, const Settings& s) {
  if (s.workDir.empty()) {
    LOG_WARNING("no --work-dir: role weights and quotas set at run time (allotctl role) last "
                "until this master stops");
    return makeUnpersistedRoleStore(io);
  }
  std::error_code ec;
  std::filesystem::create_directories(s.workDir, ec);
  if (ec) return Error{"--work-dir " + s.workDir + ": " + ec.message()};
  return makeFileRoleStore(io, (std::filesystem::path(s.workDir) / "role-settings").string());
}

// Frameworks' identities (master/identity_store.h) live beside the role
// settings: in --work-dir without --zk, nowhere without either.
std::unique_ptr<IdentityStore> standaloneIdentityStore(asio::io_context& io, const Settings& s) {
  if (s.workDir.empty()) return makeUnpersistedIdentityStore(io);
  return makeFileIdentityStore(io, (std::filesystem::path(s.workDir) / "framework-identities").string());
}

// The kept identities are read (or found unreadable: Master::keepIdentities
// reads them again later) and the stored role settings applied before the
// first peer is accepted (and so before the first allocation).
int runStandalone(asio::io_context& io, MasterServer& server, std::unique_ptr<RoleStore> roleStore,
                  Operating& operating, std::unique_ptr<IdentityStore> identities) {
  auto roles = std::make_shared<std::unique_ptr<RoleStore>>(std::move(roleStore));
  server.master().keepIdentities(std::move(identities), [&server, &operating, roles] {
    server.roleSettings().load(std::move(*roles), [&] {
      server.start();
      operating.notifier.ready("listening on port " + std::to_string(server.port()));
    });
  });
  asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code&, int sig) {
    LOG_INFO("signal " << sig << ": shutting down");
    operating.stop();
    server.stop();
    io.stop();
  });
  io.run();
  return 0;
}

// The master's ZooKeeper sessions: the client's priority and credentials
// (--zk-credentials).
Result<ZkSessionFactory> zkSessions(asio::io_context& io, const ZkUrl& zk, const Settings& s) {
  ZkClientOptions client;
  client.priorityBoost = static_cast<int>(s.zkClientPriority);
  if (s.zkCredentials.empty()) {
    LOG_WARNING("no --zk-credentials: the group's znodes in ZooKeeper are open to anyone who "
                "reaches the ensemble (README: ZooKeeper access)");
  } else {
    auto credentials = readZkCredentials(s.zkCredentials);
    if (!credentials) return Error{"--zk-credentials: " + credentials.error().describe()};
    client.credentials = std::move(*credentials);
  }
  auto sessions = zooKeeperSessionFactory(io, zk.servers, secondsToDuration(s.zkSessionTimeoutS), client);
  if (!sessions) return Error{"--zk: " + sessions.error().describe()};
  return sessions;
}

// With --zk: a hot standby until elected, then the leader until it stops or
// can no longer be sure it leads (fencing: it closes every peer and exits
// non-zero at once; systemd starts it again as a standby).
int runContending(asio::io_context& io, MasterServer& server, const ZkUrl& zk, MemberData member,
                  const Settings& s, Operating& operating) {
  auto sessions = zkSessions(io, zk, s);
  if (!sessions) {
    LOG_ERROR(sessions.error().describe());
    return 2;
  }
  int exitCode = 0;
  std::unique_ptr<LeaderContender> contender;
  LeaderContender::Callbacks callbacks;
  // Elected: serve peers at once (agents and frameworks re-register while
  // the rest happens), read (and claim) the stored role settings through
  // the leader's own session, apply them, and only then make offers: the
  // settings change no registration, only what is offered to whom.
  // The kept framework identities are read first (until they are, no id
  // is taken over: Master::keepIdentities).
  callbacks.elected = [&](uint64_t epoch) {
    server.setLeaderEpoch(epoch);
    server.master().holdOffers();
    auto identities = makeZooKeeperIdentityStore(io, *contender->session(), zk.path);
    server.master().keepIdentities(std::move(identities), [&, epoch] {
      server.start();
      server.roleSettings().load(makeZooKeeperRoleStore(io, *contender->session(), zk.path, epoch), [&, epoch] {
        server.master().releaseOffers();
        server.kick();
        operating.notifier.status("leading with epoch " + std::to_string(epoch));
      });
    });
  };
  callbacks.refused = [&](const std::string& why) {
    LOG_ERROR("exiting: ZooKeeper will not let this master contend (" << why << ")");
    operating.stop();
    exitCode = 1;
    io.stop();
  };
  callbacks.lost = [&](const std::string& why) {
    LOG_ERROR("exiting: this master can no longer be sure it leads (" << why << ")");
    operating.stop();
    server.stop();
    exitCode = 1;
    io.stop();
  };
  std::string where = member.address.describe();
  contender = std::make_unique<LeaderContender>(io, std::move(*sessions), zk.path,
                                                std::move(member), callbacks);
  LOG_INFO("master " << server.master().masterId() << " standing by at " << where
                     << " until elected");
  contender->start();
  operating.notifier.ready("standing by at " + where + " until elected");
  asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code&, int sig) {
    LOG_INFO("signal " << sig << ": leaving the contender group and shutting down");
    operating.stop();
    contender.reset();  // closes the session: our znode goes at once
    server.stop();
    io.stop();
  });
  io.run();
  return exitCode;
}

// --zk and the flags that go with it (nullopt: standalone).
Result<std::optional<ZkUrl>> zkFlags(const Settings& s) {
  std::optional<ZkUrl> zk;
  if (!s.zk.empty()) {
    auto url = parseZkUrl(s.zk);
    if (!url) return Error{"--zk: " + url.error().describe()};
    zk = *url;
  }
  if (!s.zkCredentials.empty() && s.zk.empty()) return Error{"--zk-credentials needs --zk"};
  if (!(s.zkSessionTimeoutS >= 0.1 && s.zkSessionTimeoutS <= 3600)) {
    return Error{"--zk-session-timeout must be between 0.1 and 3600 seconds"};
  }
  if (s.zkClientPriority < 0 || s.zkClientPriority > kMaxZkPriorityBoost) {
    return Error{"--zk-client-priority must be between 0 and " + std::to_string(kMaxZkPriorityBoost)};
  }
  return zk;
}

// The master serves once its protocol port is bound: HTTP, the loop's
// meter, then standalone or contending for leadership (--zk).
int serve(asio::io_context& io, const Settings& settings, const std::optional<ZkUrl>& zk,
          MasterServer& server, const Endpoint& advertise) {
  auto http = startHttp(io, settings, server);
  if (!http) {
    LOG_ERROR(http.error().describe());
    return 1;
  }
  SystemdNotifier notifier(io);
  // How late the loop runs due work, on /metrics (what a slow handler
  // costs every offer and reply), and what ran meanwhile.
  LoopStallMeter* meter = nullptr;
  LoopStallMeter loopMeter(io, LoopStallMeterOptions{}, [&server, &meter](double lateS) {
    server.loopTicked(*meter, lateS);
  });
  meter = &loopMeter;
  loopMeter.start();
  Operating operating{http->get(), notifier};
  if (!zk) {
    auto roleStore = standaloneRoleStore(io, settings);
    if (!roleStore) {
      LOG_ERROR(roleStore.error().describe());
      return 1;
    }
    return runStandalone(io, server, std::move(*roleStore), operating, standaloneIdentityStore(io, settings));
  }
  if (!settings.workDir.empty()) {
    LOG_INFO("--zk: run-time role settings are kept in ZooKeeper (" << roleSettingsPath(zk->path)
                                                                     << "), not in --work-dir");
  }
  MemberData member{advertise, server.master().masterId(), advertisedHttp(settings, advertise, http->get()),
                    advertisedShards(settings, advertise, server)};
  return runContending(io, server, *zk, std::move(member), settings, operating);
}

}  // namespace

int main(int argc, char** argv) {
  setLogProgram("allot-master");
  Settings settings;
  Flags flags("allot-master", "Runs the allot master: soft state and resource offers.");
  addFlags(flags, &settings);
  if (int rc = handleFlags(flags, argc, argv); rc >= 0) return rc;
  auto options = toOptions(settings);
  if (!options) {
    std::cerr << "allot-master: " << options.error().describe() << "\n";
    return 2;
  }
  auto zk = zkFlags(settings);
  if (!zk) {
    std::cerr << "allot-master: " << zk.error().describe() << "\n";
    return 2;
  }
  raiseFileLimitOrWarn();
  signal(SIGPIPE, SIG_IGN);
  asio::io_context io(1);
  auto server = MasterServer::create(io, options->first, options->second);
  if (!server) {
    LOG_ERROR(server.error().describe());
    return 1;
  }
  auto advertise = advertisedAddress(settings, (*server)->port());
  if (!advertise) {
    std::cerr << "allot-master: " << advertise.error().describe() << "\n";
    return 2;
  }
  if (auto st = writePortFiles(settings, **server); !st) {
    LOG_ERROR(st.error().describe());
    return 1;
  }
  // Before serve(): a standby carries agents while it waits. Stopped (and
  // its thread joined) when main returns, before the server goes.
  auto agentShard = makeAgentShard(settings.agentShard, agentShardContext(settings, options->first, **server));
  if (!agentShard) {
    std::cerr << "allot-master: " << agentShard.error().describe() << "\n";
    return 2;
  }
  if (*agentShard) (*agentShard)->start();
  return serve(io, settings, *zk, **server, *advertise);
}
