// The HTTP check (sdk/health_check.h makeHttpProbe) against a real loopback
// server run by the test on the same loop: the kept connection, servers
// that close it, a server that stops accepting, bodies drained between
// answers, and answers that are garbage or never end. The answer's parser
// (sdk/http_answer.h) alone first.
#include <array>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/asio.h"
#include "sdk/health_check.h"
#include "sdk/http_answer.h"
#include "tests/common/test_util.h"
#include "tests/health/probe_test.h"

namespace allot {
namespace {

using namespace std::chrono_literals;
using State = HttpAnswer::State;

// Feeds `text` in pieces of `step` bytes; returns the state and what was taken.
std::pair<State, size_t> feedAll(HttpAnswer& answer, std::string_view text, size_t step = 1) {
  size_t taken = 0;
  State state = State::kMore;
  while (taken < text.size() && state == State::kMore) {
    size_t used = 0;
    state = answer.feed(text.substr(taken, step), &used);
    taken += used;
  }
  return {state, taken};
}

TEST(HttpAnswer, ALengthFramedBodyEndsTheAnswerExactly) {
  std::string text = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhelloHTTP/1.1";
  for (size_t step : {1u, 7u, 100u}) {
    HttpAnswer answer;
    auto [state, taken] = feedAll(answer, text, step);
    EXPECT_EQ(state, State::kDone) << step;
    EXPECT_EQ(taken, text.size() - 8) << "the next answer's bytes are not taken";
    EXPECT_EQ(answer.status(), 200);
    EXPECT_EQ(answer.statusLine(), "HTTP/1.1 200 OK");
    EXPECT_TRUE(answer.keepAlive());
  }
}

TEST(HttpAnswer, ChunksWithExtensionsAndTrailers) {
  HttpAnswer answer;
  std::string text = "HTTP/1.1 503 Busy\r\nTransfer-Encoding: gzip, Chunked\r\n\r\n"
                     "5;name=value\r\nhello\r\nA\r\n0123456789\r\n0\r\nX-Trailer: 1\r\n\r\n";
  auto [state, taken] = feedAll(answer, text, 3);
  EXPECT_EQ(state, State::kDone);
  EXPECT_EQ(taken, text.size());
  EXPECT_EQ(answer.status(), 503);
  EXPECT_TRUE(answer.keepAlive());
}

TEST(HttpAnswer, ABodyWithoutFramingEndsAtTheClose) {
  HttpAnswer answer;
  EXPECT_EQ(feedAll(answer, "HTTP/1.0 200 OK\r\n\r\nsome body").first, State::kMore);
  EXPECT_EQ(answer.closed(), State::kDone);
  EXPECT_FALSE(answer.keepAlive());
  HttpAnswer cut;
  EXPECT_EQ(feedAll(cut, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc").first, State::kMore);
  EXPECT_EQ(cut.closed(), State::kBad) << "a body shorter than its length is cut off";
}

TEST(HttpAnswer, WhichAnswersKeepTheConnection) {
  auto keeps = [](std::string text) {
    HttpAnswer answer;
    return feedAll(answer, text, 100).first == State::kDone && answer.keepAlive();
  };
  EXPECT_TRUE(keeps("HTTP/1.1 204 No Content\r\n\r\n"));
  EXPECT_FALSE(keeps("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"));
  EXPECT_FALSE(keeps("HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n"));
  EXPECT_TRUE(keeps("HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 0\r\n\r\n"));
  EXPECT_FALSE(keeps("HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"));
  EXPECT_TRUE(keeps("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"));
}

TEST(HttpAnswer, BadAnswersAreRefusedWithTheReason) {
  auto error = [](std::string text) {
    HttpAnswer answer;
    EXPECT_EQ(feedAll(answer, text, 64).first, State::kBad) << text;
    return answer.error();
  };
  EXPECT_NE(error("garbage\r\n").find("no HTTP status line"), std::string::npos);
  EXPECT_NE(error("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n").find("conflicting"),
            std::string::npos);
  EXPECT_NE(error("HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n").find("Content-Length"), std::string::npos);
  EXPECT_NE(error("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n").find("chunk size"),
            std::string::npos);
  EXPECT_NE(error("HTTP/1.1 200 OK\r\nX: " + std::string(kHttpAnswerHeadBytesMax, 'a')).find("beyond"),
            std::string::npos);
}

TEST(HttpAnswer, ABodyPastItsBoundEndsTheAnswerAndTheConnection) {
  HttpAnswer length;
  std::string big = "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(kHttpAnswerBodyBytesMax + 1) + "\r\n\r\n";
  EXPECT_EQ(feedAll(length, big, 1000).first, State::kDone);
  EXPECT_FALSE(length.keepAlive());
  HttpAnswer chunks;
  std::string chunk = "400\r\n" + std::string(1024, 'x') + "\r\n";
  std::string text = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
  while (text.size() < kHttpAnswerBodyBytesMax + 4096) text += chunk;
  EXPECT_EQ(feedAll(chunks, text, 4096).first, State::kDone);
  EXPECT_EQ(chunks.status(), 200);
  EXPECT_FALSE(chunks.keepAlive());
}

// A loopback HTTP server on the test's loop. Each request (read up to its
// blank line) gets reply(); its parts are written apart, 20 ms between.
class Server {
 public:
  struct Reply {
    std::vector<std::string> parts;
    bool closeAfter = false;
  };
  explicit Server(asio::io_context& io) : io_(io), acceptor_(io, {asio::ip::address_v4::loopback(), 0}) {
    port_ = acceptor_.local_endpoint().port();
    accept();
  }
  uint16_t port() const { return port_; }
  void stopAccepting() { acceptor_.close(); }
  // Closes every connection it has (the server's idle timeout).
  void closeAll() {
    for (auto& c : conns_) {
      boost::system::error_code ignored;
      c->socket.close(ignored);
    }
    conns_.clear();
  }

  // Writes `text` unasked on every connection it has (a server timing out
  // its idle connections), then closes them if `close`.
  void sayToAll(const std::string& text, bool close) {
    for (auto& c : conns_) {
      boost::system::error_code ignored;
      asio::write(c->socket, asio::buffer(text), ignored);
    }
    if (close) closeAll();
  }

  std::function<Reply()> reply = [] { return Reply{{"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"}}; };
  int accepted = 0;
  int requests = 0;

 private:
  struct Conn {
    Conn(asio::io_context& io, asio::ip::tcp::socket s) : socket(std::move(s)), pause(io) {}
    asio::ip::tcp::socket socket;
    asio::steady_timer pause;
    std::string in;
    std::array<char, 1024> buffer{};
    std::deque<std::string> out;
  };
  using ConnPtr = std::shared_ptr<Conn>;

  void accept() {
    acceptor_.async_accept([this](const boost::system::error_code& ec, asio::ip::tcp::socket s) {
      if (ec) return;
      ++accepted;
      conns_.push_back(std::make_shared<Conn>(io_, std::move(s)));
      read(conns_.back());
      accept();
    });
  }
  void read(ConnPtr c) {
    c->socket.async_read_some(asio::buffer(c->buffer), [this, c](const boost::system::error_code& ec, size_t n) {
      if (ec) return;
      c->in.append(c->buffer.data(), n);
      size_t end = c->in.find("\r\n\r\n");
      if (end == std::string::npos) return read(c);
      c->in.erase(0, end + 4);
      ++requests;
      Reply r = reply();
      c->out.assign(r.parts.begin(), r.parts.end());
      write(c, r.closeAfter);
    });
  }
  void write(ConnPtr c, bool closeAfter) {
    if (c->out.empty()) {
      if (!closeAfter) return read(c);
      boost::system::error_code ignored;
      c->socket.shutdown(asio::socket_base::shutdown_both, ignored);
      return c->socket.close(ignored);
    }
    std::string part = std::move(c->out.front());
    c->out.pop_front();
    boost::system::error_code ec;
    asio::write(c->socket, asio::buffer(part), ec);
    if (ec) return;
    if (c->out.empty()) return write(c, closeAfter);
    c->pause.expires_after(20ms);
    c->pause.async_wait([this, c, closeAfter](const boost::system::error_code& e) {
      if (!e) write(c, closeAfter);
    });
  }

  asio::io_context& io_;
  asio::ip::tcp::acceptor acceptor_;
  uint16_t port_ = 0;
  std::vector<ConnPtr> conns_;
};

class HttpCheck : public ProbeTest {
 protected:
  // A check of the server every 50 ms that gives up only after 10
  // failures, started; each verdict goes to `verdicts`.
  std::unique_ptr<HealthChecker> startChecker(Duration timeout, std::vector<HealthVerdict>& verdicts) {
    HealthCheckSettings s;
    s.delay = 0s;
    s.interval = 50ms;
    s.timeout = timeout;
    s.grace = 0s;
    s.failuresMax = 10;
    auto checker = std::make_unique<HealthChecker>(
        io_, s, makeHttpProbe(io_, server_.port(), "/"),
        [&verdicts](const HealthVerdict& v) { verdicts.push_back(v); }, [](const std::string&) {});
    checker->start();
    return checker;
  }

  // While `stuck` is true the server's answer never completes: the first
  // verdict fails with `why` in its output at the 200 ms timeout; once it is
  // false the next verdict is healthy, on a new connection.
  void expectTimeoutThenRecovery(bool& stuck, const std::string& why) {
    std::vector<HealthVerdict> verdicts;
    auto checker = startChecker(200ms, verdicts);
    ASSERT_TRUE(testing::runUntil(io_, [&] { return verdicts.size() == 1; }, 5s));
    EXPECT_FALSE(verdicts[0].healthy);
    EXPECT_NE(verdicts[0].output.find(why), std::string::npos) << verdicts[0].output;
    stuck = false;
    ASSERT_TRUE(testing::runUntil(io_, [&] { return verdicts.size() == 2; }, 5s));
    EXPECT_TRUE(verdicts[1].healthy) << verdicts[1].output;
    EXPECT_GE(server_.accepted, 2) << "a timed-out connection is not used again";
  }

  Server server_{io_};
};

TEST_F(HttpCheck, KeepsItsConnectionBetweenAttempts) {
  auto probe = makeHttpProbe(io_, server_.port(), "/ready");
  for (int i = 0; i < 5; ++i) {
    HealthVerdict v = attempt(*probe);
    EXPECT_TRUE(v.healthy) << v.output;
    EXPECT_EQ(v.output, "HTTP 127.0.0.1:" + std::to_string(server_.port()) + "/ready: HTTP/1.1 200 OK");
  }
  EXPECT_EQ(server_.requests, 5);
  EXPECT_EQ(server_.accepted, 1);
}

TEST_F(HttpCheck, AServerThatClosesAfterEachAnswerStillWorks) {
  server_.reply = [] { return Server::Reply{{"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok"}, true}; };
  auto probe = makeHttpProbe(io_, server_.port(), "/");
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(attempt(*probe).healthy);
  // HTTP/1.0 with a body that ends at the close.
  server_.reply = [] { return Server::Reply{{"HTTP/1.0 200 OK\r\n\r\nall good"}, true}; };
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(attempt(*probe).healthy);
  EXPECT_EQ(server_.accepted, 6);
}

TEST_F(HttpCheck, AServerThatClosesTheIdleConnectionGetsANewOne) {
  auto probe = makeHttpProbe(io_, server_.port(), "/");
  EXPECT_TRUE(attempt(*probe).healthy);
  server_.closeAll();
  testing::runFor(io_, 10ms);
  HealthVerdict v = attempt(*probe);
  EXPECT_TRUE(v.healthy) << v.output;
  EXPECT_EQ(server_.accepted, 2);
}

// A server may write a 408 on a connection it times out, before it closes
// it or as it does: not the answer to the next request, which is sent
// once more on a new connection. A 408 that is the answer fails.
TEST_F(HttpCheck, A408OnTheKeptConnectionIsTheServerTimingItOut) {
  const std::string timedOut = "HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Length: 0\r\n\r\n";
  auto probe = makeHttpProbe(io_, server_.port(), "/");
  EXPECT_TRUE(attempt(*probe).healthy);
  for (bool close : {true, false}) {
    server_.sayToAll(timedOut, close);
    testing::runFor(io_, 10ms);
    HealthVerdict v = attempt(*probe);
    EXPECT_TRUE(v.healthy) << close << ": " << v.output;
  }
  EXPECT_EQ(server_.accepted, 3);
  server_.reply = [&] { return Server::Reply{{timedOut}, true}; };
  HealthVerdict v = attempt(*probe);
  EXPECT_FALSE(v.healthy);
  EXPECT_NE(v.output.find("408 Request Timeout"), std::string::npos) << v.output;
}

// Bytes a server wrote unasked on the idle connection are no answer either.
TEST_F(HttpCheck, BytesWrittenUnaskedOnTheKeptConnectionAreNoAnswer) {
  auto probe = makeHttpProbe(io_, server_.port(), "/");
  EXPECT_TRUE(attempt(*probe).healthy);
  server_.sayToAll("\x15\x03\x03\x00\x02\x02\x32", false);
  testing::runFor(io_, 10ms);
  HealthVerdict v = attempt(*probe);
  EXPECT_TRUE(v.healthy) << v.output;
  EXPECT_EQ(server_.accepted, 2);
}

// The server's idle close racing the request: one more try, on a new
// connection; on a new connection no second try.
TEST_F(HttpCheck, AKeptConnectionClosedUnderTheRequestIsTriedOnceMore) {
  int n = 0;
  server_.reply = [&n] {
    if (++n == 2) return Server::Reply{{}, true};
    return Server::Reply{{"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"}};
  };
  auto probe = makeHttpProbe(io_, server_.port(), "/");
  EXPECT_TRUE(attempt(*probe).healthy);
  HealthVerdict v = attempt(*probe);
  EXPECT_TRUE(v.healthy) << v.output;
  EXPECT_EQ(server_.accepted, 2);
  EXPECT_EQ(server_.requests, 3);
  server_.reply = [] { return Server::Reply{{}, true}; };
  server_.closeAll();
  v = attempt(*probe);
  EXPECT_FALSE(v.healthy);
  EXPECT_NE(v.output.find("closed without an answer"), std::string::npos) << v.output;
}

TEST_F(HttpCheck, AServerThatStopsAcceptingIsSeenWithinTheUsesBound) {
  auto probe = makeHttpProbe(io_, server_.port(), "/", HttpCheckReuse{kHttpCheckConnectionMaxAge, 3, nullptr});
  EXPECT_TRUE(attempt(*probe).healthy);
  server_.stopAccepting();
  EXPECT_TRUE(attempt(*probe).healthy) << "the kept connection still answers";
  EXPECT_TRUE(attempt(*probe).healthy);
  HealthVerdict v = attempt(*probe);
  EXPECT_FALSE(v.healthy) << "the fourth attempt needs a new connection";
  EXPECT_NE(v.output.find("refused"), std::string::npos) << v.output;
}

TEST_F(HttpCheck, AServerThatStopsAcceptingIsSeenWithinTheAgeBound) {
  FakeClock clock;
  auto probe = makeHttpProbe(io_, server_.port(), "/", HttpCheckReuse{30s, 1000, &clock});
  EXPECT_TRUE(attempt(*probe).healthy);
  server_.stopAccepting();
  clock.advance(29s);
  EXPECT_TRUE(attempt(*probe).healthy);
  clock.advance(1s);
  EXPECT_FALSE(attempt(*probe).healthy) << "30 s old: a new connection, refused";
}

TEST_F(HttpCheck, AKeptConnectionsBodiesAreDrained) {
  int n = 0;
  server_.reply = [&n] {
    if (n++ % 2 == 0) return Server::Reply{{"HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\nhello", " world"}};
    return Server::Reply{{"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel", "lo\r\n0\r\n\r\n"}};
  };
  auto probe = makeHttpProbe(io_, server_.port(), "/");
  for (int i = 0; i < 4; ++i) {
    HealthVerdict v = attempt(*probe);
    EXPECT_TRUE(v.healthy) << i << ": " << v.output;
  }
  EXPECT_EQ(server_.accepted, 1);
}

TEST_F(HttpCheck, GarbageFailsAtOnce) {
  server_.reply = [] { return Server::Reply{{"SSH-2.0-OpenSSH_9.2\r\n"}}; };
  auto probe = makeHttpProbe(io_, server_.port(), "/");
  HealthVerdict v = attempt(*probe);
  EXPECT_FALSE(v.healthy);
  EXPECT_NE(v.output.find("no HTTP status line"), std::string::npos) << v.output;
  server_.reply = [] { return Server::Reply{{"HTTP/1.1 200 OK\r\nX: " + std::string(10000, 'a')}}; };
  v = attempt(*probe);
  EXPECT_FALSE(v.healthy);
  EXPECT_NE(v.output.find("beyond"), std::string::npos) << v.output;
}

// The timer grid delays an attempt, never advances it: each starts at
// least the interval after the previous one ended, and not much later
// than that plus the grid's step (the loop's own delay on a busy machine
// is the rest of the margin).
TEST_F(HttpCheck, AttemptsComeAnIntervalApartWithinTheTimerSlack) {
  HealthCheckSettings s;
  s.delay = 0s;
  s.interval = 100ms;
  s.timeout = 1s;
  s.grace = 0s;
  std::vector<TimePoint> starts;
  server_.reply = [&] {
    starts.push_back(SteadyClock::now());
    return Server::Reply{{"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"}};
  };
  HealthChecker checker(io_, s, makeHttpProbe(io_, server_.port(), "/"), [](const HealthVerdict&) {},
                        [](const std::string&) {});
  checker.start();
  ASSERT_TRUE(testing::runUntil(io_, [&] { return starts.size() == 6; }, 5s));
  for (size_t i = 1; i < starts.size(); ++i) {
    Duration gap = starts[i] - starts[i - 1];
    EXPECT_GE(gap, s.interval) << i;
    EXPECT_LT(gap, s.interval + kHealthTimerSlack + 150ms) << i;
  }
}

// An answer is looked for at the timer grid's next point, which may be past
// a short timeout: one that came before the timeout still counts.
TEST_F(HttpCheck, AnAnswerWithinATimeoutShorterThanTheGridStepCounts) {
  std::vector<HealthVerdict> verdicts;
  auto checker = startChecker(3ms, verdicts);
  ASSERT_TRUE(testing::runUntil(io_, [&] { return server_.requests >= 5; }, 5s));
  ASSERT_FALSE(verdicts.empty());
  for (const HealthVerdict& v : verdicts) EXPECT_TRUE(v.healthy) << v.output;
}

// A server that takes the request and never answers: the attempt fails at
// the check's timeout (its answer is waited for past the grid point where
// it is first looked for), and the connection is not used again.
TEST_F(HttpCheck, AServerThatNeverAnswersTimesOut) {
  bool hang = true;
  server_.reply = [&hang] {
    if (hang) return Server::Reply{{}, false};
    return Server::Reply{{"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"}};
  };
  expectTimeoutThenRecovery(hang, "timed out after 0.2");
}

// An answer that never ends fails at the check's timeout, and the next
// attempt does not reuse its connection.
TEST_F(HttpCheck, AnAnswerThatNeverEndsTimesOut) {
  bool stall = true;
  server_.reply = [&stall] {
    if (stall) return Server::Reply{{"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nabc"}};
    return Server::Reply{{"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"}};
  };
  expectTimeoutThenRecovery(stall, "timed out");
}

}  // namespace
}  // namespace allot
