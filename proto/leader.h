// Where the current leading master is, and how clients learn of changes.
//
// Every client of a master (the agent's master link, the scheduler SDK,
// allot-execute) and the executor's link to its agent connect through a
// ReconnectingLink (proto/reconnecting_link.h) fed by a LeaderDetector:
//   - a fixed detector for "host:port" (or "unix:/path", "tcp:host:port"),
//     which reports that one endpoint once, with epoch 0;
//   - a ZooKeeper detector for "zk://host:port,.../path" (ha/zk_detector.h),
//     which watches the masters' contender group and reports each new leader.
// ha/detector_factory.h picks one from a --master / --zk value.
//
// Design and the reasons for it: docs/links.md.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "base/asio.h"
#include "base/result.h"

namespace allot {

// A stream endpoint: TCP host:port or a Unix socket path.
struct Endpoint {
  enum class Kind { kTcp, kUnix };
  Kind kind = Kind::kTcp;
  std::string host;   // kTcp: a numeric address or a name
  uint16_t port = 0;  // kTcp
  std::string path;   // kUnix

  std::string describe() const;  // "10.0.0.1:5050" or "unix:/run/x.sock"
  bool operator==(const Endpoint&) const = default;
};

// Parses "host:port", "tcp:host:port" or "unix:/path". Clear error otherwise.
Result<Endpoint> parseEndpoint(std::string_view text);

// A leading master as a detector sees it.
struct Leader {
  Endpoint endpoint;
  uint64_t epoch = 0;  // ZooKeeper election epoch; 0 for a fixed address
  std::string id;      // the master's id when the detector knows it, else empty
  // Where link shards reach it (its --shard-listen), when the detector
  // knows and it takes shards; ZooKeeper only.
  std::optional<Endpoint> shards;

  bool operator==(const Leader&) const = default;
};

class LeaderDetector {
 public:
  using Callback = std::function<void(const std::optional<Leader>&)>;

  // Stops detection; no callback runs after the destructor returns.
  virtual ~LeaderDetector() = default;

  // Called once. `onLeader` runs on the io_context thread each time the
  // leader changes, with nullopt while no leader is known. The first report
  // may come from inside start() or later.
  virtual void start(Callback onLeader) = 0;

  // What the operator gave ("127.0.0.1:5050", "zk://.../allot"), for logs.
  virtual std::string describe() const = 0;
};

// Reports `endpoint` (epoch 0) once, posted to `io` after start().
std::unique_ptr<LeaderDetector> makeFixedDetector(asio::io_context& io, Endpoint endpoint);

}  // namespace allot
