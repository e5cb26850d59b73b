#include "isolators/network_rules.h"

#include <nftables/libnftables.h>

namespace allot {
namespace {

std::string interval(const std::pair<uint64_t, uint64_t>& r) {
  return r.first == r.second ? std::to_string(r.first) : std::to_string(r.first) + "-" + std::to_string(r.second);
}

// "31000-31010 : 10.77.0.5, 31020 : 10.77.0.5"
std::string mapElements(uint32_t address, const PortRanges& ports) {
  std::string out;
  for (const auto& r : ports) out += (out.empty() ? "" : ", ") + interval(r) + " : " + ipv4ToString(address);
  return out;
}

// "10.77.0.5 . 31000-31010, 10.77.0.5 . 31020"
std::string setElements(uint32_t address, const PortRanges& ports) {
  std::string out;
  for (const auto& r : ports) out += (out.empty() ? "" : ", ") + ipv4ToString(address) + " . " + interval(r);
  return out;
}

std::string elementsScript(const char* verb, const NetworkRulesConfig& c, uint32_t address,
                           const PortRanges& ports) {
  if (ports.empty()) return "";
  return std::string(verb) + " element ip " + c.table + " ports { " + mapElements(address, ports) + " }\n" +
         verb + " element ip " + c.table + " offered { " + setElements(address, ports) + " }\n";
}

}  // namespace

std::string tableScript(const NetworkRulesConfig& c, const std::map<uint32_t, PortRanges>& ports) {
  std::string cidr = c.cidr.toString();
  std::string br = "\"" + c.bridge + "\"";
  std::string s = "add table ip " + c.table + "\ndelete table ip " + c.table + "\n";
  s += "table ip " + c.table + " {\n";
  s += "  map ports { type inet_service : ipv4_addr; flags interval; }\n";
  s += "  set offered { type ipv4_addr . inet_service; flags interval; }\n";
  s += "  chain pre { type nat hook prerouting priority dstnat; policy accept;\n"
       "    fib daddr type local meta l4proto { tcp, udp } dnat ip to th dport map @ports\n  }\n";
  // nft 1.0.6 refuses the symbolic dstnat priority on an output chain.
  s += "  chain out { type nat hook output priority -100; policy accept;\n"
       "    fib daddr type local meta l4proto { tcp, udp } dnat ip to th dport map @ports\n  }\n";
  s += "  chain post { type nat hook postrouting priority srcnat; policy accept;\n"
       "    ip saddr " + cidr + " ip daddr != " + cidr + " masquerade\n"
       "    ip saddr 127.0.0.0/8 ip daddr " + cidr + " masquerade\n  }\n";
  s += "  chain between { type filter hook forward priority filter; policy accept;\n";
  if (!c.allowExecutorTraffic) {
    s += "    iifname " + br + " oifname " + br + " ct state established,related accept\n"
         "    iifname " + br + " oifname " + br + " ct status dnat accept\n"
         "    iifname " + br + " oifname " + br + " meta l4proto { tcp, udp } ip daddr . th dport @offered accept\n"
         "    iifname " + br + " oifname " + br + " drop\n";
  }
  s += "  }\n}\n";
  for (const auto& [address, ranges] : ports) s += addPortsScript(c, address, ranges);
  return s;
}

std::string addPortsScript(const NetworkRulesConfig& c, uint32_t address, const PortRanges& ports) {
  return elementsScript("add", c, address, ports);
}

std::string deletePortsScript(const NetworkRulesConfig& c, uint32_t address, const PortRanges& ports) {
  return elementsScript("delete", c, address, ports);
}

std::string dropTableScript(const NetworkRulesConfig& c) {
  return "add table ip " + c.table + "\ndelete table ip " + c.table + "\n";
}

Result<std::unique_ptr<Nftables>> Nftables::create() {
  nft_ctx* ctx = nft_ctx_new(NFT_CTX_DEFAULT);
  if (!ctx) return Error{"libnftables: nft_ctx_new failed"};
  nft_ctx_buffer_output(ctx);
  nft_ctx_buffer_error(ctx);
  return std::unique_ptr<Nftables>(new Nftables(ctx));
}

Nftables::~Nftables() { nft_ctx_free(ctx_); }

Status Nftables::run(const std::string& script) {
  if (script.empty()) return okStatus();
  if (nft_run_cmd_from_buffer(ctx_, script.c_str()) != 0) {
    std::string why = nft_ctx_get_error_buffer(ctx_);
    while (!why.empty() && why.back() == '\n') why.pop_back();
    return Error{"nft: " + why};
  }
  return okStatus();
}

Result<std::string> Nftables::listTable(const std::string& table) {
  if (auto st = run("list table ip " + table); !st) return st.error();
  return std::string(nft_ctx_get_output_buffer(ctx_));
}

}  // namespace allot
