// Robustness and authorization against a real allot-master (and a real
// agent): each test sends hostile frames over loopback, checks the refusal
// the peer gets, and then checks that a normal framework still runs a task
// and that the master is still alive.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <functional>
#include <regex>

#include "http/client.h"
#include "proto/connection.h"
#include "proto/frame.h"
#include "proto/input_limits.h"
#include "proto/resources.h"
#include "tests/agent/cluster.h"
#include "tests/common/raw_peer.h"

namespace allot {
namespace {

using namespace std::chrono_literals;
using testing::Child;
using testing::Cluster;
using testing::RawPeer;
using testing::registerFramework;

int exitStatus(int st) { return st >= 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1; }

class Robustness : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    cluster_ = new Cluster();
    if (!cluster_->missing().empty()) return;
    started_ = cluster_->startMaster({"--registration-timeout", "1"}) && cluster_->startAgent();
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }
  void SetUp() override {
    if (auto why = cluster_->missing(); !why.empty()) GTEST_SKIP() << why;
    ASSERT_TRUE(started_) << cluster_->masterLog() << cluster_->agentLog();
  }
  // A normal framework still gets a task run, and the master lives.
  void expectClusterStillWorks() {
    Child ok = cluster_->execute({"--command", "true", "--resources", "cpus:0.1;mem:16"});
    EXPECT_EQ(exitStatus(ok.wait(30s)), 0) << ok.out() << ok.err();
    EXPECT_EQ(kill(cluster_->masterProcess().pid(), 0), 0) << "master died:\n" << cluster_->masterLog();
  }
  uint16_t port() const { return cluster_->masterPort(); }

  static Cluster* cluster_;
  static bool started_;
};
Cluster* Robustness::cluster_ = nullptr;
bool Robustness::started_ = false;

// ---------------------------------------------------------------- framing

TEST_F(Robustness, FrameAboveTheSizeLimitClosesOnlyThatLink) {
  RawPeer peer(port(), wire::ROLE_SCHEDULER);
  ASSERT_TRUE(peer.connected());
  peer.sendRaw(std::string("\xff\xff\xff\xff", 4));
  EXPECT_TRUE(peer.closedByMaster());
  expectClusterStillWorks();
}

TEST_F(Robustness, UndecodableFrameClosesOnlyThatLink) {
  RawPeer peer(port(), wire::ROLE_SCHEDULER);
  peer.sendRaw(std::string("\x00\x00\x00\x03\xff\xff\xff", 7));
  EXPECT_TRUE(peer.closedByMaster());
  expectClusterStillWorks();
}

TEST_F(Robustness, FirstFrameThatIsNotAHelloIsRefused) {
  RawPeer peer(port(), wire::ROLE_UNKNOWN);
  peer.send(registerFramework());
  EXPECT_TRUE(peer.closedByMaster());
  expectClusterStillWorks();
}

TEST_F(Robustness, PeerThatNeverRegistersIsClosed) {
  RawPeer peer(port(), wire::ROLE_SCHEDULER);
  auto error = peer.waitFor(wire::Envelope::kError);
  ASSERT_TRUE(error.has_value());
  EXPECT_NE(error->error().message().find("no registration within"), std::string::npos);
  EXPECT_TRUE(peer.closedByMaster());
  expectClusterStillWorks();
}

// A failover's burst: more connections waiting in the listen backlog than
// the master takes per accept completion (kAcceptBatch, 256) are all
// served, and the master keeps working.
TEST_F(Robustness, BurstBeyondOneAcceptBatchIsServed) {
  pid_t master = cluster_->masterProcess().pid();
  ASSERT_EQ(kill(master, SIGSTOP), 0);
  std::vector<std::unique_ptr<RawPeer>> peers;
  for (int i = 0; i < 600; ++i) peers.push_back(std::make_unique<RawPeer>(port(), wire::ROLE_SCHEDULER));
  ASSERT_EQ(kill(master, SIGCONT), 0);
  int served = 0;
  for (auto& peer : peers) {
    if (peer->connected() && peer->waitFor(wire::Envelope::kHello)) ++served;
  }
  EXPECT_EQ(served, 600);
  peers.clear();
  expectClusterStillWorks();
}

