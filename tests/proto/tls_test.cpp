// Connection over mutual TLS 1.3 with certificates made by scripts/allot-certs,
// plus the identity and handshake-timeout parts of Connection.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include <openssl/bio.h>
#include <openssl/ssl.h>

#include "proto/connection.h"
#include "proto/tls.h"
#include "tests/common/test_util.h"

namespace allot {
namespace {

using asio::ip::tcp;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

std::string runCerts(const std::string& args) {
  const char* root = std::getenv("ALLOT_SOURCE_ROOT");
  if (root == nullptr) return "ALLOT_SOURCE_ROOT is not set";
  std::string command = std::string(root) + "/scripts/allot-certs " + args + " >/dev/null";
  return std::system(command.c_str()) == 0 ? "" : "failed: " + command;
}

class TlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(fs::temp_directory_path() / ("allot-tls-test-" + std::to_string(getpid())));
    error_ = new std::string(runCerts(*dir_));
    if (error_->empty()) *error_ = runCerts(*dir_ + "/other");
    if (error_->empty()) *error_ = runCerts(*dir_ + " --principal fw2 --role framework");
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
    delete error_;
  }

  void SetUp() override {
    ASSERT_EQ(*error_, "");
    acceptor_.open(tcp::v4());
    acceptor_.bind(tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    acceptor_.listen();
  }

  static std::shared_ptr<ssl::context> context(const std::string& name, TlsSide side,
                                               const std::string& sub = "") {
    std::string base = *dir_ + (sub.empty() ? "" : "/" + sub);
    auto ctx = makeTlsContext({base + "/" + name + ".crt", base + "/" + name + ".key",
                               base + "/ca.crt"},
                              side);
    EXPECT_TRUE(ctx.ok()) << (ctx ? "" : ctx.error().describe());
    return ctx ? *ctx : nullptr;
  }

  // The server side: a master with `cert` accepting agents and schedulers.
  void serve(const std::string& cert, std::chrono::milliseconds timeout = 10s) {
    Connection::Options o;
    o.localRole = wire::ROLE_MASTER;
    o.localName = "master";
    o.acceptRoles = {wire::ROLE_AGENT, wire::ROLE_SCHEDULER};
    o.tls = context(cert, TlsSide::kServer);
    o.tlsSide = TlsSide::kServer;
    o.leaderEpoch = 7;
    o.handshakeTimeout = timeout;
    acceptor_.async_accept([this, o](const boost::system::error_code& ec, tcp::socket socket) {
      ASSERT_FALSE(ec);
      server_ = Connection::create(std::move(socket), o);
      server_->start({[this](const wire::Hello&) { serverHello_ = true; },
                      [this](wire::Envelope& e) { serverGot_.push_back(e.heartbeat().sequence()); },
                      [this](const std::string& r) { serverReason_ = r; }});
    });
  }

  // A client saying `role` over `ctx` (null: plaintext).
  void connect(wire::Role role, std::shared_ptr<ssl::context> ctx) {
    tcp::socket socket(io_);
    socket.connect(acceptor_.local_endpoint());
    Connection::Options o;
    o.localRole = role;
    o.localName = "client";
    o.acceptRoles = {wire::ROLE_MASTER};
    o.tls = std::move(ctx);
    o.requirePeerCertRole = "master";
    client_ = Connection::create(std::move(socket), o);
    client_->start({[this](const wire::Hello& h) { clientSawEpoch_ = h.leader_epoch(); },
                    nullptr, [this](const std::string& r) { clientReason_ = r; }});
  }

  bool bothClosed() { return !serverReason_.empty() && !clientReason_.empty(); }

  static std::string* dir_;
  static std::string* error_;
  asio::io_context io_;
  tcp::acceptor acceptor_{io_};
  std::shared_ptr<Connection> server_, client_;
  bool serverHello_ = false;
  std::vector<uint64_t> serverGot_;
  std::string serverReason_, clientReason_;
  uint64_t clientSawEpoch_ = 0;
};

std::string* TlsTest::dir_ = nullptr;
std::string* TlsTest::error_ = nullptr;

TEST_F(TlsTest, MutualTlsCarriesFramesAndNamesBothPeers) {
  serve("master");
  connect(wire::ROLE_AGENT, context("agent", TlsSide::kClient));
  for (uint64_t i = 0; i < 3; ++i) {
    wire::Envelope hb;
    hb.mutable_heartbeat()->set_sequence(i);
    ASSERT_TRUE(client_->send(hb).ok());  // queued until the handshake is done
  }
  ASSERT_TRUE(testing::runUntil(io_, [&] { return serverGot_.size() == 3; }, 5s)) << serverReason_;
  EXPECT_EQ(serverGot_, (std::vector<uint64_t>{0, 1, 2}));
  EXPECT_TRUE(server_->peer().tls);
  EXPECT_EQ(server_->peer().principal, "agent");
  EXPECT_EQ(server_->peer().certRole, "agent");
  EXPECT_EQ(client_->peer().principal, "master");
  EXPECT_EQ(client_->peer().certRole, "master");
  EXPECT_EQ(clientSawEpoch_, 7u);
}

TEST_F(TlsTest, SecondPrincipalOfARoleIsItsOwnCn) {
  serve("master");
  connect(wire::ROLE_SCHEDULER, context("fw2", TlsSide::kClient));
  ASSERT_TRUE(testing::runUntil(io_, [&] { return serverHello_; }, 5s)) << serverReason_;
  EXPECT_EQ(server_->peer().principal, "fw2");
  EXPECT_EQ(server_->peer().certRole, "framework");
}

TEST_F(TlsTest, ClientWithoutCertificateIsRefused) {
  serve("master");
  auto bare = std::make_shared<ssl::context>(ssl::context::tlsv13_client);
  bare->set_verify_mode(ssl::verify_peer);
  bare->load_verify_file(*dir_ + "/ca.crt");
  connect(wire::ROLE_AGENT, bare);
  ASSERT_TRUE(testing::runUntil(io_, [&] { return bothClosed(); }, 5s));
  EXPECT_FALSE(serverHello_);
  EXPECT_NE(serverReason_.find("TLS handshake"), std::string::npos) << serverReason_;
  EXPECT_NE(serverReason_.find("certificate"), std::string::npos) << serverReason_;
  // TLS 1.3: the client learns it at its first read.
  EXPECT_NE(clientReason_.find("TLS"), std::string::npos) << clientReason_;
  EXPECT_NE(clientReason_.find("certificate required"), std::string::npos) << clientReason_;
}

TEST_F(TlsTest, CertificateFromAnotherCaIsRefused) {
  serve("master");
  // Its own key and certificate from a CA the master does not trust; it
  // trusts the master's CA, so only the master can refuse it.
  auto foreign = makeTlsContext(
      {*dir_ + "/other/agent.crt", *dir_ + "/other/agent.key", *dir_ + "/ca.crt"},
      TlsSide::kClient);
  ASSERT_TRUE(foreign.ok());
  connect(wire::ROLE_AGENT, *foreign);
  ASSERT_TRUE(testing::runUntil(io_, [&] { return bothClosed(); }, 5s));
  EXPECT_FALSE(serverHello_);
  EXPECT_NE(serverReason_.find("certificate verify failed"), std::string::npos) << serverReason_;
  EXPECT_NE(clientReason_.find("unknown ca"), std::string::npos) << clientReason_;
}

TEST_F(TlsTest, HelloRoleMustMatchCertificateRole) {
  serve("master");
  connect(wire::ROLE_AGENT, context("framework", TlsSide::kClient));
  ASSERT_TRUE(testing::runUntil(io_, [&] { return bothClosed(); }, 5s));
  EXPECT_FALSE(serverHello_);
  const std::string expected =
      "Hello role ROLE_AGENT does not match certificate role 'framework' of principal framework";
  EXPECT_NE(serverReason_.find(expected), std::string::npos) << serverReason_;
  EXPECT_NE(clientReason_.find("peer rejected us: " + expected), std::string::npos)
      << clientReason_;
}

TEST_F(TlsTest, ClientRefusesAServerWhoseCertificateIsNotAMasters) {
  serve("agent");
  connect(wire::ROLE_AGENT, context("agent", TlsSide::kClient));
  ASSERT_TRUE(testing::runUntil(io_, [&] { return bothClosed(); }, 5s));
  EXPECT_NE(clientReason_.find("has role 'agent', expected 'master'"), std::string::npos)
      << clientReason_;
  EXPECT_FALSE(serverHello_);
}

TEST_F(TlsTest, PlaintextClientOnTlsPortIsRefused) {
  serve("master");
  connect(wire::ROLE_AGENT, nullptr);
  ASSERT_TRUE(testing::runUntil(io_, [&] { return bothClosed(); }, 5s));
  EXPECT_NE(serverReason_.find("TLS handshake"), std::string::npos) << serverReason_;
  EXPECT_FALSE(serverHello_);
}

TEST_F(TlsTest, SilentPeerIsClosedWhenTheHandshakeTimesOut) {
  serve("master", 200ms);
  tcp::socket silent(io_);
  silent.connect(acceptor_.local_endpoint());
  ASSERT_TRUE(testing::runUntil(io_, [&] { return !serverReason_.empty(); }, 5s));
  EXPECT_EQ(serverReason_, "handshake timed out after 200 ms");
}

TEST_F(TlsTest, MissingOrMismatchedFilesAreNamed) {
  auto partial = tlsContextFromFlags({*dir_ + "/agent.crt", "", ""}, TlsSide::kClient);
  ASSERT_FALSE(partial.ok());
  EXPECT_NE(partial.error().message.find("missing: --tls-key --tls-ca"), std::string::npos);
  auto none = tlsContextFromFlags({}, TlsSide::kClient);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, nullptr);
  auto absent = makeTlsContext({*dir_ + "/nope.crt", *dir_ + "/agent.key", *dir_ + "/ca.crt"},
                               TlsSide::kClient);
  ASSERT_FALSE(absent.ok());
  EXPECT_NE(absent.error().message.find("nope.crt"), std::string::npos);
  auto mismatched = makeTlsContext(
      {*dir_ + "/agent.crt", *dir_ + "/master.key", *dir_ + "/ca.crt"}, TlsSide::kServer);
  ASSERT_FALSE(mismatched.ok());
  EXPECT_NE(mismatched.error().message.find("master.key"), std::string::npos)
      << mismatched.error().message;
}

