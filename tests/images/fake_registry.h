// A scripted HTTP server for the registry behaviours a real registry will
// not show: a blob that stalls mid-body, sizes that lie, bearer-token
// challenges. Paths map to canned answers; one connection at a time, each
// closed after its answer. Loopback, port 0.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <mutex>
#include <string>
#include <thread>

namespace allot::testing {

class FakeRegistry {
 public:
  struct Answer {
    unsigned status = 200;
    std::string contentType = "application/octet-stream";
    std::string body;
    // Bytes of the body sent before the server goes silent (npos: all).
    size_t stallAfter = std::string::npos;
    std::string extraHeaders;  // "Name: value\r\n" lines
  };

  FakeRegistry() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    ::listen(fd_, 64);
    socklen_t len = sizeof(addr);
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~FakeRegistry() {
    stop_ = true;
    thread_.join();
    ::close(fd_);
  }

  uint16_t port() const { return port_; }
  std::string registry() const { return "127.0.0.1:" + std::to_string(port_); }

  void set(const std::string& path, Answer answer) {
    std::lock_guard lock(mu_);
    answers_[path] = std::move(answer);
  }
  // Every path but `tokenPath` then needs "Authorization: Bearer <token>";
  // `tokenPath` hands out the token to "Authorization: Basic <basic>".
  void requireBearer(const std::string& tokenPath, const std::string& basic, const std::string& token) {
    std::lock_guard lock(mu_);
    tokenPath_ = tokenPath;
    basic_ = basic;
    token_ = token;
  }
  int requests() const { return requests_; }

 private:
  void serve() {
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      int conn = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (conn < 0) continue;
      handle(conn);
      ::close(conn);
    }
  }

  void handle(int conn) {
    std::string request;
    char buf[4096];
    while (request.find("\r\n\r\n") == std::string::npos) {
      ssize_t n = ::recv(conn, buf, sizeof(buf), 0);
      if (n <= 0) return;
      request.append(buf, static_cast<size_t>(n));
    }
    ++requests_;
    size_t sp = request.find(' ');
    std::string target = request.substr(sp + 1, request.find(' ', sp + 1) - sp - 1);
    std::string path = target.substr(0, target.find('?'));
    Answer answer = pick(path, request);
    std::string head = "HTTP/1.1 " + std::to_string(answer.status) + " X\r\nContent-Type: " + answer.contentType +
                       "\r\nContent-Length: " + std::to_string(answer.body.size()) + "\r\n" + answer.extraHeaders +
                       "Connection: close\r\n\r\n";
    sendAll(conn, head);
    sendAll(conn, answer.body.substr(0, answer.stallAfter));
    if (answer.stallAfter != std::string::npos) {
      while (!stop_) {  // silent until the client gives up
        pollfd p{conn, POLLIN, 0};
        if (::poll(&p, 1, 50) > 0 && ::recv(conn, buf, sizeof(buf), 0) <= 0) break;
      }
    }
  }

  Answer pick(const std::string& path, const std::string& request) {
    std::lock_guard lock(mu_);
    if (!tokenPath_.empty()) {
      if (path == tokenPath_) {
        if (request.find("Authorization: Basic " + basic_ + "\r\n") == std::string::npos) return {401, "text/plain", "no"};
        return {200, "application/json", "{\"token\":\"" + token_ + "\",\"expires_in\":60}"};
      }
      if (request.find("Authorization: Bearer " + token_ + "\r\n") == std::string::npos) {
        Answer challenge{401, "application/json", "{}"};
        challenge.extraHeaders = "WWW-Authenticate: Bearer realm=\"http://" + registry() + tokenPath_ +
                                 "\",service=\"fake\",scope=\"repository:test/bb:pull\"\r\n";
        return challenge;
      }
    }
    auto it = answers_.find(path);
    if (it == answers_.end()) return {404, "application/json", "{\"errors\":[{\"code\":\"NOT_FOUND\"}]}"};
    return it->second;
  }

  static void sendAll(int conn, const std::string& data) {
    size_t sent = 0;
    while (sent < data.size()) {
      ssize_t n = ::send(conn, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return;
      sent += static_cast<size_t>(n);
    }
  }

  int fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> requests_{0};
  std::thread thread_;
  std::mutex mu_;
  std::map<std::string, Answer> answers_;
  std::string tokenPath_, basic_, token_;
};

}  // namespace allot::testing
