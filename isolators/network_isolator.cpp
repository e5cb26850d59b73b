#include "isolators/network_isolator.h"

#include <dirent.h>
#include <fcntl.h>
#include <net/if.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "base/files.h"
#include "base/log.h"
#include "isolators/network_conntrack.h"
#include "isolators/network_links.h"
#include "isolators/network_pool.h"
#include "isolators/network_rules.h"
#include "isolators/network_warm.h"

namespace allot {
namespace {

constexpr int64_t kWarmPoolMax = 64;
// Jobs queued on the flush thread: one at a time (flushFlows batches).
constexpr size_t kFlushQueueMax = 1;
// Offered port ranges per executor: each is one map and one set element.
constexpr size_t kPortRangesMax = 1024;

bool validBridgeName(const std::string& n) {
  if (n.empty() || n.size() > 15) return false;
  for (char c : n) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') return false;
  }
  return true;
}

std::string vethName(uint32_t address) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "ve%08x", address);
  return buf;
}

PortRanges portsOf(const Resources& limits) {
  for (const auto& set : limits.rangeSets()) {
    if (set.name == "ports") return set.ranges;
  }
  return PortRanges{};
}

std::string rangesText(const PortRanges& ports) {
  std::string out;
  for (const auto& [b, e] : ports) out += (out.empty() ? "" : ",") + std::to_string(b) + "-" + std::to_string(e);
  return out;
}

// One executor's checkpoint: "address A\nveth V\nports B-E,B-E\n...".
struct NetState {
  uint32_t address = 0;
  std::optional<Ipv6Address> address6;  // with --network-cidr6
  std::string veth;
  PortRanges ports;
  double egressMbitPerS = 0;  // 0: unlimited
  pid_t pid = 0;              // the executor, once isolate() saw it
};

std::string stateText(const NetState& s) {
  return "address " + ipv4ToString(s.address) + "\nveth " + s.veth + "\nports " + rangesText(s.ports) +
         "\negress " + std::to_string(s.egressMbitPerS) + "\npid " + std::to_string(s.pid) + "\n" +
         (s.address6 ? "address6 " + s.address6->toString() + "\n" : "");
}

ExecutorAddresses addressesOf(const NetState& s) { return {s.address, s.address6}; }

// The ports of `from` that are not in `keep`.
PortRanges subtractRanges(const PortRanges& from, const PortRanges& keep) {
  PortRanges out;
  for (auto [b, e] : from) {
    std::vector<std::pair<uint64_t, uint64_t>> pieces{{b, e}};
    for (const auto& [kb, ke] : keep) {
      std::vector<std::pair<uint64_t, uint64_t>> next;
      for (const auto& [pb, pe] : pieces) {
        if (ke < pb || kb > pe) {
          next.push_back({pb, pe});
          continue;
        }
        if (kb > pb) next.push_back({pb, kb - 1});
        if (ke < pe) next.push_back({ke + 1, pe});
      }
      pieces = std::move(next);
    }
    out.insert(out.end(), pieces.begin(), pieces.end());
  }
  return out;
}

Result<NetState> parseState(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Error::fromErrno("reading " + path);
  NetState s;
  std::string key, value;
  while (in >> key) {
    std::getline(in, value);
    if (!value.empty() && value.front() == ' ') value.erase(0, 1);
    if (key == "address") {
      auto a = parseIpv4(value);
      if (!a) return Error{path + ": " + a.error().describe()};
      s.address = *a;
    } else if (key == "address6") {
      auto a = Ipv6Address::parse(value);
      if (!a) return Error{path + ": " + a.error().describe()};
      s.address6 = *a;
    } else if (key == "veth") {
      s.veth = value;
    } else if (key == "ports" && !value.empty()) {
      auto r = Resources::parse("ports:[" + value + "]");
      if (!r) return Error{path + ": ports '" + value + "': " + r.error().describe()};
      s.ports = portsOf(*r);
    } else if (key == "egress") {
      s.egressMbitPerS = std::atof(value.c_str());
    } else if (key == "pid") {
      s.pid = std::atoi(value.c_str());
    }
  }
  if (s.address == 0 || s.veth.size() != 10 || s.veth.rfind("ve", 0) != 0) {
    return Error{path + ": not a network checkpoint"};
  }
  return s;
}

