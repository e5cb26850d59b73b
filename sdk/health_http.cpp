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
#include <sys/socket.h>

#include <array>
#include <cerrno>

#include "sdk/health_check.h"
#include "sdk/http_answer.h"

namespace allot {
namespace {

using Done = std::function<void(HealthVerdict)>;
using tcp = asio::ip::tcp;

const SystemClock kSteadyClock;

struct HttpConnection {
  explicit HttpConnection(asio::io_context& io) : socket(io) {}
  tcp::socket socket;
  TimePoint openedAt;
  uint32_t uses = 0;
  bool open = false;  // connected, and no attempt left it unusable
  // Read into by one attempt at a time: a cancelled attempt's read is
  // aborted by the close that cancels it, before the next attempt starts.
  std::array<char, 4096> buffer;

  // With a reset: neither side keeps a TIME_WAIT socket for it.
  void close() {
    open = false;
    if (!socket.is_open()) return;
    boost::system::error_code ignored;
    socket.set_option(asio::socket_base::linger(true, 0), ignored);
    socket.close(ignored);
  }
};

// What the attempt's handlers share: a cancelled attempt (done empty)
// touches nothing when its handlers run.
struct HttpAttempt {
  std::shared_ptr<HttpConnection> conn;
  std::shared_ptr<const std::string> request;
  std::shared_ptr<const std::string> url;
  tcp::endpoint server;
  const Clock* clock = nullptr;
  Done done;
  HttpAnswer answer;
  bool mayRetry = false;  // on a kept connection, once
  bool answered = false;  // a byte of the answer came
};

using Attempt = std::shared_ptr<HttpAttempt>;

void connect(const Attempt& a);

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

void read(const Attempt& a) {
  a->conn->socket.async_read_some(asio::buffer(a->conn->buffer), [a](const boost::system::error_code& ec, size_t n) {
    if (!a->done) return;
    if (n > 0) {
      a->answered = true;
      size_t used = 0;
      HttpAnswer::State state = a->answer.feed(std::string_view(a->conn->buffer.data(), n), &used);
      if (state == HttpAnswer::State::kDone) return judge(a, used == n);
      if (state == HttpAnswer::State::kBad) return refuse(a);
    }
    if (ec == asio::error::eof) {
      if (!a->answered) return retryOrFail(a, "closed without an answer");
      if (a->answer.closed() == HttpAnswer::State::kDone) return judge(a, true);
      return refuse(a);
    }
    if (ec) return retryOrFail(a, ec.message());
    read(a);
  });
}

// The request fits the socket's empty send buffer: it is sent at once,
// without a completion through the loop; the rest of a short send waits.
// A failed send is judged from the loop, never inside the probe's start().
void send(const Attempt& a) {
  ++a->conn->uses;
  ssize_t sent = ::send(a->conn->socket.native_handle(), a->request->data(), a->request->size(),
                        MSG_NOSIGNAL | MSG_DONTWAIT);
  if (sent == static_cast<ssize_t>(a->request->size())) return read(a);
  if (sent < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
    std::string why = boost::system::error_code(errno, boost::system::system_category()).message();
    asio::post(a->conn->socket.get_executor(), [a, why] {
      if (a->done) retryOrFail(a, why);
    });
    return;
  }
  size_t done = sent > 0 ? static_cast<size_t>(sent) : 0;
  asio::async_write(a->conn->socket, asio::buffer(*a->request) + done,
                    [a](const boost::system::error_code& ec, size_t) {
                      if (!a->done) return;
                      if (ec) return retryOrFail(a, ec.message());
                      read(a);
                    });
}

void connect(const Attempt& a) {
  a->conn->close();
  a->conn->openedAt = a->clock->now();
  a->conn->uses = 0;
  a->conn->socket.async_connect(a->server, [a](const boost::system::error_code& ec) {
    if (!a->done) return;
    if (ec) return finish(a, false, ec.message(), false);
    a->conn->open = true;
    send(a);
  });
}

class HttpProbe final : public HealthProbe {
 public:
  HttpProbe(asio::io_context& io, uint16_t port, const std::string& path, HttpCheckReuse reuse)
      : conn_(std::make_shared<HttpConnection>(io)), server_(asio::ip::address_v4::loopback(), port),
        reuse_(reuse) {
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
    a->done = std::move(done);
    a->mayRetry = conn_->open;
    if (conn_->open) return send(a);
    connect(a);
  }
  // An attempt cut short leaves its connection mid-answer: never reused.
  void cancel() override {
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
  tcp::endpoint server_;
  HttpCheckReuse reuse_;
  std::shared_ptr<const std::string> url_;
  std::shared_ptr<const std::string> request_;
  Attempt attempt_;
};

}  // namespace

std::unique_ptr<HealthProbe> makeHttpProbe(asio::io_context& io, uint16_t port, std::string path,
                                           HttpCheckReuse reuse) {
  return std::make_unique<HttpProbe>(io, port, path, reuse);
}

}  // namespace allot
