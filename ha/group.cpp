#include "ha/group.h"

#include <algorithm>
#include <charconv>

#include "base/secrets.h"

namespace allot {

namespace {
constexpr std::string_view kPrefix = "member_";
constexpr size_t kSequenceDigits = 10;
}  // namespace

std::string memberPrefix(const std::string& guid) { return std::string(kPrefix) + guid + "_"; }

std::string newMemberGuid() {
  return randomHex(16);
}

std::vector<GroupMember> parseMembers(const std::vector<std::string>& children) {
  std::vector<GroupMember> members;
  for (const auto& name : children) {
    if (members.size() >= kMaxGroupMembers) break;
    if (name.rfind(kPrefix, 0) != 0 || name.size() < kPrefix.size() + kSequenceDigits + 1) continue;
    auto underscore = name.size() - kSequenceDigits - 1;
    if (name[underscore] != '_') continue;
    int64_t sequence = 0;
    const char* begin = name.data() + underscore + 1;
    const char* end = name.data() + name.size();
    auto [stop, ec] = std::from_chars(begin, end, sequence);
    if (ec != std::errc() || stop != end || sequence < 0) continue;
    members.push_back({name, name.substr(kPrefix.size(), underscore - kPrefix.size()), sequence});
  }
  std::sort(members.begin(), members.end(),
            [](const GroupMember& a, const GroupMember& b) { return a.sequence < b.sequence; });
  return members;
}

std::string encodeMemberData(const MemberData& member) {
  std::string data = "address=" + member.address.describe() + "\nid=" + member.masterId + "\n";
  if (member.http) data += "http=" + member.http->describe() + "\n";
  if (member.shards) data += "shards=" + member.shards->describe() + "\n";
  return data;
}

Result<MemberData> decodeMemberData(const std::string& data) {
  if (data.size() > kMaxMemberDataBytes) return Error{"member data larger than 4096 bytes"};
  MemberData out;
  bool haveAddress = false;
  size_t start = 0;
  while (start < data.size()) {
    size_t end = data.find('\n', start);
    if (end == std::string::npos) end = data.size();
    std::string line = data.substr(start, end - start);
    start = end + 1;
    if (line.rfind("address=", 0) == 0) {
      auto endpoint = parseEndpoint(line.substr(8));
      if (!endpoint) return endpoint.error();
      out.address = *endpoint;
      haveAddress = true;
    } else if (line.rfind("id=", 0) == 0) {
      out.masterId = line.substr(3);
    } else if (line.rfind("http=", 0) == 0) {
      // Optional: a bad one must not hide the protocol address from
      // agents and schedulers, so it only leaves `http` unset.
      auto endpoint = parseEndpoint(line.substr(5));
      if (endpoint && endpoint->kind == Endpoint::Kind::kTcp) out.http = *endpoint;
    } else if (line.rfind("shards=", 0) == 0) {
      auto endpoint = parseEndpoint(line.substr(7));
      if (endpoint && endpoint->kind == Endpoint::Kind::kTcp) out.shards = *endpoint;
    }
  }
  if (!haveAddress) return Error{"member data has no address= line"};
  return out;
}

}  // namespace allot