Status writeState(const std::string& dir, const std::string& name, const NetState& s) {
  return writeFileAtomically(dir + "/" + name, stateText(s), /*durable=*/false, 0644);
}

class NetworkIsolator : public Isolator {
 public:
  NetworkIsolator(NetworkOptions options, NetworkRulesConfig rules, Netlink host, int bridgeIndex,
                  std::unique_ptr<Nftables> nft, asio::io_context* io)
      : options_(std::move(options)),
        rules_(std::move(rules)),
        stateDir_(networkStateDir(options_)),
        pool_(rules_.cidr),
        host_(std::move(host)),
        bridgeIndex_(bridgeIndex),
        nft_(std::move(nft)) {
    if (io && options_.warmPool > 0) {
      warm_ = std::make_unique<WarmPool>(
          *io, static_cast<size_t>(options_.warmPool), [this] { return newPlan(); },
          [this](const NetPlan& plan) { pool_.release(plan.address); });
    }
    if (io) flushes_.emplace(*io, WorkerPoolOptions{.threads = 1, .queueMax = kFlushQueueMax});
  }

  std::string_view name() const override { return "network/netns"; }

  Status recover(const std::vector<KnownContainer>& known) override;
  Status prepare(const ContainerId& id, const ContainerConfig& config, ChildSetup* setup) override;
  Status isolate(const ContainerId& id, pid_t pid) override {
    auto it = nets_.find(id.name());
    if (it == nets_.end()) return okStatus();
    // The executor holds its namespace now; ours would only keep a dead
    // executor's namespace alive.
    it->second.netns.reset();
    it->second.state.pid = pid;
    return writeState(stateDir_, id.name(), it->second.state);
  }
  Status watch(const ContainerId&, std::function<void(const Limitation&)>) override { return okStatus(); }
  Status update(const ContainerId& id, const Resources& limits) override;
  Status usage(const ContainerId&, wire::ResourceUsage*) override { return okStatus(); }
  Status cleanup(const ContainerId& id) override;
  // Deleting the veth waits for an RCU grace period under the rtnl lock
  // (milliseconds, tens under load): on the worker, not on the loop.
  std::function<Status()> reapJob(const ContainerId& id) override {
    auto it = nets_.find(id.name());
    if (it == nets_.end()) return nullptr;
    return [veth = it->second.state.veth] {
      auto host = Netlink::open();
      if (!host) return Status(host.error());
      return host->deleteLink(veth);
    };
  }

 private:
  struct Net {
    NetState state;
    UniqueFd netns;  // from prepare until isolate
  };

  Result<NetPlan> newPlan() {
    auto address = pool_.allocate();
    if (!address) return address.error();
    NetPlan plan{bridgeIndex_, vethName(*address), *address, rules_.cidr.gateway(), options_.egressMbitPerS};
    if (rules_.cidr6) {
      // Never empty: makeNetworkIsolator() checked that every pool address has its IPv6 twin.
      plan.address6 = rules_.cidr6->executorAddress(rules_.cidr, *address);
      plan.gateway6 = rules_.cidr6->gateway();
    }
    return plan;
  }
  Status plumb(Net& net, std::optional<MadeNet> warm, double mbitPerS);
  Status updateRate(NetState& s, double mbitPerS);
  Status applyRate(int netnsFd, NetState& s, double mbitPerS);
  double rateOf(const Resources& limits) const {
    double perTask = limits.scalar("net_mbps");
    return perTask > 0 ? perTask : options_.egressMbitPerS;
  }
  Status removeKernelObjects(const std::string& container, const NetState& state);
  // Deletes the host's conntrack entries of `a` off the loop, then (with
  // `release`) returns a.v4 to the pool: a reused address never finds an
  // earlier executor's flows. With `ports`, only the flows made to those
  // ports of the executor (ports it no longer offers).
  void forgetFlows(const ExecutorAddresses& a, bool release, PortRanges ports = {});
  void flushFlows();