// ---------------------------------------------------------------- the handshake bound

// The value of an unlabelled metric on the master's /metrics (-1: none).
double metricValue(uint16_t httpPort, const std::string& name) {
  auto got = http::fetch(HostPort{"127.0.0.1", httpPort}, "GET", "/metrics");
  if (!got || got->status != 200) return -1;
  std::istringstream in(got->body);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(name + " ", 0) == 0) return std::stod(line.substr(name.size() + 1));
  }
  return -1;
}

// Connections that never finish their handshake (a reconnect storm's
// timed-out peers, a slow-loris client) hold at most
// --max-pending-handshakes slots; the rest wait in the listen backlog, and a
// real agent queued behind them still registers and runs a task. Peers that
// gave up while in the backlog are closed without a handshake.
TEST(HandshakeBound, PendingHandshakesStayWithinTheLimitAndAnAgentStillRegisters) {
  Cluster cluster;
  if (auto why = cluster.missing(); !why.empty()) GTEST_SKIP() << why;
  constexpr int kLimit = 8;
  std::string httpPortFile = cluster.dir() + "/http.port";
  ASSERT_TRUE(cluster.startMaster({"--max-pending-handshakes", std::to_string(kLimit),
                                   "--handshake-timeout", "1", "--http-listen", "127.0.0.1:0",
                                   "--http-port-file", httpPortFile}))
      << cluster.masterLog();
  uint16_t httpPort = 0;
  ASSERT_TRUE(testing::waitFor(
      [&] { return static_cast<bool>(std::ifstream(httpPortFile) >> httpPort); }, 10s));

  // Peers that connect while the master is stopped and give up before it
  // resumes: accepted, found closed, never handshaken.
  pid_t master = cluster.masterProcess().pid();
  ASSERT_EQ(kill(master, SIGSTOP), 0);
  {
    std::vector<std::unique_ptr<RawPeer>> quitters;
    for (int i = 0; i < 20; ++i) {
      quitters.push_back(std::make_unique<RawPeer>(cluster.masterPort(), wire::ROLE_UNKNOWN));
      ASSERT_TRUE(quitters.back()->connected());
    }
  }
  ASSERT_EQ(kill(master, SIGCONT), 0);
  EXPECT_TRUE(testing::waitFor(
      [&] { return metricValue(httpPort, "allot_master_connections_abandoned_total") == 20; }, 10s));

  // Five times the limit of silent connections: the master holds exactly
  // the limit mid-handshake and times them out a batch per second.
  std::vector<std::unique_ptr<RawPeer>> silent;
  for (int i = 0; i < 5 * kLimit; ++i) {
    silent.push_back(std::make_unique<RawPeer>(cluster.masterPort(), wire::ROLE_UNKNOWN));
    ASSERT_TRUE(silent.back()->connected());
  }
  EXPECT_TRUE(testing::waitFor(
      [&] { return metricValue(httpPort, "allot_master_pending_handshakes") == kLimit; }, 5s));
  ASSERT_TRUE(cluster.startAgent()) << cluster.agentLog() << cluster.masterLog();
  Child ok = cluster.execute({"--command", "true", "--resources", "cpus:0.1;mem:16"});
  EXPECT_EQ(exitStatus(ok.wait(30s)), 0) << ok.out() << ok.err();
  EXPECT_EQ(metricValue(httpPort, "allot_master_pending_handshakes_max"), kLimit);
  EXPECT_GE(metricValue(httpPort, "allot_master_accept_pauses_total"), 1);
  EXPECT_NE(cluster.masterLog().find("handshake timed out after 1000 ms"), std::string::npos);
  EXPECT_EQ(kill(master, 0), 0) << "master died:\n" << cluster.masterLog();
}

// ---------------------------------------------------------------- one test per limit

