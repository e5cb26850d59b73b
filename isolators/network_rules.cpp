#include "isolators/network_rules.h"

#include <nftables/libnftables.h>

namespace allot {
namespace {

std::string interval(const std::pair<uint64_t, uint64_t>& r) {
  return r.first == r.second ? std::to_string(r.first) : std::to_string(r.first) + "-" + std::to_string(r.second);
}

// What differs between the ip and the ip6 table.
struct Family {
  const char* name;      // the table's family, and the match prefix ("ip", "ip6")
  const char* addrType;  // "ipv4_addr", "ipv6_addr"
  std::string cidr;
};

Family v4(const NetworkRulesConfig& c) { return {"ip", "ipv4_addr", c.cidr.toString()}; }
Family v6(const NetworkRulesConfig& c) { return {"ip6", "ipv6_addr", c.cidr6 ? c.cidr6->toString() : ""}; }

// "31000-31010 : 10.77.0.5, 31020 : 10.77.0.5"
std::string mapElements(const std::string& address, const PortRanges& ports) {
  std::string out;
  for (const auto& r : ports) out += (out.empty() ? "" : ", ") + interval(r) + " : " + address;
  return out;
}

// "10.77.0.5 . 31000-31010, 10.77.0.5 . 31020"
std::string setElements(const std::string& address, const PortRanges& ports) {
  std::string out;
  for (const auto& r : ports) out += (out.empty() ? "" : ", ") + address + " . " + interval(r);
  return out;
}

std::string familyElements(const char* verb, const NetworkRulesConfig& c, const char* family,
                           const std::string& address, const PortRanges& ports) {
  std::string head = std::string(verb) + " element " + family + " " + c.table;
  return head + " ports { " + mapElements(address, ports) + " }\n" + head + " offered { " +
         setElements(address, ports) + " }\n";
}

std::string elementsScript(const char* verb, const NetworkRulesConfig& c, const ExecutorAddresses& a,
                           const PortRanges& ports) {
  if (ports.empty()) return "";
  std::string s = familyElements(verb, c, "ip", ipv4ToString(a.v4), ports);
  // A recovered executor's address outside today's prefix has no ip6 rules.
  if (c.cidr6 && a.v6 && c.cidr6->contains(*a.v6)) s += familyElements(verb, c, "ip6", a.v6->toString(), ports);
  return s;
}

std::string replaceTable(const NetworkRulesConfig& c, const Family& f) {
  std::string br = "\"" + c.bridge + "\"";
  std::string m = f.name;
  std::string s = "add table " + m + " " + c.table + "\ndelete table " + m + " " + c.table + "\n";
  s += "table " + m + " " + c.table + " {\n";
  s += "  map ports { type inet_service : " + std::string(f.addrType) + "; flags interval; }\n";
  s += "  set offered { type " + std::string(f.addrType) + " . inet_service; flags interval; }\n";
  std::string dnat = "    fib daddr type local meta l4proto { tcp, udp } dnat " + m + " to th dport map @ports\n";
  s += "  chain pre { type nat hook prerouting priority dstnat; policy accept;\n" + dnat + "  }\n";
  // nft 1.0.6 refuses the symbolic dstnat priority on an output chain.
  s += "  chain out { type nat hook output priority -100; policy accept;\n" + dnat + "  }\n";
  s += "  chain post { type nat hook postrouting priority srcnat; policy accept;\n"
       "    " + m + " saddr " + f.cidr + " " + m + " daddr != " + f.cidr + " masquerade\n";
  // 127.0.0.1 reaches executors through route_localnet; IPv6 has no such
  // switch (a ::1 source never leaves lo), so the ip6 table has no rule for it.
  if (m == "ip") s += "    ip saddr 127.0.0.0/8 ip daddr " + f.cidr + " masquerade\n";
  s += "  }\n";
  s += "  chain between { type filter hook forward priority filter; policy accept;\n";
  if (!c.allowExecutorTraffic) {
    s += "    iifname " + br + " oifname " + br + " ct state established,related accept\n"
         "    iifname " + br + " oifname " + br + " ct status dnat accept\n"
         "    iifname " + br + " oifname " + br + " meta l4proto { tcp, udp } " + m +
         " daddr . th dport @offered accept\n"
         "    iifname " + br + " oifname " + br + " drop\n";
  }
  s += "  }\n}\n";
  return s;
}

std::string dropFamily(const NetworkRulesConfig& c, const char* family) {
  return std::string("add table ") + family + " " + c.table + "\ndelete table " + family + " " + c.table + "\n";
}

}  // namespace

std::string tableScript(const NetworkRulesConfig& c, const ExecutorPorts& ports) {
  std::string s = replaceTable(c, v4(c));
  s += c.cidr6 ? replaceTable(c, v6(c)) : dropFamily(c, "ip6");
  for (const auto& [addresses, ranges] : ports) s += addPortsScript(c, addresses, ranges);
  return s;
}

std::string addPortsScript(const NetworkRulesConfig& c, const ExecutorAddresses& a, const PortRanges& ports) {
  return elementsScript("add", c, a, ports);
}

std::string deletePortsScript(const NetworkRulesConfig& c, const ExecutorAddresses& a, const PortRanges& ports) {
  return elementsScript("delete", c, a, ports);
}

std::string dropTableScript(const NetworkRulesConfig& c) { return dropFamily(c, "ip") + dropFamily(c, "ip6"); }

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

Result<std::string> Nftables::listTable(const std::string& table, const std::string& family) {
  if (auto st = run("list table " + family + " " + table); !st) return st.error();
  return std::string(nft_ctx_get_output_buffer(ctx_));
}

}  // namespace allot