  NetworkOptions options_;
  NetworkRulesConfig rules_;
  std::string stateDir_;
  AddressPool pool_;
  Netlink host_;
  int bridgeIndex_;
  std::unique_ptr<Nftables> nft_;
  std::map<std::string, Net> nets_;  // by container name
  std::unique_ptr<WarmPool> warm_;    // null without --network-warm-pool or a loop
  // Executors whose conntrack entries wait for the flush thread (at most
  // one per executor that ended: bounded by the agent's executors).
  struct Unflushed {
    ExecutorFlows flows;
    bool release;  // its address returns to the pool afterwards
  };
  std::vector<Unflushed> unflushed_;
  bool flushing_ = false;
  // Its socket, kept open (used by one flush job at a time).
  std::shared_ptr<ConntrackFlusher> flusher_ = std::make_shared<ConntrackFlusher>();
  // The flush thread (without a loop flushes run inline); last, so it stops
  // (and drops pending results) before the members they touch go.
  std::optional<WorkerPool> flushes_;
};

Status NetworkIsolator::prepare(const ContainerId& id, const ContainerConfig& config, ChildSetup* setup) {
  const Resources& limits = config.limits;
  std::string name = id.name();
  if (nets_.count(name)) return Error{"container " + name + " already has a network"};
  PortRanges ports = portsOf(limits);
  if (ports.size() > kPortRangesMax) {
    return Error{"executor has " + std::to_string(ports.size()) + " port ranges; at most " +
                 std::to_string(kPortRangesMax)};
  }
  std::optional<MadeNet> warm = warm_ ? warm_->take() : std::nullopt;
  auto plan = warm ? Result<NetPlan>(warm->plan) : newPlan();
  if (!plan) return plan.error();
  Net& net = nets_[name];
  net.state = {plan->address, plan->address6, plan->veth, ports, plan->egressMbitPerS, 0};
  // The checkpoint first: a crash after it leaves only what recover() finds
  // through it (or through the bridge) and removes.
  Status st = writeState(stateDir_, name, net.state);
  if (st) st = plumb(net, std::move(warm), rateOf(limits));
  if (st && net.state.egressMbitPerS != plan->egressMbitPerS) st = writeState(stateDir_, name, net.state);
  if (!st) {
    (void)removeKernelObjects(name, net.state);
    pool_.release(net.state.address);
    nets_.erase(name);
    return st;
  }
  setup->netnsFd = net.netns.get();
  setup->env.push_back("ALLOT_NETWORK_ADDRESS=" + ipv4ToString(net.state.address));
  setup->env.push_back("ALLOT_NETWORK_GATEWAY=" + ipv4ToString(rules_.cidr.gateway()));
  if (net.state.address6) {
    setup->env.push_back("ALLOT_NETWORK_ADDRESS6=" + net.state.address6->toString());
    setup->env.push_back("ALLOT_NETWORK_GATEWAY6=" + rules_.cidr6->gateway().toString());
  }
  return okStatus();
}

// A network from the warm pool needs only its rate checked and its ports;
// without one, every kernel step runs here, on the loop.
Status NetworkIsolator::plumb(Net& net, std::optional<MadeNet> warm, double mbitPerS) {
  NetState& s = net.state;
  if (warm) {
    net.netns = std::move(warm->netns);
  } else {
    NetPlan plan{bridgeIndex_, s.veth, s.address, rules_.cidr.gateway(), mbitPerS};
    plan.address6 = s.address6;
    if (rules_.cidr6) plan.gateway6 = rules_.cidr6->gateway();
    auto made = makeNet(host_, plan);
    if (!made) return made.error();
    net.netns = std::move(made->netns);
    s.egressMbitPerS = mbitPerS;
  }
  if (mbitPerS != s.egressMbitPerS) {
    if (auto st = applyRate(net.netns.get(), s, mbitPerS); !st) return st;
  }
  return nft_->run(addPortsScript(rules_, addressesOf(s), s.ports));
}

Status NetworkIsolator::update(const ContainerId& id, const Resources& limits) {
  auto it = nets_.find(id.name());
  if (it == nets_.end()) return okStatus();
  NetState& s = it->second.state;
  if (double rate = rateOf(limits); rate != s.egressMbitPerS) {
    if (auto st = updateRate(s, rate); !st) return st;
  }
  PortRanges ports = portsOf(limits);
  if (ports == s.ports) return writeState(stateDir_, id.name(), s);
  if (ports.size() > kPortRangesMax) return Error{"too many port ranges: " + std::to_string(ports.size())};
  // One transaction: the old elements go and the new ones come together.
  std::string script =
      deletePortsScript(rules_, addressesOf(s), s.ports) + addPortsScript(rules_, addressesOf(s), ports);
  if (auto st = nft_->run(script); !st) return st;
  // Flows already made to the ports it lost would keep their DNAT mapping
  // and `established` state: they go too (off the loop).
  if (PortRanges lost = subtractRanges(s.ports, ports); !lost.empty()) {
    forgetFlows(addressesOf(s), /*release=*/false, std::move(lost));
  }
  s.ports = ports;
  return writeState(stateDir_, id.name(), s);
}

