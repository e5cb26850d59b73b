#include "proto/connection.h"

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <optional>

namespace allot {
namespace {

using asio::ip::tcp;

// A loopback listener and a connected client, both on one io_context.
class ConnectionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    acceptor_.open(tcp::v4());
    acceptor_.bind(tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    acceptor_.listen();
  }

  // Accepts one peer and wraps it in a Connection with `options`.
  void acceptOne(Connection::Options options, Connection::Handlers handlers) {
    acceptor_.async_accept([this, options, handlers](const boost::system::error_code& ec,
                                                     tcp::socket socket) {
      ASSERT_FALSE(ec);
      server_ = Connection::create(std::move(socket), options);
      server_->start(handlers);
    });
  }

  tcp::socket rawClient() {
    tcp::socket socket(io_);
    socket.connect(acceptor_.local_endpoint());
    return socket;
  }

  void runFor(std::chrono::milliseconds limit) {
    io_.restart();
    io_.run_for(limit);
  }

  asio::io_context io_;
  tcp::acceptor acceptor_{io_};
  std::shared_ptr<Connection> server_;
};

TEST_F(ConnectionTest, HandshakeThenMessagesFlowBothWays) {
  std::vector<uint64_t> got;
  acceptOne({wire::ROLE_MASTER, "master", {wire::ROLE_AGENT}},
            {nullptr, [&](wire::Envelope& e) {
               got.push_back(e.heartbeat().sequence());
               wire::Envelope ack;
               ack.mutable_heartbeat_ack()->set_sequence(e.heartbeat().sequence());
               (void)server_->send(ack);
             },
             nullptr});
  auto client = Connection::create(rawClient(), {wire::ROLE_AGENT, "agent", {}});
  std::vector<uint64_t> acks;
  client->start({nullptr, [&](wire::Envelope& e) { acks.push_back(e.heartbeat_ack().sequence()); },
                 nullptr});
  for (uint64_t i = 0; i < 3; ++i) {
    wire::Envelope hb;
    hb.mutable_heartbeat()->set_sequence(i);
    ASSERT_TRUE(client->send(hb).ok());
  }
  runFor(std::chrono::milliseconds(300));
  EXPECT_EQ(got, (std::vector<uint64_t>{0, 1, 2}));
  EXPECT_EQ(acks, (std::vector<uint64_t>{0, 1, 2}));
  EXPECT_EQ(server_->peerHello().name(), "agent");
}

TEST_F(ConnectionTest, WrongVersionIsRejectedWithReason) {
  std::string serverReason;
  acceptOne({wire::ROLE_MASTER, "master", {}},
            {nullptr, nullptr, [&](const std::string& r) { serverReason = r; }});
  tcp::socket raw = rawClient();
  wire::Envelope hello = helloEnvelope(wire::ROLE_AGENT, "old");
  hello.mutable_hello()->set_protocol_version(99);
  std::string bytes;
  ASSERT_TRUE(appendFrame(hello, &bytes).ok());
  asio::write(raw, asio::buffer(bytes));
  runFor(std::chrono::milliseconds(200));
  EXPECT_NE(serverReason.find("protocol version 99"), std::string::npos);
  // The peer received our Hello and then the rejection.
  std::string received(4096, '\0');
  boost::system::error_code ec;
  size_t n = asio::read(raw, asio::buffer(received), ec);
  FrameDecoder decoder;
  decoder.append(received.data(), n);
  wire::Envelope e;
  ASSERT_TRUE(*decoder.next(&e));
  EXPECT_TRUE(e.has_hello());
  ASSERT_TRUE(*decoder.next(&e));
  EXPECT_TRUE(e.has_hello_rejected());
}

TEST_F(ConnectionTest, OversizedFrameClosesOnlyThatConnection) {
  std::string reason;
  acceptOne({wire::ROLE_MASTER, "master", {}, 1024},
            {nullptr, nullptr, [&](const std::string& r) { reason = r; }});
  tcp::socket raw = rawClient();
  std::string bytes;
  ASSERT_TRUE(appendFrame(helloEnvelope(wire::ROLE_AGENT, "a"), &bytes).ok());
  bytes += std::string("\x00\x10\x00\x00", 4);  // 1 MiB announced
  asio::write(raw, asio::buffer(bytes));
  runFor(std::chrono::milliseconds(200));
  EXPECT_NE(reason.find("exceeds"), std::string::npos);
  EXPECT_FALSE(server_->open());
}

TEST_F(ConnectionTest, FirstFrameMustBeHello) {
  std::string reason;
  acceptOne({wire::ROLE_MASTER, "master", {}},
            {nullptr, nullptr, [&](const std::string& r) { reason = r; }});
  tcp::socket raw = rawClient();
  wire::Envelope hb;
  hb.mutable_heartbeat()->set_sequence(1);
  std::string bytes;
  ASSERT_TRUE(appendFrame(hb, &bytes).ok());
  asio::write(raw, asio::buffer(bytes));
  runFor(std::chrono::milliseconds(200));
  EXPECT_NE(reason.find("not a Hello"), std::string::npos);
}

TEST_F(ConnectionTest, TruncatedFrameAtCloseIsNamed) {
  std::string reason;
  acceptOne({wire::ROLE_MASTER, "master", {}},
            {nullptr, nullptr, [&](const std::string& r) { reason = r; }});
  {
    tcp::socket raw = rawClient();
    std::string bytes;
    ASSERT_TRUE(appendFrame(helloEnvelope(wire::ROLE_AGENT, "a"), &bytes).ok());
    bytes += std::string("\x00\x00\x00\x10\x01", 5);
    asio::write(raw, asio::buffer(bytes));
    runFor(std::chrono::milliseconds(100));
  }
  runFor(std::chrono::milliseconds(200));
  EXPECT_NE(reason.find("truncated"), std::string::npos);
}

// A burst of frames that one read brings in is handled in batches of
// kMaxFramesPerPass, each behind the completions already due: here a
// handler posted by the first frame (what another peer's read would be)
// runs after the first batch, not after the whole burst.
TEST_F(ConnectionTest, ABurstIsHandledInBatchesWithOtherWorkBetween) {
  constexpr size_t kBurst = 10 * kMaxFramesPerPass;
  size_t handled = 0;
  std::optional<size_t> handledWhenOtherWorkRan;
  acceptOne({wire::ROLE_MASTER, "master", {wire::ROLE_AGENT}},
            {nullptr, [&](wire::Envelope&) {
               if (handled++ == 0) asio::post(io_, [&] { handledWhenOtherWorkRan = handled; });
             },
             nullptr});
  tcp::socket raw = rawClient();
  std::string bytes;
  ASSERT_TRUE(appendFrame(helloEnvelope(wire::ROLE_AGENT, "flood"), &bytes).ok());
  for (size_t i = 0; i < kBurst; ++i) {
    wire::Envelope hb;
    hb.mutable_heartbeat()->set_sequence(i);
    ASSERT_TRUE(appendFrame(hb, &bytes).ok());
  }
  ASSERT_LT(bytes.size(), 16u * 1024) << "the burst must fit one read";
  asio::write(raw, asio::buffer(bytes));  // in the socket before the server reads
  runFor(std::chrono::milliseconds(300));
  EXPECT_EQ(handled, kBurst) << "every frame is still handled";
  ASSERT_TRUE(handledWhenOtherWorkRan.has_value());
  EXPECT_LE(*handledWhenOtherWorkRan, kMaxFramesPerPass);
}

// Frames of sizes around the read chunk, written at once so that frames
// straddle reads: each arrives whole, once, in order, the link open.
TEST_F(ConnectionTest, FramesAroundTheReadChunkSizeArriveWholeAndInOrder) {
  const std::vector<size_t> sizes = {1, 500, kReadChunkBytes - 40, kReadChunkBytes, kReadChunkBytes + 1, 3000,
                                     7, 2 * kReadChunkBytes, 1, 1500};
  std::vector<std::pair<std::string, size_t>> got;
  acceptOne({wire::ROLE_MASTER, "master", {wire::ROLE_AGENT}},
            {nullptr, [&](wire::Envelope& e) {
               const auto& status = e.status_update().status();
               got.emplace_back(status.task_id(), status.message().size());
             },
             nullptr});
  tcp::socket raw = rawClient();
  std::string bytes;
  ASSERT_TRUE(appendFrame(helloEnvelope(wire::ROLE_AGENT, "sizes"), &bytes).ok());
  std::vector<std::pair<std::string, size_t>> sent;
  for (size_t round = 0; round < 3; ++round) {
    for (size_t size : sizes) {
      wire::Envelope e;
      auto* status = e.mutable_status_update()->mutable_status();
      status->set_task_id("t" + std::to_string(sent.size()));
      status->set_message(std::string(size, 'x'));
      ASSERT_TRUE(appendFrame(e, &bytes).ok());
      sent.emplace_back(status->task_id(), size);
    }
  }
  asio::write(raw, asio::buffer(bytes));
  for (int i = 0; i < 50 && got.size() < sent.size(); ++i) runFor(std::chrono::milliseconds(20));
  EXPECT_EQ(got, sent);
  EXPECT_TRUE(server_->open());
}

// Frames a coalescing link queues in one turn of the loop stay queued until
// the turn ends, then go out together, in order.
TEST_F(ConnectionTest, ACoalescingLinkWritesAtTheEndOfTheTurn) {
  Connection::Options options{wire::ROLE_MASTER, "master", {wire::ROLE_AGENT}};
  options.coalesceWrites = true;
  acceptOne(options, {});
  tcp::socket raw = rawClient();
  runFor(std::chrono::milliseconds(100));  // accepted; the Hello is written
  ASSERT_TRUE(server_);
  size_t hello = raw.available();
  ASSERT_GT(hello, 0u);
  std::string expected;
  std::optional<size_t> availableInTheTurn;
  asio::post(io_, [&] {
    for (uint64_t i = 0; i < 3; ++i) {
      wire::Envelope ack;
      ack.mutable_heartbeat_ack()->set_sequence(i);
      ASSERT_TRUE(server_->send(ack).ok());
      ASSERT_TRUE(appendFrame(ack, &expected).ok());
    }
    availableInTheTurn = raw.available();
  });
  runFor(std::chrono::milliseconds(100));
  ASSERT_TRUE(availableInTheTurn.has_value());
  EXPECT_EQ(*availableInTheTurn, hello) << "nothing is written during the turn";
  ASSERT_EQ(raw.available(), hello + expected.size());
  std::string got(hello + expected.size(), '\0');
  asio::read(raw, asio::buffer(got));
  EXPECT_EQ(got.substr(hello), expected);
}

// close() right after send() on a coalescing link still writes the frame,
// as the immediate write of a link that does not coalesce does.
TEST_F(ConnectionTest, ACoalescingLinkWritesWhatIsQueuedWhenItCloses) {
  Connection::Options options{wire::ROLE_MASTER, "master", {wire::ROLE_AGENT}};
  options.coalesceWrites = true;
  acceptOne(options, {});
  tcp::socket raw = rawClient();
  runFor(std::chrono::milliseconds(100));
  ASSERT_TRUE(server_);
  wire::Envelope error;
  error.mutable_error()->set_message("going away");
  std::string expected;
  ASSERT_TRUE(appendFrame(error, &expected).ok());
  asio::post(io_, [&] {
    ASSERT_TRUE(server_->send(error).ok());
    server_->close("done");
  });
  runFor(std::chrono::milliseconds(100));
  std::string got;
  boost::system::error_code ec;
  asio::read(raw, asio::dynamic_buffer(got), ec);  // to end of stream
  ASSERT_GE(got.size(), expected.size());
  EXPECT_EQ(got.substr(got.size() - expected.size()), expected);
}

TEST(ListenTcp, ListensOnAnEphemeralPort) {
  asio::io_context io;
  tcp::acceptor acceptor(io);
  ASSERT_TRUE(listenTcp(acceptor, HostPort{"127.0.0.1", 0}, "--listen"));
  EXPECT_NE(acceptor.local_endpoint().port(), 0);
}

TEST(ListenTcp, ANameIsNotAnAddress) {
  asio::io_context io;
  tcp::acceptor acceptor(io);
  Status st = listenTcp(acceptor, HostPort{"localhost", 0}, "--http-listen");
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().message, "--http-listen: 'localhost' is not an IP address");
  EXPECT_FALSE(acceptor.is_open());
}