struct LimitCase {
  const char* name;
  wire::Role role;
  std::function<void(wire::Envelope&)> build;
  const char* field;  // what the ErrorMessage must name
};

class Limits : public Robustness, public ::testing::WithParamInterface<LimitCase> {};

TEST_P(Limits, OffendingFrameIsRefusedAndTheClusterKeepsWorking) {
  const LimitCase& c = GetParam();
  RawPeer peer(port(), c.role);
  ASSERT_TRUE(peer.connected());
  bool registers = c.role == wire::ROLE_SCHEDULER;
  wire::Envelope e;
  c.build(e);
  if (registers && !e.has_register_framework()) {
    peer.send(registerFramework());
    ASSERT_TRUE(peer.waitFor(wire::Envelope::kFrameworkRegistered).has_value());
  }
  if (c.role == wire::ROLE_AGENT && !e.has_register_agent()) {
    wire::Envelope reg;
    reg.mutable_register_agent()->mutable_info()->set_hostname("hostile");
    Resources::parse("cpus:0.001")->toWire(reg.mutable_register_agent()->mutable_info()->mutable_resources());
    peer.send(reg);
    ASSERT_TRUE(peer.waitFor(wire::Envelope::kAgentRegistered).has_value());
  }
  peer.send(e);
  auto error = peer.waitFor(wire::Envelope::kError);
  ASSERT_TRUE(error.has_value()) << "no ErrorMessage for " << c.name;
  EXPECT_NE(error->error().message().find(c.field), std::string::npos) << error->error().message();
  expectClusterStillWorks();
}

std::string big(size_t n) { return std::string(n, 'x'); }