Status NetworkIsolator::updateRate(NetState& s, double mbitPerS) {
  if (s.pid <= 0) return Error{"cannot change the egress rate before the executor runs"};
  UniqueFd ns(::open(("/proc/" + std::to_string(s.pid) + "/ns/net").c_str(), O_RDONLY | O_CLOEXEC));
  if (!ns.valid()) return Error::fromErrno("opening /proc/" + std::to_string(s.pid) + "/ns/net");
  return applyRate(ns.get(), s, mbitPerS);
}

Status NetworkIsolator::applyRate(int netnsFd, NetState& s, double mbitPerS) {
  auto inside = netlinkIn(netnsFd);
  if (!inside) return inside.error();
  auto index = inside->ifindex(kInsideName);
  if (!index) return index.error();
  Status st = mbitPerS > 0 ? inside->setEgressRate(*index, mbitPerS) : inside->removeRootQdisc(*index);
  if (st) s.egressMbitPerS = mbitPerS;
  return st;
}

Status NetworkIsolator::cleanup(const ContainerId& id) {
  auto it = nets_.find(id.name());
  if (it == nets_.end()) return okStatus();
  Status st = removeKernelObjects(it->first, it->second.state);
  forgetFlows(addressesOf(it->second.state), /*release=*/true);
  nets_.erase(it);
  return st;
}

void NetworkIsolator::forgetFlows(const ExecutorAddresses& a, bool release, PortRanges ports) {
  unflushed_.push_back({{a, std::move(ports)}, release});
  if (!flushing_) flushFlows();
}

// One dump of the host's table serves every executor that ended since the
// last one: the flush thread never has more than one job.
void NetworkIsolator::flushFlows() {
  std::vector<Unflushed> batch = std::move(unflushed_);
  unflushed_.clear();
  std::vector<ExecutorFlows> flows;
  for (const auto& u : batch) flows.push_back(u.flows);
  std::function<Status()> job = [flusher = flusher_, flows = std::move(flows)] {
    auto flushed = flusher->flush(flows);
    return flushed ? okStatus() : Status(flushed.error());
  };
  flushing_ = true;
  auto done = [this, batch = std::move(batch)](Status st) {
    flushing_ = false;
    if (!st) LOG_WARNING("network/netns: conntrack of " << batch.size() << " executors: " << st.error().describe());
    for (const auto& u : batch) {
      if (u.release) pool_.release(u.flows.addresses.v4);
    }
    if (!unflushed_.empty()) flushFlows();
  };
  if (flushes_ && flushes_->submit<Status>(job, done)) return;
  done(job());  // no loop (tests, tools): here and now
}

Status NetworkIsolator::removeKernelObjects(const std::string& container, const NetState& s) {
  Status first = okStatus();
  auto keep = [&](Status st) {
    if (!st && first) first = st;
  };
  // Deleting an element that is not there fails the whole transaction, so
  // the elements go one by one.
  for (const auto& r : s.ports) {
    (void)nft_->run(deletePortsScript(rules_, addressesOf(s), PortRanges{r}));
  }
  // Normally reapJob() deleted it already; if_nametoindex asks without the
  // rtnl lock, so a cleanup after the reap does not wait behind a teardown.
  if (if_nametoindex(s.veth.c_str()) != 0) keep(host_.deleteLink(s.veth));
  if (::unlink((stateDir_ + "/" + container).c_str()) != 0 && errno != ENOENT) {
    keep(Error::fromErrno("removing " + stateDir_ + "/" + container));
  }
  return first;
}

