#include "systemd/notify.h"

#include <cstdlib>
#include <string>

#include <systemd/sd-daemon.h>

#include "base/log.h"

namespace allot {

SystemdNotifier::SystemdNotifier(asio::io_context& io) : timer_(io) {
  const char* socket = std::getenv("NOTIFY_SOCKET");
  enabled_ = socket && *socket;
  uint64_t usec = 0;
  // > 0 only when $WATCHDOG_USEC is set and $WATCHDOG_PID is unset or ours.
  if (sd_watchdog_enabled(0, &usec) > 0 && usec > 0) {
    watchdog_ = std::chrono::microseconds(usec);
    LOG_INFO("systemd watchdog every " << usec / 1000 << " ms; pinging at half of it");
    ping();
  }
}

void SystemdNotifier::send(const std::string& state) {
  if (!enabled_) return;
  int rc = sd_notify(0, state.c_str());
  if (rc < 0) LOG_WARNING("sd_notify(" << state.substr(0, state.find('\n')) << "): " << -rc);
}

void SystemdNotifier::ready(std::string_view status) {
  send("READY=1\nSTATUS=" + std::string(status));
}

void SystemdNotifier::status(std::string_view status) { send("STATUS=" + std::string(status)); }

void SystemdNotifier::stopping() { send("STOPPING=1"); }

void SystemdNotifier::ping() {
  send("WATCHDOG=1");
  timer_.expires_after(watchdog_ / 2);
  timer_.async_wait([this](const boost::system::error_code& ec) {
    if (!ec) ping();
  });
}

}  // namespace allot
