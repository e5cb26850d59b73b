// http::Server on a real loopback socket: routing, streamed answers, the
// named limits (header, body, connections, idle time).
#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "http/client.h"
#include "http/server.h"

namespace allot::http {
namespace {

// A server on its own loop thread, as a daemon runs it.
class ServerFixture : public ::testing::Test {
 protected:
  void start(ServerOptions options = {}) {
    options.listen = {"127.0.0.1", 0};
    auto s = Server::create(io_, options);
    ASSERT_TRUE(s) << s.error().describe();
    server_ = std::move(*s);
    server_->route("GET", "/hello", [](const Request& r) {
      return Response::text(200, "hello " + (r.query.count("who") ? r.query.at("who") : ""));
    });
    server_->route("POST", "/echo", [](const Request& r) { return Response::text(200, r.body); });
    server_->route("GET", "/stream", [](const Request&) {
      Response r;
      auto n = std::make_shared<int>(0);
      r.stream = [n](std::string* out) {
        *out += std::to_string((*n)++) + ",";
        return *n < 1000;
      };
      return r;
    });
    // Pieces shared by every request, each one handed over later (a timer)
    // as a producer that renders on another thread would.
    server_->route("GET", "/pieces", [this](const Request&) {
      Response r;
      auto next = std::make_shared<int>(0);
      r.pull = [this, next](PieceSink sink) {
        auto timer = std::make_shared<asio::steady_timer>(io_, std::chrono::milliseconds(1));
        timer->async_wait([timer, next, sink = std::move(sink)](const boost::system::error_code&) {
          int i = (*next)++;
          sink(i < 50 ? sharedPieces_[i] : nullptr, i < 49);
        });
      };
      return r;
    });
    server_->route("GET", "/busy", [](const Request&) {
      Response r = Response::text(503, "busy");
      r.headers.emplace_back("Retry-After", "1");
      return r;
    });
    server_->start();
    thread_ = std::thread([this] {
      auto guard = asio::make_work_guard(io_);
      io_.run();
    });
  }
  void TearDown() override {
    if (thread_.joinable()) {
      asio::post(io_, [this] { server_->stop(); io_.stop(); });
      thread_.join();
    }
  }
  HostPort where() const { return {"127.0.0.1", server_->port()}; }

  // The server's open connections, read on its loop.
  size_t connections() {
    std::promise<size_t> count;
    asio::post(io_, [&] { count.set_value(server_->connectionCount()); });
    return count.get_future().get();
  }
  // Waits until the server counts `n` open connections (a bound for a
  // broken server, far beyond a loaded machine's delays).
  bool connectionsReach(size_t n) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (connections() != n) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return true;
  }
  // `n` connected sockets that send nothing.
  std::vector<asio::ip::tcp::socket> connectIdle(asio::io_context& client, int n) {
    std::vector<asio::ip::tcp::socket> idle;
    for (int i = 0; i < n; ++i) {
      idle.emplace_back(client);
      idle.back().connect({asio::ip::make_address("127.0.0.1"), server_->port()});
    }
    return idle;
  }

  static inline std::vector<Piece> sharedPieces_ = [] {
    std::vector<Piece> pieces;
    for (int i = 0; i < 50; ++i) pieces.push_back(std::make_shared<const std::string>(std::to_string(i) + ";"));
    return pieces;
  }();
  asio::io_context io_;
  std::unique_ptr<Server> server_;
  std::thread thread_;
};

TEST_F(ServerFixture, RoutesByMethodAndPathWithDecodedQuery) {
  start();
  auto r = fetch(where(), "GET", "/hello?who=a%20b+c");
  ASSERT_TRUE(r) << r.error().describe();
  EXPECT_EQ(r->status, 200u);
  EXPECT_EQ(r->body, "hello a b c\n");
  auto missing = fetch(where(), "GET", "/nothing");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404u);
  auto wrongMethod = fetch(where(), "POST", "/hello");
  ASSERT_TRUE(wrongMethod);
  EXPECT_EQ(wrongMethod->status, 405u);
}

TEST_F(ServerFixture, StreamedAnswerArrivesWholeInOrder) {
  start();
  auto r = fetch(where(), "GET", "/stream");
  ASSERT_TRUE(r) << r.error().describe();
  std::string expected;
  for (int i = 0; i < 1000; ++i) expected += std::to_string(i) + ",";
  EXPECT_EQ(r->body, expected);
}

