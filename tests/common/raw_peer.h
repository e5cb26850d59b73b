// RawPeer: a blocking loopback client that speaks raw frames to a master,
// for tests that must send what no SDK would (hostile frames, accepts that
// break the rules, floods) and read exactly what comes back.
//
// Thread: one thread sends and one reads (send() and the reads share
// nothing but the socket).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <string>

#include "proto/allot.pb.h"
#include "proto/connection.h"
#include "proto/frame.h"

namespace allot::testing {

class RawPeer {
 public:
  // Connects to 127.0.0.1:`port` and, unless `role` is ROLE_UNKNOWN, says
  // hello as `role`. A read waits at most `readTimeout` for bytes.
  RawPeer(uint16_t port, wire::Role role,
          std::chrono::milliseconds readTimeout = std::chrono::seconds(5)) {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    setReadTimeout(readTimeout);
    connected_ = connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    if (connected_ && role != wire::ROLE_UNKNOWN) send(helloEnvelope(role, "raw-peer-test"));
  }
  ~RawPeer() { close(fd_); }
  RawPeer(const RawPeer&) = delete;
  RawPeer& operator=(const RawPeer&) = delete;
  bool connected() const { return connected_; }
  // Ends the link both ways; blocked sends and reads return.
  void shutdown() { ::shutdown(fd_, SHUT_RDWR); }

  void setReadTimeout(std::chrono::milliseconds timeout) {
    timeval tv{static_cast<time_t>(timeout.count() / 1000),
               static_cast<suseconds_t>(timeout.count() % 1000 * 1000)};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }

  // False when `e` cannot be framed (too large) or the link is gone.
  bool send(const wire::Envelope& e) {
    std::string bytes;
    if (!appendFrame(e, &bytes).ok()) return false;
    return sendRaw(bytes);
  }
  bool sendRaw(const std::string& bytes) {
    size_t done = 0;
    while (done < bytes.size()) {
      ssize_t n = ::send(fd_, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
      if (n <= 0) return false;  // the master may close first; reading tells
      done += static_cast<size_t>(n);
    }
    return true;
  }

  // Reads until a frame of `kind` arrives (returned), the link closes, a
  // read times out or `deadline` passes (nullopt).
  std::optional<wire::Envelope> waitFor(
      wire::Envelope::BodyCase kind,
      std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max()) {
    wire::Envelope e;
    while (true) {
      auto got = decoder_.next(&e);
      if (!got.ok()) return std::nullopt;
      if (*got) {
        if (e.body_case() == kind) return e;
        continue;
      }
      if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
      char buf[65536];
      ssize_t n = recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) {
        closed_ = n == 0;
        return std::nullopt;
      }
      decoder_.append(buf, static_cast<size_t>(n));
    }
  }
  // True when the master closed the link (EOF) within the read timeout.
  bool closedByMaster() {
    while (waitFor(wire::Envelope::kHelloRejected)) {
    }
    return closed_;
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
  bool closed_ = false;
  FrameDecoder decoder_;
};

// A RegisterFramework; `needsOffers` false: registered with offers
// suppressed (RegisterFramework.needs_offers), as proto3's default says.
inline wire::Envelope registerFramework(const std::string& id = "", const std::string& secret = "",
                                        bool needsOffers = false) {
  wire::Envelope e;
  e.mutable_register_framework()->mutable_info()->set_name("hostile");
  e.mutable_register_framework()->mutable_info()->set_id(id);
  e.mutable_register_framework()->set_framework_secret(secret);
  e.mutable_register_framework()->set_needs_offers(needsOffers);
  return e;
}

}  // namespace allot::testing