INSTANTIATE_TEST_SUITE_P(
    Master, Limits,
    ::testing::Values(
        LimitCase{"FrameworkIdBytes", wire::ROLE_SCHEDULER,
                  [](wire::Envelope& e) { e = registerFramework(big(limits::kIdBytesMax + 1)); },
                  "RegisterFramework.info.id"},
        LimitCase{"FrameworkWeightNotFinite", wire::ROLE_SCHEDULER,
                  [](wire::Envelope& e) {
                    e = registerFramework();
                    e.mutable_register_framework()->mutable_info()->set_weight(INFINITY);
                  },
                  "RegisterFramework.info.weight"},
        LimitCase{"FilterAgentIds", wire::ROLE_SCHEDULER,
                  [](wire::Envelope& e) {
                    auto* f = e.mutable_set_filters()->mutable_filters();
                    for (size_t i = 0; i <= limits::kFilterAgentIdsMax; ++i) f->add_agent_ids("a");
                  },
                  "SetFilters.filters.agent_ids"},
        LimitCase{"OfferIdsPerAccept", wire::ROLE_SCHEDULER,
                  [](wire::Envelope& e) {
                    for (size_t i = 0; i <= limits::kOfferIdsPerMessageMax; ++i) e.mutable_accept_offers()->add_offer_ids("o");
                  },
                  "AcceptOffers.offer_ids"},
        LimitCase{"TasksPerAccept", wire::ROLE_SCHEDULER,
                  [](wire::Envelope& e) {
                    e.mutable_accept_offers()->add_offer_ids("o");
                    for (size_t i = 0; i <= limits::kTasksPerAcceptMax; ++i) e.mutable_accept_offers()->add_tasks();
                  },
                  "AcceptOffers.tasks: 1001 entries"},
        LimitCase{"RangesPerResource", wire::ROLE_SCHEDULER,
                  [](wire::Envelope& e) {
                    auto* r = e.mutable_accept_offers()->add_tasks()->add_resources();
                    r->set_name("ports");
                    for (uint64_t i = 0; i <= limits::kRangesPerResourceMax; ++i) {
                      r->add_ranges()->set_begin(2 * i);
                      r->mutable_ranges(static_cast<int>(i))->set_end(2 * i);
                    }
                  },
                  "resources[0].ranges"},
        LimitCase{"ResourcesPerList", wire::ROLE_SCHEDULER,
                  [](wire::Envelope& e) {
                    auto* t = e.mutable_accept_offers()->add_tasks();
                    for (size_t i = 0; i <= limits::kResourcesPerListMax; ++i) t->add_resources()->set_name("r" + std::to_string(i));
                  },
                  "AcceptOffers.tasks[0].resources: 33 entries"},
        LimitCase{"ArgvCount", wire::ROLE_SCHEDULER,
                  [](wire::Envelope& e) {
                    auto* c = e.mutable_accept_offers()->add_tasks()->mutable_command();
                    for (size_t i = 0; i <= limits::kArgvCountMax; ++i) c->add_argv("a");
                  },
                  "command.argv"},
        LimitCase{"CommandBytes", wire::ROLE_SCHEDULER,
                  [](wire::Envelope& e) {
                    auto* c = e.mutable_accept_offers()->add_tasks()->mutable_command();
                    for (int i = 0; i < 5; ++i) c->add_argv(big(limits::kCommandBytesMax / 4));
                  },
                  "argv+environment"},
        LimitCase{"ShellBytes", wire::ROLE_SCHEDULER,
                  [](wire::Envelope& e) {
                    e.mutable_accept_offers()->add_tasks()->mutable_command()->set_shell(big(limits::kShellBytesMax + 1));
                  },
                  "command.shell"},
        LimitCase{"TaskDataBytes", wire::ROLE_SCHEDULER,
                  [](wire::Envelope& e) { e.mutable_accept_offers()->add_tasks()->set_data(big(limits::kTaskDataBytesMax + 1)); },
                  "tasks[0].data"},
        LimitCase{"KillGrace", wire::ROLE_SCHEDULER,
                  [](wire::Envelope& e) { e.mutable_kill_task()->set_grace_s(NAN); }, "KillTask.grace_s"},
        LimitCase{"RefuseSeconds", wire::ROLE_SCHEDULER,
                  [](wire::Envelope& e) { e.mutable_decline_offers()->mutable_filters()->set_refuse_seconds(-1); },
                  "DeclineOffers.filters.refuse_seconds"},
        LimitCase{"ReconcileTasks", wire::ROLE_SCHEDULER,
                  [](wire::Envelope& e) {
                    for (size_t i = 0; i <= limits::kReconcileTasksMax; ++i) e.mutable_reconcile()->add_tasks();
                  },
                  "Reconcile.tasks"},
        LimitCase{"AcknowledgeIdBytes", wire::ROLE_SCHEDULER,
                  [](wire::Envelope& e) { e.mutable_acknowledge()->set_update_id(big(limits::kIdBytesMax + 1)); },
                  "Acknowledge.update_id"},
        LimitCase{"AgentHostnameBytes", wire::ROLE_AGENT,
                  [](wire::Envelope& e) { e.mutable_register_agent()->mutable_info()->set_hostname(big(limits::kNameBytesMax + 1)); },
                  "RegisterAgent.info.hostname"},
        LimitCase{"AgentAttributes", wire::ROLE_AGENT,
                  [](wire::Envelope& e) {
                    for (size_t i = 0; i <= limits::kAttributesMax; ++i) e.mutable_register_agent()->mutable_info()->add_attributes();
                  },
                  "RegisterAgent.info.attributes"},
        LimitCase{"AgentFrameworks", wire::ROLE_AGENT,
                  [](wire::Envelope& e) {
                    for (size_t i = 0; i <= limits::kFrameworksPerAgentMax; ++i) e.mutable_register_agent()->add_frameworks();
                  },
                  "RegisterAgent.frameworks"},
        LimitCase{"AgentExecutors", wire::ROLE_AGENT,
                  [](wire::Envelope& e) {
                    for (size_t i = 0; i <= limits::kExecutorsPerAgentMax; ++i) e.mutable_register_agent()->add_executors();
                  },
                  "RegisterAgent.executors"},
        LimitCase{"AgentTasks", wire::ROLE_AGENT,
                  [](wire::Envelope& e) {
                    auto* ex = e.mutable_register_agent()->add_executors();
                    for (size_t i = 0; i <= limits::kTasksPerAgentMax; ++i) ex->add_tasks();
                  },
                  "RegisterAgent.executors[*].tasks"},
        LimitCase{"StatusMessageBytes", wire::ROLE_AGENT,
                  [](wire::Envelope& e) {
                    e.mutable_status_update()->mutable_status()->set_message(big(limits::kStatusMessageBytesMax + 1));
                  },
                  "StatusUpdate.status.message"},
        LimitCase{"UsageReportExecutors", wire::ROLE_AGENT,
                  [](wire::Envelope& e) {
                    for (size_t i = 0; i <= limits::kExecutorsPerAgentMax; ++i) e.mutable_usage_report()->add_executors();
                  },
                  "UsageReport.executors"}),
    [](const ::testing::TestParamInfo<LimitCase>& info) { return std::string(info.param.name); });