TEST_F(ServerFixture, PulledPiecesArriveInOrderForEveryClient) {
  start();
  std::string expected;
  for (int i = 0; i < 50; ++i) expected += std::to_string(i) + ";";
  std::vector<std::thread> clients;
  std::vector<std::string> bodies(3);
  for (int c = 0; c < 3; ++c) {
    clients.emplace_back([&, c] {
      auto r = fetch(where(), "GET", "/pieces");
      if (r) bodies[c] = r->body;
    });
  }
  for (auto& t : clients) t.join();
  for (const auto& body : bodies) EXPECT_EQ(body, expected);
}

TEST_F(ServerFixture, ExtraHeadersAreSent) {
  start();
  auto r = fetch(where(), "GET", "/busy");
  ASSERT_TRUE(r) << r.error().describe();
  EXPECT_EQ(r->status, 503u);
  EXPECT_EQ(r->retryAfter, "1");
}

TEST_F(ServerFixture, OversizedHeaderAndBodyAreRefused) {
  ServerOptions o;
  o.maxHeaderBytes = 1024;
  o.maxBodyBytes = 100;
  start(o);
  auto longTarget = fetch(where(), "GET", "/hello?who=" + std::string(4000, 'x'));
  ASSERT_TRUE(longTarget) << longTarget.error().describe();
  EXPECT_EQ(longTarget->status, 431u);
  auto bigBody = fetch(where(), "POST", "/echo", std::string(1000, 'y'));
  ASSERT_TRUE(bigBody) << bigBody.error().describe();
  EXPECT_EQ(bigBody->status, 413u);
  auto small = fetch(where(), "POST", "/echo", "ok");
  ASSERT_TRUE(small);
  EXPECT_EQ(small->body, "ok\n");
}

// Raw sockets that connect and say nothing: the limit on open connections
// holds while they stay open.
TEST_F(ServerFixture, IdleConnectionsCountTowardTheLimit) {
  ServerOptions o;
  o.maxConnections = 2;
  o.idleTimeout = std::chrono::seconds(60);  // longer than the test: only the limit acts
  start(o);
  asio::io_context client;
  std::vector<asio::ip::tcp::socket> idle = connectIdle(client, 2);
  ASSERT_TRUE(connectionsReach(2)) << "the server did not accept both idle connections";
  // The third is accepted by the kernel and closed by the server at once.
  auto refused = fetch(where(), "GET", "/hello");
  EXPECT_FALSE(refused) << "a third connection was served beyond the limit";
  EXPECT_EQ(connections(), 2u);
}

// The idle timeout closes silent connections, which frees their slots.
TEST_F(ServerFixture, IdleConnectionsTimeOutAndFreeTheirSlots) {
  ServerOptions o;
  o.maxConnections = 2;
  o.idleTimeout = std::chrono::milliseconds(300);
  start(o);
  asio::io_context client;
  std::vector<asio::ip::tcp::socket> idle = connectIdle(client, 2);
  // The server closes each: reading gives EOF (a read that never ends
  // fails the test at the suite's timeout).
  for (auto& s : idle) {
    char byte;
    boost::system::error_code ec;
    s.read_some(asio::buffer(&byte, 1), ec);
    EXPECT_EQ(ec, asio::error::eof);
  }
  ASSERT_TRUE(connectionsReach(0)) << "closed connections still count";
  auto served = fetch(where(), "GET", "/hello");
  ASSERT_TRUE(served) << served.error().describe();
  EXPECT_EQ(served->status, 200u);
}

TEST(ParseQuery, DecodesEscapesAndKeepsMalformedOnes) {
  auto q = parseQuery("a=1&b=%41%zz&c&=x&d=%4");
  EXPECT_EQ(q["a"], "1");
  EXPECT_EQ(q["b"], "A%zz");
  EXPECT_EQ(q["c"], "");
  EXPECT_EQ(q["d"], "%4");
  EXPECT_EQ(encodeQueryValue("a b/é"), "a%20b%2F%C3%A9");
}

}  // namespace
}  // namespace allot::http