TEST(ListenTcp, APortInUseIsNamed) {
  asio::io_context io;
  tcp::acceptor first(io);
  ASSERT_TRUE(listenTcp(first, HostPort{"127.0.0.1", 0}, "--listen"));
  uint16_t port = first.local_endpoint().port();
  tcp::acceptor second(io);
  Status st = listenTcp(second, HostPort{"127.0.0.1", port}, "--listen", " (http)");
  ASSERT_FALSE(st);
  std::string expected = "cannot listen (http) on 127.0.0.1:" + std::to_string(port) + ": ";
  EXPECT_EQ(st.error().message.rfind(expected, 0), 0u) << st.error().message;
}

// asyncConnect goes straight to a numeric address and through the resolver
// for a name; both connect, and a refused attempt names the address.
TEST_F(ConnectionTest, AsyncConnectTakesNumericAddressesAndNames) {
  uint16_t port = acceptor_.local_endpoint().port();
  int accepted = 0;
  std::function<void()> acceptNext = [&] {
    acceptor_.async_accept([&](const boost::system::error_code& ec, tcp::socket) {
      if (!ec) ++accepted;
      acceptNext();
    });
  };
  acceptNext();
  for (const std::string host : {"127.0.0.1", "localhost"}) {
    std::optional<Result<tcp::socket>> got;
    asyncConnect(io_, host, port, [&](Result<tcp::socket> s) { got.emplace(std::move(s)); });
    for (int i = 0; i < 200 && !got; ++i) runFor(std::chrono::milliseconds(10));
    ASSERT_TRUE(got) << host;
    ASSERT_TRUE(*got) << host << ": " << got->error().describe();
    boost::system::error_code ec;
    asio::ip::tcp::no_delay noDelay;
    (*got)->get_option(noDelay, ec);
    EXPECT_TRUE(noDelay.value()) << host;
    EXPECT_EQ((*got)->remote_endpoint().port(), port) << host;
  }
  for (int i = 0; i < 100 && accepted < 2; ++i) runFor(std::chrono::milliseconds(10));
  EXPECT_EQ(accepted, 2);

  // A port nobody listens on: the bound listener's, closed.
  acceptor_.close();
  std::optional<Result<tcp::socket>> refused;
  asyncConnect(io_, "127.0.0.1", port, [&](Result<tcp::socket> s) { refused.emplace(std::move(s)); });
  for (int i = 0; i < 200 && !refused; ++i) runFor(std::chrono::milliseconds(10));
  ASSERT_TRUE(refused);
  ASSERT_FALSE(*refused);
  EXPECT_NE(refused->error().describe().find("127.0.0.1:" + std::to_string(port)), std::string::npos)
      << refused->error().describe();
}

}  // namespace
}  // namespace allot
