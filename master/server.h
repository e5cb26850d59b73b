// MasterServer: the master's sockets and timers around the Master state
// machine. Accepts TCP connections, runs the handshake (schedulers and
// agents only; at most maxPendingHandshakes at once, the rest wait in the
// listen backlog), feeds messages to Master, ticks it every kTickInterval and
// runs an event-driven allocation round soon after any event that freed
// resources (coalesced: a burst of events costs one round).
//
// Thread: everything on the given io_context, which one thread runs.
#pragma once

#include <memory>
#include <unordered_map>

#include "base/asio.h"
#include "base/clock.h"
#include "base/flags.h"
#include "diag/loop_sections.h"
#include "diag/loop_stall_meter.h"
#include "master/master.h"
#include "master/role_settings.h"
#include "master/shard_hub.h"
#include "proto/connection.h"

namespace allot {

// The default bound on unfinished handshakes. A mutual TLS handshake costs
// the master ~1.3 ms of CPU on a quiet machine and ~14 ms of wall clock at
// load 24 (docs/benchmarks.md "TLS handshakes"), and the master works on all
// pending ones at once: 128 in flight finish within ~0.2 s quiet and ~1.8 s
// loaded, far inside the peers' 10 s handshake timeout. Registrations/s
// were the same with 64 and 256 (2,000 TLS agents, load 24), so the bound
// costs no throughput.
constexpr size_t kMaxPendingHandshakes = 128;

struct ServerOptions {
  HostPort listen{"127.0.0.1", 5050};
  size_t maxFrameBytes = kMaxFrameBytes;
  size_t maxPeers = 200000;
  // Connections accepted but not yet through TLS + Hello. At this many the
  // master stops accepting: further connections wait in the kernel's listen
  // backlog until a pending one finishes or times out (docs/decisions.md).
  size_t maxPendingHandshakes = kMaxPendingHandshakes;
  // TLS handshake + Hello must complete within this (Connection's timer).
  std::chrono::milliseconds handshakeTimeout = std::chrono::seconds(10);
  // A "stats:" log line this often (0: never): peers, messages per second.
  Duration statsInterval = std::chrono::seconds(60);
  // Null: plaintext. Otherwise every peer must complete mutual TLS with
  // this server context (proto/tls.h).
  std::shared_ptr<ssl::context> tls;
  // The leader epoch every Hello to a peer carries (ZooKeeper election;
  // 0 standalone).
  uint64_t leaderEpoch = 0;
  // Where link shards connect (master/shard_hub.h); empty host: no shards.
  HostPort shardListen;
};

// What the master's loop spends its time on (LoopSections): the sections
// a late tick of the loop's stall meter is attributed to.
enum class LoopSection : size_t { kMessage, kPeerChange, kTick, kAllocate, kAccept, kStateSlice,
                                  kStatePieces, kMetrics, kRoles };
LoopSections makeMasterLoopSections();

class MasterServer final : public Outbox {
 public:
  static Result<std::unique_ptr<MasterServer>> create(asio::io_context& io, ServerOptions options,
                                                      MasterOptions masterOptions);

  uint16_t port() const { return port_; }
  // The --shard-listen port; 0 without shards.
  uint16_t shardPort() const { return shards_ ? shards_->port() : 0; }
  const ShardHub* shards() const { return shards_.get(); }
  size_t pendingHandshakes() const { return pendingHandshakes_; }
  Master& master() { return *master_; }
  // Run-time role settings: main() loads them (RoleSettingsKeeper::load)
  // before start() (standalone) or with offers held (a new leader), so the
  // first allocation already uses them.
  RoleSettingsKeeper& roleSettings() { return *roleSettings_; }
  // Listening starts in create(); peers are accepted from start() on (a
  // standby master calls it once elected, with its epoch).
  void setLeaderEpoch(uint64_t epoch) { options_.leaderEpoch = epoch; }
  uint64_t leaderEpoch() const { return options_.leaderEpoch; }
  void start();
  void stop();

  // Runs an allocation round soon if the master wants one (after an
  // operator action changed state outside a peer's message).
  void kick() { afterEvent(); }

  // Times the caller's scope as `section` of the loop's time.
  LoopSections::Timer timed(LoopSection section) { return sections_.time(static_cast<size_t>(section)); }
  LoopSections& loopSections() { return sections_; }
  // The loop's stall meter ran its latest tick `lateS` late: counted on
  // /metrics (LoopMetrics::meterTicked); a tick 10 ms late or more is
  // logged with its number (the bench places it in its windows by
  // allot_master_loop_lateness_seconds_count), its wait for a CPU and the
  // top three sections: at most once a second, except a tick later than
  // the last one logged.
  void loopTicked(const LoopStallMeter& meter, double lateS);

  void send(PeerId peer, const wire::Envelope& envelope) override;
  void close(PeerId peer, const std::string& reason) override;
  void changedOutsideEvent() override { afterEvent(); }
  TimePoint heardUpTo(PeerId peer, TimePoint now) const override;

 private:
  static constexpr auto kTickInterval = std::chrono::milliseconds(100);
  // Connections taken from the listen backlog per accept completion. One
  // accept per pass of the loop lets a failover's thousands of
  // re-registering peers overflow the backlog (SYNs dropped, a second or
  // more of retransmission each) while the loop serves those already in.
  static constexpr int kAcceptBatch = 256;

  MasterServer(asio::io_context& io, ServerOptions options);
  void acceptNext();
  void acceptPending();
  void onAccepted(asio::ip::tcp::socket socket);
  bool acceptAllowed() const;
  void handshakeEnded();
  void scheduleTick();
  void afterEvent();
  void scheduleStats();

  asio::io_context& io_;
  ServerOptions options_;
  SystemClock clock_;
  asio::ip::tcp::acceptor acceptor_;
  asio::steady_timer tickTimer_;
  asio::steady_timer statsTimer_;
  asio::steady_timer acceptPause_;
  uint64_t messagesIn_ = 0;
  uint64_t messagesOut_ = 0;
  TimePoint statsSince_;
  std::unique_ptr<Master> master_;
  std::unique_ptr<RoleSettingsKeeper> roleSettings_;
  std::unique_ptr<ShardHub> shards_;
  std::unordered_map<PeerId, std::shared_ptr<Connection>> connections_;
  // Connections in connections_ whose TLS + Hello has not finished.
  size_t pendingHandshakes_ = 0;
  size_t pendingHandshakesMax_ = 0;
  // No accept outstanding because pendingHandshakes_ reached the limit.
  bool acceptPaused_ = false;
  PeerId nextPeer_ = 1;
  uint16_t port_ = 0;
  bool allocationPosted_ = false;
  bool stopped_ = false;
  LoopSections sections_ = makeMasterLoopSections();
  std::chrono::steady_clock::time_point lastLateLog_;
  double lastLateLoggedS_ = 0;
};

}  // namespace allot
