// The HTTP probe (sdk/health_check.h): a GET on a connection kept from one
// attempt to the next (HTTP/1.1 keep-alive), as Envoy's HTTP health checker
// does by default, because a fresh loopback connection per attempt costs
// several times the request itself (docs/health-checks.md).
//
// A new connection is opened when there is none, after any attempt that
// failed, timed out or read an answer that ends the connection, and once
// the connection has reached its age or its count of attempts
// (HttpCheckReuse). The kept connection is not probed before a request (a
// syscall per attempt): an attempt on it that finds it closed before any
// answer (the server's idle close racing the request), or reads a 408 or a
// malformed answer (what a server may write on a connection it times out),
// is tried once on a new one.
//
// The loop is not woken for each answer: the request is written at once,
// and the answer read at the next point of the checks' timer grid
// (sdk/health_timers.h), in the wakeup that starts the checks due then.
// The connection is a plain socket, not in the loop's epoll set; only an
// answer not all there by then, or a connection still being made, is
// waited for through the loop.
#include <netinet/in.h>
#include <sys/socket.h>

#include <array>
#include <cerrno>
#include <optional>

#include "base/unique_fd.h"
#include "sdk/health_check.h"
#include "sdk/health_timers.h"
#include "sdk/http_answer.h"

namespace allot {
namespace {

using Done = std::function<void(HealthVerdict)>;
using Descriptor = asio::posix::stream_descriptor;

const SystemClock kSteadyClock;

std::string errnoText(int error) { return boost::system::error_code(error, boost::system::system_category()).message(); }

struct HttpConnection {
  explicit HttpConnection(asio::io_context& io) : io(io) {}
  asio::io_context& io;
  UniqueFd fd;
  // In the loop's epoll set only while an attempt waits on it.
  std::optional<Descriptor> waiter;
  TimePoint openedAt;
  uint32_t uses = 0;
  bool open = false;  // connected, and no attempt left it unusable
  // Read into by one attempt at a time.
  std::array<char, 4096> buffer;

