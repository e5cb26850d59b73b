// SystemdNotifier: sd_notify(3) from a daemon's own loop. Outside systemd
// (no $NOTIFY_SOCKET) every call is a no-op.
//
//   SystemdNotifier notifier(io);   // starts watchdog pings if $WATCHDOG_USEC
//   notifier.status("waiting for the master");
//   notifier.ready("registered as agent A1");   // READY=1 + STATUS=
//   notifier.stopping();
//
// The watchdog keep-alive (WATCHDOG=1) is sent from a timer on the same
// io_context at half of $WATCHDOG_USEC (sd_watchdog_enabled(3)), so a
// wedged loop stops the pings and systemd restarts the daemon.
//
// Thread: the io_context's thread.
#pragma once

#include <chrono>
#include <string_view>

#include "base/asio.h"

namespace allot {

class SystemdNotifier {
 public:
  explicit SystemdNotifier(asio::io_context& io);

  bool underSystemd() const { return enabled_; }
  std::chrono::microseconds watchdogInterval() const { return watchdog_; }

  void ready(std::string_view status);
  void status(std::string_view status);
  void stopping();

 private:
  void send(const std::string& state);
  void ping();

  asio::steady_timer timer_;
  std::chrono::microseconds watchdog_{0};
  bool enabled_ = false;
};

}  // namespace allot
