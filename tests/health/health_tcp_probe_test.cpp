// The TCP check (sdk/health_check.h makeTcpProbe) with a twin of the
// kernel's socket table (sdk/health_listeners.h ListenerSource): its answer
// is the verdict, and where it cannot answer (no sock_diag) the check
// connects instead, against real loopback sockets either way.
#include <cerrno>
#include <optional>

#include <gtest/gtest.h>

#include "base/asio.h"
#include "sdk/health_check.h"
#include "sdk/health_listeners.h"
#include "tests/common/test_util.h"
#include "tests/health/probe_test.h"

namespace allot {
namespace {

using namespace std::chrono_literals;
using tcp = asio::ip::tcp;

// A kernel without sock_diag for TCP, or one that says `answer`.
class ListenersTwin final : public ListenerSource {
 public:
  explicit ListenersTwin(std::optional<LoopbackListeners> answer = std::nullopt) : answer_(answer) {}
  Result<LoopbackListeners> loopback(uint16_t, TimePoint) override {
    ++asked;
    if (answer_) return *answer_;
    return Error{"sock_diag for TCP: not in this kernel", EPROTONOSUPPORT};
  }
  int asked = 0;

 private:
  std::optional<LoopbackListeners> answer_;
};

class TcpCheck : public ProbeTest {
 protected:
  // A port of 127.0.0.1 that is bound (so nobody else takes it) but not listening.
  tcp::acceptor reserved() {
    tcp::acceptor a(io_);
    a.open(tcp::v4());
    a.bind({asio::ip::address_v4::loopback(), 0});
    return a;
  }
};

TEST_F(TcpCheck, WithoutSockDiagAListenerIsHealthyByConnecting) {
  tcp::acceptor listening(io_, {asio::ip::address_v4::loopback(), 0});
  auto twin = std::make_shared<ListenersTwin>();
  auto probe = makeTcpProbe(io_, listening.local_endpoint().port(), twin);
  for (int i = 0; i < 2; ++i) {
    HealthVerdict v = attempt(*probe);
    EXPECT_TRUE(v.healthy) << v.output;
    EXPECT_NE(v.output.find("connected"), std::string::npos) << v.output;
  }
  EXPECT_EQ(twin->asked, 1) << "once the table cannot answer, the check connects without asking";
}

TEST_F(TcpCheck, WithoutSockDiagNothingListeningIsUnhealthyByConnecting) {
  tcp::acceptor bound = reserved();
  auto probe = makeTcpProbe(io_, bound.local_endpoint().port(), std::make_shared<ListenersTwin>());
  HealthVerdict v = attempt(*probe);
  EXPECT_FALSE(v.healthy);
  EXPECT_NE(v.output.find("refused"), std::string::npos) << v.output;
}

// The table's answer is the verdict: no connection is made to check it.
TEST_F(TcpCheck, TheTablesAnswerIsTheVerdict) {
  tcp::acceptor bound = reserved();
  uint16_t port = bound.local_endpoint().port();
  auto accepting = makeTcpProbe(io_, port, std::make_shared<ListenersTwin>(LoopbackListeners{1, 1}));
  HealthVerdict v = attempt(*accepting);
  EXPECT_TRUE(v.healthy) << v.output;
  EXPECT_NE(v.output.find("listening"), std::string::npos) << v.output;
  auto full = makeTcpProbe(io_, port, std::make_shared<ListenersTwin>(LoopbackListeners{1, 0}));
  v = attempt(*full);
  EXPECT_FALSE(v.healthy);
  EXPECT_NE(v.output.find("accept queue full"), std::string::npos) << v.output;
}

}  // namespace
}  // namespace allot