// ---------------------------------------------------------------- authorization

std::string firstMatch(const std::string& text, const std::string& pattern) {
  std::smatch m;
  std::regex re(pattern);
  return std::regex_search(text, m, re) ? m[1].str() : "";
}

// A long task of a normal framework, and its framework id from the log.
struct RunningFramework {
  Child process;
  std::string id;
};

TEST_F(Robustness, AnotherFrameworkCannotKillTakeOverOrAcknowledge) {
  std::string before = cluster_->masterLog();
  Child victim = cluster_->execute({"--command", "sleep 2", "--resources", "cpus:0.1;mem:16",
                                    "--name", "victim"});
  std::string fid;
  ASSERT_TRUE(testing::waitFor([&] {
    fid = firstMatch(cluster_->masterLog().substr(before.size()), R"(framework (F-[0-9a-f]{32}) \(victim\) registered)");
    return !fid.empty();
  }, 10s)) << cluster_->masterLog();

  // Takeover without the secret.
  RawPeer thief(port(), wire::ROLE_SCHEDULER);
  thief.send(registerFramework(fid, "0123456789abcdef0123456789abcdef"));
  auto refused = thief.waitFor(wire::Envelope::kError);
  ASSERT_TRUE(refused.has_value());
  EXPECT_NE(refused->error().message().find("framework_secret does not match"), std::string::npos);

  // A registered framework names the victim's task in kill and ack.
  RawPeer other(port(), wire::ROLE_SCHEDULER);
  other.send(registerFramework());
  ASSERT_TRUE(other.waitFor(wire::Envelope::kFrameworkRegistered).has_value());
  wire::Envelope kill;
  kill.mutable_kill_task()->set_framework_id(fid);
  kill.mutable_kill_task()->set_task_id("victim-0");
  other.send(kill);
  auto error = other.waitFor(wire::Envelope::kError);
  ASSERT_TRUE(error.has_value());
  EXPECT_NE(error->error().message().find("not authorized to kill"), std::string::npos);
  wire::Envelope ack;
  ack.mutable_acknowledge()->set_framework_id(fid);
  ack.mutable_acknowledge()->set_task_id("victim-0");
  ack.mutable_acknowledge()->set_update_id("u");
  other.send(ack);
  EXPECT_TRUE(other.waitFor(wire::Envelope::kError).has_value());

  // The victim's task ran to its end.
  EXPECT_EQ(exitStatus(victim.wait(30s)), 0) << victim.out() << victim.err();
  EXPECT_NE(victim.out().find("FINISHED"), std::string::npos) << victim.out();
}