  void stopWaiting() {
    if (!waiter) return;
    boost::system::error_code ignored;
    waiter->cancel(ignored);
    waiter->release();  // the fd stays ours
    waiter.reset();
  }
  // With a reset: neither side keeps a TIME_WAIT socket for it.
  void close() {
    open = false;
    stopWaiting();
    if (!fd) return;
    struct linger reset = {1, 0};
    setsockopt(fd.get(), SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
    fd.reset();
  }
};

// What the attempt's handlers share: a cancelled attempt (done empty)
// touches nothing when its handlers run.
struct HttpAttempt {
  std::shared_ptr<HttpConnection> conn;
  std::shared_ptr<const std::string> request;
  std::shared_ptr<const std::string> url;
  sockaddr_in server{};
  const Clock* clock = nullptr;
  HealthTimer* reader = nullptr;  // the probe's: fires readAnswer at the next grid point
  Done done;
  HttpAnswer answer;
  bool mayRetry = false;  // on a kept connection, once
  bool answered = false;  // a byte of the answer came
};

using Attempt = std::shared_ptr<HttpAttempt>;

void connect(const Attempt& a);
void readAnswer(const Attempt& a);

void finish(const Attempt& a, bool healthy, const std::string& output, bool keep) {
  if (!a->done) return;
  if (!keep) a->conn->close();
  Done d = std::move(a->done);
  a->done = nullptr;
  d({healthy, *a->url + ": " + output});
}

// Again on a new connection, when the attempt ran on a kept one.
bool retried(const Attempt& a) {
  if (!a->mayRetry) return false;
  a->mayRetry = false;
  a->answered = false;
  a->answer = HttpAnswer();
  connect(a);
  return true;
}

void retryOrFail(const Attempt& a, const std::string& why) {
  if (!a->answered && retried(a)) return;
  finish(a, false, why, false);
}

// A 408 on a kept connection is the server timing it out, not an answer.
void judge(const Attempt& a, bool allTaken) {
  int code = a->answer.status();
  if (code == 408 && retried(a)) return;
  finish(a, code >= 200 && code < 400, a->answer.statusLine(), a->answer.keepAlive() && allTaken);
}

void refuse(const Attempt& a) {
  if (retried(a)) return;
  finish(a, false, a->answer.error(), false);
}

// Judged from the loop, never inside the probe's start().
void failLater(const Attempt& a, std::string why) {
  asio::post(a->conn->io, [a, why = std::move(why)] {
    if (a->done) retryOrFail(a, why);
  });
}

// Through the loop's epoll set, for this wait only.
void waitFor(const Attempt& a, Descriptor::wait_type what, void (*then)(const Attempt&)) {
  HttpConnection& c = *a->conn;
  if (!c.waiter) {
    boost::system::error_code ec;
    c.waiter.emplace(c.io);
    c.waiter->assign(c.fd.get(), ec);
    if (ec) {
      c.waiter->release();
      c.waiter.reset();
      return failLater(a, ec.message());
    }
  }
  c.waiter->async_wait(what, [a, then](const boost::system::error_code& ec) {
    if (!a->done) return;
    a->conn->stopWaiting();
    if (ec) return retryOrFail(a, ec.message());
    then(a);
  });
}

// Takes what has come of the answer; waits for the rest.
void readAnswer(const Attempt& a) {
  HttpConnection& c = *a->conn;
  for (;;) {
    ssize_t n = recv(c.fd.get(), c.buffer.data(), c.buffer.size(), MSG_DONTWAIT);
    if (n > 0) {
      a->answered = true;
      size_t used = 0;
      HttpAnswer::State state = a->answer.feed(std::string_view(c.buffer.data(), static_cast<size_t>(n)), &used);
      if (state == HttpAnswer::State::kDone) return judge(a, used == static_cast<size_t>(n));
      if (state == HttpAnswer::State::kBad) return refuse(a);
      continue;  // bounded: the answer's parts are (sdk/http_answer.h)
    }
    if (n == 0) {
      if (!a->answered) return retryOrFail(a, "closed without an answer");
      if (a->answer.closed() == HttpAnswer::State::kDone) return judge(a, true);
      return refuse(a);
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return waitFor(a, Descriptor::wait_read, readAnswer);
    return retryOrFail(a, errnoText(errno));
  }
}

// The request fits the socket's empty send buffer: it is sent at once;
// the rest of a short send waits for room.
void send(const Attempt& a) {
  HttpConnection& c = *a->conn;
  size_t done = 0;
  while (done < a->request->size()) {
    ssize_t n = ::send(c.fd.get(), a->request->data() + done, a->request->size() - done, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && done == 0) return waitFor(a, Descriptor::wait_write, send);
    // A partial request cannot be resumed after a wait without its offset:
    // the connection is given up (requests are far below a socket buffer).
    return failLater(a, n < 0 ? errnoText(errno) : "short write");
  }
  ++c.uses;
  a->reader->at(SteadyClock::now());
}

void connected(const Attempt& a) {
  int error = 0;
  socklen_t size = sizeof error;
  if (getsockopt(a->conn->fd.get(), SOL_SOCKET, SO_ERROR, &error, &size) != 0) error = errno;
  if (error != 0) return finish(a, false, errnoText(error), false);
  a->conn->open = true;
  send(a);
}

void connect(const Attempt& a) {
  HttpConnection& c = *a->conn;
  a->reader->cancel();
  c.close();
  c.openedAt = a->clock->now();
  c.uses = 0;
  c.fd.reset(socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!c.fd) return failLater(a, errnoText(errno));
  int rc = ::connect(c.fd.get(), reinterpret_cast<const sockaddr*>(&a->server), sizeof a->server);
  if (rc == 0) {
    c.open = true;
    return send(a);
  }
  if (errno == EINPROGRESS || errno == EINTR) return waitFor(a, Descriptor::wait_write, connected);
  std::string why = errnoText(errno);
  c.close();
  asio::post(c.io, [a, why] {
    if (a->done) finish(a, false, why, false);
  });
}

class HttpProbe final : public HealthProbe {
 public:
  HttpProbe(asio::io_context& io, uint16_t port, const std::string& path, HttpCheckReuse reuse)
      : conn_(std::make_shared<HttpConnection>(io)), reuse_(reuse), reader_(io, [this] {
          if (attempt_ && attempt_->done) readAnswer(attempt_);
        }) {
    server_.sin_family = AF_INET;
    server_.sin_port = htons(port);
    server_.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    std::string target = path.empty() ? "/" : path;
    std::string host = "127.0.0.1:" + std::to_string(port);
    url_ = std::make_shared<const std::string>("HTTP " + host + target);
    request_ = std::make_shared<const std::string>("GET " + target + " HTTP/1.1\r\nHost: " + host +
                                                   "\r\nUser-Agent: allot-health-check\r\nAccept: */*\r\n\r\n");
    if (!reuse_.clock) reuse_.clock = &kSteadyClock;
  }
  ~HttpProbe() override {
    cancel();
    conn_->close();
  }

  void start(Done done) override {
    cancel();
    if (conn_->open && !reusable()) conn_->close();
    attempt_ = std::make_shared<HttpAttempt>();
    Attempt a = attempt_;
    a->conn = conn_;
    a->request = request_;
    a->url = url_;
    a->server = server_;
    a->clock = reuse_.clock;
    a->reader = &reader_;
    a->done = std::move(done);
    a->mayRetry = conn_->open;
    if (conn_->open) return send(a);
    connect(a);
  }
  // The answer may be there before the grid point it is looked for at.
  void settle() override {
    if (!attempt_ || !attempt_->done || !reader_.armed()) return;
    reader_.cancel();
    readAnswer(attempt_);
  }
  // An attempt cut short leaves its connection mid-answer: never reused.
  void cancel() override {
    reader_.cancel();
    if (attempt_ && attempt_->done) {
      attempt_->done = nullptr;
      conn_->close();
    }
    attempt_.reset();
  }

 private:
  bool reusable() const {
    return conn_->uses < reuse_.usesMax && reuse_.clock->now() - conn_->openedAt < reuse_.maxAge;
  }

  std::shared_ptr<HttpConnection> conn_;
  sockaddr_in server_{};
  HttpCheckReuse reuse_;
  std::shared_ptr<const std::string> url_;
  std::shared_ptr<const std::string> request_;
  Attempt attempt_;
  HealthTimer reader_;
};

}  // namespace

std::unique_ptr<HealthProbe> makeHttpProbe(asio::io_context& io, uint16_t port, std::string path,
                                           HttpCheckReuse reuse) {
  return std::make_unique<HttpProbe>(io, port, path, reuse);
}

}  // namespace allot
