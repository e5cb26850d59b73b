// The nftables side of network/netns: one `table ip <name>` per agent
// bridge, and with --network-cidr6 a `table ip6 <name>` of the same shape
// for the executors' IPv6 addresses (see docs/decisions.md), each holding
//   map ports     host port interval -> executor address (DNAT, same port)
//   set offered   executor address . port interval (executor-to-executor)
//   chain pre     prerouting DNAT of the host's local addresses (other hosts)
//   chain out     output DNAT (connections made on the host, 127.0.0.1)
//   chain post    masquerade: executors to the outside, 127.0.0.1 to executors
//   chain between forward filter bridge -> bridge: executors reach each other
//                 only on offered ports (unless allowed), replies and
//                 DNATed flows pass.
// Chains are static; launches and ends only add and delete map and set
// elements. Text is applied in-process through libnftables (one netlink
// transaction per call: all of it or nothing). See docs/decisions.md.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/result.h"
#include "isolators/network_pool.h"
#include "proto/resources.h"

struct nft_ctx;

namespace allot {

struct NetworkRulesConfig {
  std::string table;   // "allot_<bridge>"
  std::string bridge;  // the agent's bridge
  Ipv4Cidr cidr;
  bool allowExecutorTraffic = false;
  std::optional<Ipv6Cidr> cidr6;  // --network-cidr6: the ip6 table exists
};

// Offered port ranges of one executor (the `ports` resource).
using PortRanges = Resources::Ranges;

using ExecutorPorts = std::vector<std::pair<ExecutorAddresses, PortRanges>>;

// Both tables, replacing whatever was there, atomically (one script, one
// transaction): "add table; delete table; table { ... }" with every
// executor's elements; without cidr6 the ip6 table is deleted (a previous
// configuration's).
std::string tableScript(const NetworkRulesConfig& config, const ExecutorPorts& ports);
// Element changes for one executor (empty string when `ports` is empty);
// its IPv6 elements only when both the executor and the config have IPv6.
std::string addPortsScript(const NetworkRulesConfig& config, const ExecutorAddresses& address,
                           const PortRanges& ports);
std::string deletePortsScript(const NetworkRulesConfig& config, const ExecutorAddresses& address,
                              const PortRanges& ports);
// The same for an executor with an IPv4 address only.
inline std::string addPortsScript(const NetworkRulesConfig& config, uint32_t address, const PortRanges& ports) {
  return addPortsScript(config, ExecutorAddresses{address, std::nullopt}, ports);
}
inline std::string deletePortsScript(const NetworkRulesConfig& config, uint32_t address, const PortRanges& ports) {
  return deletePortsScript(config, ExecutorAddresses{address, std::nullopt}, ports);
}
// Deletes both tables (nothing if they do not exist).
std::string dropTableScript(const NetworkRulesConfig& config);

// A libnftables context. Thread: one at a time (the agent's loop).
class Nftables {
 public:
  static Result<std::unique_ptr<Nftables>> create();
  ~Nftables();
  // Runs an nft script; the error carries nft's own message.
  Status run(const std::string& script);
  // `nft list table <family> <table>`'s output, or an error if it does not
  // exist.
  Result<std::string> listTable(const std::string& table, const std::string& family = "ip");

 private:
  explicit Nftables(nft_ctx* ctx) : ctx_(ctx) {}
  nft_ctx* ctx_;
};

}  // namespace allot