// TLS 1.3 servers send session tickets after the handshake unless told not
// to; allot clients never resume, so the master sends none (it saves the
// master a session serialization and encryption per ticket, and the client
// parsing them). Driven over a BIO pair so the client's session is visible.
TEST_F(TlsTest, ServerSendsNoSessionTickets) {
  auto serverCtx = context("master", TlsSide::kServer);
  auto clientCtx = context("agent", TlsSide::kClient);
  ASSERT_TRUE(serverCtx && clientCtx);
  SSL* server = SSL_new(serverCtx->native_handle());
  SSL* client = SSL_new(clientCtx->native_handle());
  BIO* serverBio = nullptr;
  BIO* clientBio = nullptr;
  ASSERT_EQ(BIO_new_bio_pair(&serverBio, 0, &clientBio, 0), 1);
  SSL_set_bio(server, serverBio, serverBio);
  SSL_set_bio(client, clientBio, clientBio);
  SSL_set_accept_state(server);
  SSL_set_connect_state(client);
  bool serverDone = false, clientDone = false;
  for (int round = 0; round < 10 && !(serverDone && clientDone); ++round) {
    if (!clientDone) clientDone = SSL_do_handshake(client) == 1;
    if (!serverDone) serverDone = SSL_do_handshake(server) == 1;
  }
  ASSERT_TRUE(serverDone && clientDone);
  // Application data after the handshake: any ticket would be read first.
  ASSERT_EQ(SSL_write(server, "x", 1), 1);
  char byte = 0;
  ASSERT_EQ(SSL_read(client, &byte, 1), 1);
  EXPECT_EQ(byte, 'x');
  EXPECT_EQ(SSL_SESSION_is_resumable(SSL_get0_session(client)), 0);
  SSL_free(client);
  SSL_free(server);
}

TEST(PeerIdentity, UnixSocketPeerCredentialsAreRead) {
  asio::io_context io;
  asio::local::stream_protocol::socket a(io), b(io);
  asio::local::connect_pair(a, b);
  auto conn = Connection::create(StreamSocket(std::move(a)), Connection::Options{});
  ASSERT_TRUE(conn->peer().pid.has_value());
  EXPECT_EQ(*conn->peer().pid, getpid());
  EXPECT_EQ(*conn->peer().uid, getuid());
  EXPECT_EQ(*conn->peer().gid, getgid());
  EXPECT_FALSE(conn->peer().tls);
}

}  // namespace
}  // namespace allot