Status NetworkIsolator::recover(const std::vector<KnownContainer>& known) {
  std::set<std::string> knownNames;
  for (const auto& k : known) knownNames.insert(k.id.name());
  std::set<std::string> keptVeths;
  if (warm_) {
    for (auto& veth : warm_->waitingVeths()) keptVeths.insert(veth);
  }
  ExecutorPorts ports;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(stateDir_, ec)) {
    std::string name = entry.path().filename();
    if (name.size() > 4 && name.substr(name.size() - 4) == ".tmp") {
      std::filesystem::remove(entry.path(), ec);
      continue;
    }
    auto state = parseState(entry.path());
    if (!state) {
      LOG_WARNING("network/netns: dropping " << state.error().describe());
      std::filesystem::remove(entry.path(), ec);
      continue;
    }
    bool claimed = pool_.claim(state->address);
    if (!knownNames.count(name) || nets_.count(name) || !claimed) {
      LOG_INFO("network/netns: removing the network of gone executor " << name << " ("
                                                                       << ipv4ToString(state->address) << ")");
      if (auto st = removeKernelObjects(name, *state); !st) LOG_WARNING("network/netns: " << st.error().describe());
      // Its address stays taken until its flows are gone.
      forgetFlows(addressesOf(*state), claimed);
      continue;
    }
    if (state->address6 && !(rules_.cidr6 && rules_.cidr6->contains(*state->address6))) {
      LOG_WARNING("network/netns: executor " << name << " keeps " << state->address6->toString()
                                             << " inside, outside --network-cidr6: not forwarded");
    }
    keptVeths.insert(state->veth);
    ports.push_back({addressesOf(*state), state->ports});
    nets_[name].state = *state;
  }
  if (auto onBridge = host_.bridgePorts(bridgeIndex_)) {
    for (const auto& veth : *onBridge) {
      if (keptVeths.count(veth)) continue;
      LOG_INFO("network/netns: removing leftover interface " << veth << " from " << options_.bridge);
      if (auto st = host_.deleteLink(veth); !st) LOG_WARNING("network/netns: " << st.error().describe());
    }
  }
  Status st = nft_->run(tableScript(rules_, ports));
  // The pool's addresses now come after every recovered one is claimed.
  if (warm_) warm_->refill();
  return st;
}

// The first word of a /proc/sys file ("" when unreadable).
std::string readNetFile(const std::string& path) {
  std::ifstream in(path);
  std::string word;
  in >> word;
  return word;
}

// The bridge's IPv6 side: its gateway address (no DAD: usable at once) and
// forwarding of what executors send. IPv6 forwarding is global before Linux
// 6.17 (net.ipv6.conf.all.forwarding, which also turns off router
// advertisements on every uplink): the agent never sets that; from 6.17 the
// bridge's own force_forwarding does it for this bridge only.
Status setUpBridge6(Netlink& host, int bridgeIndex, const std::string& bridge, const Ipv6Cidr& cidr6) {
  std::string conf = "/proc/sys/net/ipv6/conf/" + bridge;
  if (auto st = writeNetFile(conf + "/disable_ipv6", "0"); !st) return st;
  if (auto st = host.addAddress6(bridgeIndex, cidr6.gateway(), cidr6.prefixLength); !st) return st;
  if (::access((conf + "/force_forwarding").c_str(), F_OK) == 0) {
    if (auto st = writeNetFile(conf + "/force_forwarding", "1"); !st) return st;
  } else if (readNetFile("/proc/sys/net/ipv6/conf/all/forwarding") == "0") {
    LOG_WARNING("network/netns: net.ipv6.conf.all.forwarding is 0 and this kernel has no per-interface "
                "force_forwarding (Linux < 6.17): executors' IPv6 traffic reaches only this host");
  }
  return okStatus();
}

}  // namespace

std::string networkTableName(const NetworkOptions& o) {
  std::string t = "allot_" + o.bridge;
  for (char& c : t) {
    if (c == '-') c = '_';
  }
  return t;
}

std::string networkStateDir(const NetworkOptions& o) {
  return o.stateDir.empty() ? "/run/allot/network/" + o.bridge : o.stateDir;
}

void addNetworkFlags(Flags& flags, NetworkOptions* o) {
  flags.addString("network-bridge", &o->bridge,
                  "network/netns: the host bridge executors' veths join (created if missing)");
  flags.addString("network-cidr", &o->cidr,
                  "network/netns: executor address pool; the bridge holds its first address as gateway");
  flags.addString("network-cidr6", &o->cidr6,
                  "network/netns: an IPv6 prefix (/64../120) giving every executor a second address, at the "
                  "same offset as its IPv4 one; the bridge holds the first as gateway (default: IPv4 only)");
  flags.addDouble("network-egress-rate", &o->egressMbitPerS,
                  "network/netns: per-executor egress limit in Mbit/s (0: unlimited)");
  flags.addBool("network-allow-executor-traffic", &o->allowExecutorTraffic,
                "network/netns: executors may reach each other's unoffered ports");
  flags.addInt("network-warm-pool", &o->warmPool,
               "network/netns: executor networks (namespace, veth, address, route) made ahead of launches "
               "off the agent's loop, 0.." + std::to_string(kWarmPoolMax) + " (0: each launch makes its own)");
  flags.addString("network-state-dir", &o->stateDir,
                  "network/netns: address checkpoints (default /run/allot/network/<bridge>)");
}