TEST_F(Robustness, AgentIdCannotBeTakenOverWithoutItsSecret) {
  std::string agentId = firstMatch(cluster_->agentLog(), R"(as agent (A-[0-9a-f]{32}))");
  ASSERT_FALSE(agentId.empty()) << cluster_->agentLog();
  RawPeer thief(port(), wire::ROLE_AGENT);
  wire::Envelope reg;
  reg.mutable_register_agent()->mutable_info()->set_id(agentId);
  Resources::parse("cpus:1000;mem:1000000")->toWire(reg.mutable_register_agent()->mutable_info()->mutable_resources());
  thief.send(reg);
  auto error = thief.waitFor(wire::Envelope::kError);
  ASSERT_TRUE(error.has_value());
  EXPECT_NE(error->error().message().find("agent_secret does not match"), std::string::npos);
  EXPECT_TRUE(thief.closedByMaster());
  expectClusterStillWorks();
}

TEST_F(Robustness, AgentCannotForgeUpdatesForTasksItDoesNotRun) {
  RawPeer agent(port(), wire::ROLE_AGENT);
  wire::Envelope reg;
  reg.mutable_register_agent()->mutable_info()->set_hostname("forger");
  Resources::parse("cpus:0.001")->toWire(reg.mutable_register_agent()->mutable_info()->mutable_resources());
  agent.send(reg);
  ASSERT_TRUE(agent.waitFor(wire::Envelope::kAgentRegistered).has_value());
  std::string before = cluster_->masterLog();
  Child victim = cluster_->execute({"--command", "sleep 2", "--resources", "cpus:0.1;mem:16",
                                    "--name", "forged"});
  std::string fid;
  ASSERT_TRUE(testing::waitFor([&] {
    fid = firstMatch(cluster_->masterLog().substr(before.size()), R"(framework (F-[0-9a-f]{32}) \(forged\) registered)");
    return !fid.empty();
  }, 10s));
  wire::Envelope forged;
  auto* s = forged.mutable_status_update()->mutable_status();
  s->set_framework_id(fid);
  s->set_task_id("forged-0");
  s->set_state(wire::TASK_FAILED);
  s->set_update_id("x");
  agent.send(forged);
  auto error = agent.waitFor(wire::Envelope::kError);
  ASSERT_TRUE(error.has_value());
  EXPECT_NE(error->error().message().find("does not run on agent"), std::string::npos);
  EXPECT_EQ(exitStatus(victim.wait(30s)), 0) << victim.out() << victim.err();
  EXPECT_NE(victim.out().find("FINISHED"), std::string::npos) << victim.out();
}

// With an ACL file: a framework asking for a user it may not have is refused.
TEST(RobustnessAcls, UnauthorizedFrameworkAndUserAreRefused) {
  Cluster cluster;
  if (auto why = cluster.missing(); !why.empty()) GTEST_SKIP() << why;
  std::string acls = cluster.dir() + "/acls";
  {
    std::ofstream out(acls);
    out << "register_agent *\nregister_framework * users=nobody\n";
  }
  ASSERT_TRUE(cluster.startMaster({"--acls", acls}));
  ASSERT_TRUE(cluster.startAgent()) << cluster.agentLog();
  Child root = cluster.execute({"--command", "true", "--resources", "cpus:0.1;mem:16", "--user", "root"});
  EXPECT_NE(exitStatus(root.wait(30s)), 0);
  EXPECT_NE((root.out() + root.err()).find("may not run tasks as user 'root'"), std::string::npos)
      << root.out() << root.err();
  Child ok = cluster.execute({"--command", "true", "--resources", "cpus:0.1;mem:16"});
  EXPECT_EQ(exitStatus(ok.wait(30s)), 0) << ok.out() << ok.err();
}

TEST(RobustnessAcls, MasterRefusesABadAclFileNamingLineAndColumn) {
  Cluster cluster;
  if (auto why = cluster.missing(); !why.empty()) GTEST_SKIP() << why;
  std::string acls = cluster.dir() + "/acls";
  {
    std::ofstream out(acls);
    out << "register_agent *\nregister_framework * colour=blue\n";
  }
  EXPECT_FALSE(cluster.startMaster({"--acls", acls}));
  EXPECT_NE(cluster.masterLog().find(acls + ":2:22: unknown option 'colour'"), std::string::npos)
      << cluster.masterLog();
}

}  // namespace
}  // namespace allot
