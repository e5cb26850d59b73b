// ZooKeeperDetector: the LeaderDetector (proto/leader.h) for
// "zk://host:port,.../path". Watches the masters' contender group
// (ha/group.h) and reports its lowest member: the master's address, its id
// and the leader epoch (the member znode's czxid).
//
// Reports:
//   - a Leader each time the lowest member changes; the member next in line
//     is read ahead, so when the leader leaves, the listing alone names its
//     successor (no read at the moment of the failover);
//   - nullopt when the group is empty or missing, or the session expired
//     (a new session then starts and detection resumes).
// A lost link to ZooKeeper changes nothing by itself: the client keeps the
// last leader (it also learns of a new one from the masters' Hellos) until
// ZooKeeper says otherwise. A reported leader never has a lower epoch than
// an earlier report: answers that arrive out of order are dropped.
//
// Thread: the io_context thread.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "base/asio.h"
#include "ha/zk_session.h"
#include "ha/zk_session_cycle.h"
#include "proto/leader.h"

namespace allot {

class ZooKeeperDetector final : public LeaderDetector {
 public:
  ZooKeeperDetector(asio::io_context& io, ZkSessionFactory sessions, std::string groupPath,
                    std::string description);

  void start(Callback onLeader) override;
  std::string describe() const override { return description_; }

 private:
  void newSession();
  void onEvent(const ZkEvent& event);
  void list();
  void read(const std::string& member, uint64_t listing, const std::string& next);
  std::optional<Leader> decode(const std::string& member, const std::string& data,
                               const ZkStat& stat) const;
  bool accept(const std::string& member, const Leader& leader);
  void readAhead(const std::string& next);
  void report(const std::optional<Leader>& leader);

  asio::io_context& io_;
  std::string groupPath_;
  std::string description_;
  Callback onLeader_;
  uint64_t listing_ = 0;        // the latest listing; older answers are stale
  std::string currentMember_;   // znode name of the reported leader
  std::optional<Leader> current_;
  // The member next in line, read ahead (name, what it would report).
  std::optional<std::pair<std::string, Leader>> successor_;
  std::string readingAhead_;    // a read ahead under way for this member
  bool reported_ = false;
  uint64_t highestEpoch_ = 0;
  ZkSessionCycle zk_;  // last: its session goes first, before what its answers touch
};

// The detector for `url` (already checked with parseZkUrl), with the
// detectors' session timeout.
std::unique_ptr<LeaderDetector> makeZooKeeperDetector(asio::io_context& io, const ZkUrl& url,
                                                      const std::string& description);

// Clients detect with a longer session than masters contend with: they also
// learn of a new leader from its messages (docs/decisions.md).
constexpr auto kDetectorSessionTimeout = std::chrono::seconds(10);

}  // namespace allot