Result<std::unique_ptr<Isolator>> makeNetworkIsolator(const NetworkOptions& o, asio::io_context* io) {
  if (!validBridgeName(o.bridge)) {
    return Error{"--network-bridge '" + o.bridge + "': 1..15 characters of [A-Za-z0-9_-]"};
  }
  auto cidr = Ipv4Cidr::parse(o.cidr);
  if (!cidr) return Error{"--network-cidr: " + cidr.error().describe()};
  std::optional<Ipv6Cidr> cidr6;
  if (!o.cidr6.empty()) {
    auto parsed = Ipv6Cidr::parse(o.cidr6);
    if (!parsed) return Error{"--network-cidr6: " + parsed.error().describe()};
    if (auto why = dualStackMismatch(*cidr, *parsed)) return Error{"--network-cidr6: " + *why};
    cidr6 = *parsed;
  }
  if (!(o.egressMbitPerS >= 0 && o.egressMbitPerS <= 100000)) {
    return Error{"--network-egress-rate must be in [0, 100000] Mbit/s"};
  }
  if (o.warmPool < 0 || o.warmPool > kWarmPoolMax) {
    return Error{"--network-warm-pool must be in [0, " + std::to_string(kWarmPoolMax) + "]"};
  }
  std::string dir = networkStateDir(o);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Error{"network/netns state dir " + dir + ": " + ec.message()};
  auto nft = Nftables::create();
  if (!nft) return nft.error();
  auto host = Netlink::open();
  if (!host) return host.error();
  auto bridge = host->ensureBridge(o.bridge);
  if (!bridge) return bridge.error();
  if (auto st = host->addAddress(*bridge, cidr->gateway(), cidr->prefixLength); !st) return st.error();
  // Forwarding on the bridge lets executors out; route_localnet lets
  // 127.0.0.1:port be DNATed to them (only on this bridge, CVE-2020-8558).
  std::string conf = "/proc/sys/net/ipv4/conf/" + o.bridge;
  for (const char* key : {"forwarding", "route_localnet"}) {
    if (auto st = writeNetFile(conf + "/" + key, "1"); !st) return st.error();
  }
  if (cidr6) {
    if (auto st = setUpBridge6(*host, *bridge, o.bridge, *cidr6); !st) return st.error();
  }
  NetworkRulesConfig rules{networkTableName(o), o.bridge, *cidr, o.allowExecutorTraffic, cidr6};
  if (!(*nft)->listTable(rules.table) || (cidr6 && !(*nft)->listTable(rules.table, "ip6"))) {
    if (auto st = (*nft)->run(tableScript(rules, {})); !st) {
      return Error{"network/netns: installing nftables table " + rules.table + ": " + st.error().describe()};
    }
  }
  std::ifstream forward("/proc/sys/net/ipv4/ip_forward");
  int on = 0;
  if (forward >> on && on == 0) {
    LOG_WARNING("network/netns: net.ipv4.ip_forward is 0: other hosts reach offered ports only through "
                "interfaces with net.ipv4.conf.<uplink>.forwarding=1");
  }
  return std::unique_ptr<Isolator>(
      new NetworkIsolator(o, std::move(rules), std::move(*host), *bridge, std::move(*nft), io));
}

Status removeNetwork(const NetworkOptions& o) {
  Status first = okStatus();
  auto nft = Nftables::create();
  if (nft) {
    NetworkRulesConfig rules{networkTableName(o), o.bridge, {}, false};
    if (auto st = (*nft)->run(dropTableScript(rules)); !st) first = st;
  }
  if (auto host = Netlink::open()) {
    if (auto st = host->deleteLink(o.bridge); !st && first) first = st;
  }
  std::error_code ec;
  std::filesystem::remove_all(networkStateDir(o), ec);
  return first;
}

}  // namespace allot
