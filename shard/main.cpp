// allot-shard: a link shard. Terminates agent links for the leading master
// and forwards to it, over one link, only what it must see (shard/shard.h).
#include <csignal>
#include <iostream>

#include "base/asio.h"
#include "base/files.h"
#include "base/flags.h"
#include "base/log.h"
#include "shard/http_api.h"
#include "shard/shard.h"

namespace {

using namespace allot;

struct Settings {
  std::string listen = "127.0.0.1:5060";
  std::string master = "127.0.0.1:5061";
  std::string name;
  std::string portFile;
  double livenessIntervalS = 1;
  double leaderGraceS = 10;
  int64_t maxAgents = static_cast<int64_t>(kAgentsPerShardMax);
  TlsFiles tls;
  std::string acls;
  std::string announce;
  std::string httpListen;
  std::string httpPortFile;
  std::string advertise;
  bool insecure = false;
};

void addFlags(Flags& flags, Settings* s) {
  flags.addString("listen", &s->listen, "address agents connect to (host:port)");
  flags.addString("master", &s->master,
                  "the leading master's --shard-listen address (HOST:PORT), or zk://host:port,.../path "
                  "to follow the leader the masters elect there");
  flags.addDouble("leader-grace", &s->leaderGraceS,
                  "seconds agents are held without a leader before their links close");
  flags.addString("name", &s->name, "name in logs and Hellos (default: allot-shard HOST:PORT, the bound address)");
  flags.addString("port-file", &s->portFile, "write the bound agent port to this file once listening");
  flags.addDouble("liveness-interval", &s->livenessIntervalS,
                  "seconds between the liveness summaries sent to the leader");
  flags.addInt("max-agents", &s->maxAgents, "agents held at most");
  addTlsFlags(flags, &s->tls);  // a `shard` certificate: the leader link and the agents'
  flags.addString("zk-announce", &s->announce,
                  "zk://host:port,.../path: announce this shard there for agents given --shards zk://.../path");
  flags.addString("advertise", &s->advertise, "HOST:PORT agents reach this shard at (default: --listen)");
  flags.addString("http-listen", &s->httpListen,
                  "HOST:PORT for /health and /metrics (empty: none; mutual TLS with the --tls-* files)");
  flags.addString("http-port-file", &s->httpPortFile, "write the bound --http-listen port to this file");
  flags.addString("acls", &s->acls, "ACL file whose register_agent rules the shard applies (docs/acls.md)");
  flags.addBool("insecure", &s->insecure, "allow plaintext on a non-loopback --listen address");
}

Result<ShardOptions> toOptions(const Settings& s) {
  ShardOptions o;
  auto listen = parseHostPort(s.listen);
  if (!listen) return Error{"--listen: " + listen.error().describe()};
  o.listen = *listen;
  o.master = s.master;
  o.announce = s.announce;
  if (!s.advertise.empty()) {
    auto advertise = parseHostPort(s.advertise);
    if (!advertise) return Error{"--advertise: " + advertise.error().describe()};
    o.advertise = *advertise;
  }
  o.name = s.name;
  if (!(s.livenessIntervalS >= 0.01 && s.livenessIntervalS <= 60)) {
    return Error{"--liveness-interval must be between 0.01 and 60 seconds"};
  }
  o.livenessInterval = secondsToDuration(s.livenessIntervalS);
  if (!(s.leaderGraceS >= 0 && s.leaderGraceS <= 3600)) return Error{"--leader-grace must be between 0 and 3600 seconds"};
  o.leaderGrace = secondsToDuration(s.leaderGraceS);
  if (s.maxAgents < 1 || s.maxAgents > static_cast<int64_t>(kAgentsPerShardMax)) {
    return Error{"--max-agents must be between 1 and " + std::to_string(kAgentsPerShardMax)};
  }
  o.maxAgents = static_cast<size_t>(s.maxAgents);
  // The --tls-* certificate is the shard's own (role `shard`): it secures
  // the leader link and the agents' links alike.
  auto client = tlsContextFromFlags(s.tls, TlsSide::kClient);
  if (!client) return client.error();
  o.masterTls = *client;
  auto server = tlsContextFromFlags(s.tls, TlsSide::kServer);
  if (!server) return server.error();
  o.agentTls = *server;
  if (!s.acls.empty()) {
    auto acls = Acls::load(s.acls);
    if (!acls) return Error{"--acls: " + acls.error().describe()};
    o.acls = std::move(*acls);
  }
  if (Status st = checkPlaintextOnLoopback("--listen", o.listen.host, o.agentTls != nullptr,
                                           s.insecure, "plaintext");
      !st) {
    return st.error();
  }
  return o;
}

Status writePort(const std::string& file, uint16_t port) {
  if (file.empty()) return okStatus();
  return writeFileAtomically(file, std::to_string(port) + "\n", false, 0644);
}

// --http-listen: /health and /metrics (shard/http_api.h); null without it.
Result<std::unique_ptr<http::Server>> startHttp(asio::io_context& io, LinkShard& shard, const Settings& s) {
  if (s.httpListen.empty()) return std::unique_ptr<http::Server>();
  auto options = http::serverOptionsFromFlags(s.httpListen, s.tls, s.insecure);
  if (!options) return Error{"--http-listen: " + options.error().describe()};
  auto server = startShardHttp(io, shard, *options);
  if (!server) return server.error();
  if (Status st = writePort(s.httpPortFile, (*server)->port()); !st) return st.error();
  return server;
}

}  // namespace

int main(int argc, char** argv) {
  setLogProgram("allot-shard");
  Settings settings;
  Flags flags("allot-shard", "Runs a link shard: holds agent links for the leading master.");
  addFlags(flags, &settings);
  if (int rc = handleFlags(flags, argc, argv); rc >= 0) return rc;
  auto options = toOptions(settings);
  if (!options) {
    std::cerr << "allot-shard: " << options.error().describe() << "\n";
    return 2;
  }
  raiseFileLimit(options->maxAgents + 256);
  signal(SIGPIPE, SIG_IGN);
  asio::io_context io(1);
  auto shard = LinkShard::create(io, *options);
  if (!shard) {
    LOG_ERROR(shard.error().describe());
    return 1;
  }
  if (Status st = writePort(settings.portFile, (*shard)->port()); !st) {
    LOG_ERROR(st.error().describe());
    return 1;
  }
  auto httpServer = startHttp(io, **shard, settings);
  if (!httpServer) {
    LOG_ERROR(httpServer.error().describe());
    return 1;
  }
  (*shard)->start();
  asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code&, int sig) {
    LOG_INFO("signal " << sig << ": shutting down");
    if (*httpServer) (*httpServer)->stop();
    (*shard)->stop();
    io.stop();
  });
  io.run();
  return 0;
}
