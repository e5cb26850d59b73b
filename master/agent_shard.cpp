#include "master/agent_shard.h"

#include "base/files.h"
#include "master/acls.h"

namespace allot {

namespace {

Status writePort(const std::string& file, uint16_t port) {
  if (file.empty()) return okStatus();
  return writeFileAtomically(file, std::to_string(port) + "\n", /*durable=*/false, 0644);
}

bool wildcard(const std::string& host) { return host == "0.0.0.0" || host == "::"; }

// Without ZooKeeper the leader is this master: its --shard-listen, reached
// over loopback when it listens on every address.
std::string leaderOf(const AgentShardContext& master) {
  if (!master.zk.empty()) return master.zk;
  std::string host = wildcard(master.shardListen.host) ? "127.0.0.1" : master.shardListen.host;
  if (host.find(':') != std::string::npos) host = "[" + host + "]";
  return host + ":" + std::to_string(master.shardListen.port);
}

// The shard's certificate (role `shard`) with the master's CA; both TLS
// contexts null when the master runs plaintext.
Status setTls(const AgentShardSettings& s, const AgentShardContext& master, ShardOptions* o) {
  bool own = !s.tlsCert.empty() || !s.tlsKey.empty();
  if (!master.tls.any()) {
    if (own) return Error{"--agent-shard-tls-cert/-key need the master's --tls-* (their CA is --tls-ca)"};
    return okStatus();
  }
  if (s.tlsCert.empty() || s.tlsKey.empty()) {
    return Error{"--agent-shard-listen with --tls-*: give --agent-shard-tls-cert and --agent-shard-tls-key "
                 "(a certificate of role shard, scripts/allot-certs)"};
  }
  TlsFiles files{s.tlsCert, s.tlsKey, master.tls.ca};
  auto client = makeTlsContext(files, TlsSide::kClient);
  if (!client) return client.error();
  auto server = makeTlsContext(files, TlsSide::kServer);
  if (!server) return server.error();
  o->masterTls = *client;
  o->agentTls = *server;
  return okStatus();
}

Result<ShardOptions> toOptions(const AgentShardSettings& s, const AgentShardContext& master) {
  if (master.shardListen.host.empty()) {
    return Error{"--agent-shard-listen needs --shard-listen: the shard links to the leader there"};
  }
  ShardOptions o;
  auto listen = parseHostPort(s.listen);
  if (!listen) return Error{"--agent-shard-listen: " + listen.error().describe()};
  o.listen = *listen;
  o.master = leaderOf(master);
  o.announce = s.announce;
  if (!s.advertise.empty()) {
    auto advertise = parseHostPort(s.advertise);
    if (!advertise) return Error{"--agent-shard-advertise: " + advertise.error().describe()};
    o.advertise = *advertise;
  }
  if (Status st = setTls(s, master, &o); !st) return st.error();
  if (!master.acls.empty()) {
    auto acls = Acls::load(master.acls);
    if (!acls) return Error{"--acls: " + acls.error().describe()};
    o.acls = std::move(*acls);
  }
  if (Status st = checkPlaintextOnLoopback("--agent-shard-listen", o.listen.host, o.agentTls != nullptr,
                                           master.insecure, "plaintext");
      !st) {
    return st.error();
  }
  return o;
}

// --agent-shard-http-listen: mutual TLS with the shard's own certificate, as
// allot-shard serves it with its --tls-* files.
Result<std::optional<http::ServerOptions>> httpOptions(const AgentShardSettings& s, const AgentShardContext& master) {
  if (s.httpListen.empty()) return std::optional<http::ServerOptions>();
  TlsFiles files;
  if (master.tls.any()) files = TlsFiles{s.tlsCert, s.tlsKey, master.tls.ca};
  auto options = http::serverOptionsFromFlags(s.httpListen, files, master.insecure);
  if (!options) return Error{"--agent-shard-http-listen: " + options.error().describe()};
  return std::optional<http::ServerOptions>(std::move(*options));
}

}  // namespace

void addAgentShardFlags(Flags& flags, AgentShardSettings* s) {
  flags.addString("agent-shard-listen", &s->listen,
                  "HOST:PORT: also serve as a link shard there, standing by or leading (agents given "
                  "--shards connect; needs --shard-listen; empty: no shard)");
  flags.addString("agent-shard-port-file", &s->portFile, "write the bound --agent-shard-listen port to this file");
  flags.addString("agent-shard-advertise", &s->advertise,
                  "HOST:PORT agents reach the shard at (default: --agent-shard-listen)");
  flags.addString("agent-shard-announce", &s->announce,
                  "zk://host:port,.../path: announce the shard there for agents given --shards zk://.../path");
  flags.addString("agent-shard-tls-cert", &s->tlsCert,
                  "PEM certificate of role shard for the shard's links (with --tls-*; its CA: --tls-ca)");
  flags.addString("agent-shard-tls-key", &s->tlsKey, "PEM private key of --agent-shard-tls-cert");
  flags.addString("agent-shard-http-listen", &s->httpListen,
                  "HOST:PORT for the shard's /health and /metrics (empty: none)");
  flags.addString("agent-shard-http-port-file", &s->httpPortFile,
                  "write the bound --agent-shard-http-listen port to this file");
}

Result<std::unique_ptr<ShardThread>> makeAgentShard(const AgentShardSettings& s, const AgentShardContext& master) {
  if (s.listen.empty()) return std::unique_ptr<ShardThread>();
  auto options = toOptions(s, master);
  if (!options) return options.error();
  auto http = httpOptions(s, master);
  if (!http) return http.error();
  auto shard = ShardThread::create(std::move(*options), std::move(*http));
  if (!shard) return shard.error();
  if (Status st = writePort(s.portFile, (*shard)->port()); !st) return st.error();
  if (Status st = writePort(s.httpPortFile, (*shard)->httpPort()); !st) return st.error();
  return shard;
}

}  // namespace allot
