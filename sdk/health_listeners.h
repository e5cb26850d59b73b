// Whether a TCP connection to 127.0.0.1:port would be accepted now, asked
// of the kernel's socket table (sock_diag, what ss(8) reads) in the calling
// thread's network namespace instead of made: what a TCP health check
// (sdk/health_check.h) wants to know, at a fraction of a connection's cost.
//
// A connection to 127.0.0.1:port completes (the kernel answers the
// handshake; the server need not call accept) when a listener is bound to
// that port on 0.0.0.0, 127.0.0.1, :: without IPV6_V6ONLY or
// ::ffff:127.0.0.1, is not bound to a device other than lo, and its accept
// queue is not full. That is what is counted here. What the table cannot
// see (a firewall rule dropping loopback traffic in the namespace) a
// connection would.
//
// One netlink socket, opened on first use. A dump walks the kernel's whole
// listening hash whatever it keeps, so one dump of every listener (IPv4 and
// IPv6) answers every question for kListenerDumpMaxAge: checks of a
// thousand tasks cost a few dumps a second, not one each. Thread: any one
// thread at a time; the answer is immediate (the kernel builds a dump while
// it is read), so it is safe on a loop.
#pragma once

#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

#include "base/clock.h"
#include "base/result.h"
#include "base/unique_fd.h"

namespace allot {

// Listeners a dump may list; past it the table answers an error (and
// checks connect instead) rather than judge on part of the namespace.
inline constexpr uint32_t kHealthListenersMax = 16384;
// How old an answer may be: well under any check's interval.
inline constexpr Duration kListenerDumpMaxAge = std::chrono::milliseconds(20);

struct LoopbackListeners {
  uint32_t listeners = 0;  // that a connection to 127.0.0.1:port would reach
  uint32_t accepting = 0;  // of those, with room in their accept queue
};

// What a TCP check asks (sdk/health_check.h makeTcpProbe): the kernel's
// table below, or a twin.
class ListenerSource {
 public:
  virtual ~ListenerSource() = default;
  // An error means the table could not be asked (no sock_diag for TCP in
  // this kernel, or the dump broke off); ask by connecting instead.
  [[nodiscard]] virtual Result<LoopbackListeners> loopback(uint16_t port, TimePoint now) = 0;
};

class ListenerTable final : public ListenerSource {
 public:
  // Answers from a dump made at most kListenerDumpMaxAge before `now`.
  [[nodiscard]] Result<LoopbackListeners> loopback(uint16_t port, TimePoint now) override;

 private:
  [[nodiscard]] Result<void> refresh();
  [[nodiscard]] Result<void> dump(int family);
  [[nodiscard]] Result<bool> readAnswer(uint32_t sequence);

  UniqueFd socket_;
  uint32_t sequence_ = 0;
  std::vector<char> buffer_;
  std::unordered_map<uint16_t, LoopbackListeners> ports_;
  uint32_t listed_ = 0;
  std::optional<TimePoint> dumpedAt_;
};

}  // namespace allot
