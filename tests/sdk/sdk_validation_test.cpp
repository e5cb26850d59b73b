// The C++ SDK drivers validate what they receive: a peer played
// by the test in the same io_context (a "master" on loopback TCP for the
// scheduler driver, an "agent" on a Unix socket for the executor driver)
// sends an offending message and then a normal one. The driver hands the
// refusal to error(), drops the message, and goes on with the next one.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <memory>
#include <vector>

#include "proto/connection.h"
#include "proto/input_limits.h"
#include "sdk/executor.h"
#include "sdk/scheduler.h"

namespace allot {
namespace {

using namespace std::chrono_literals;

// Accepts one connection and answers the registration with `registered`,
// then sends `then` in order.
class FakePeer {
 public:
  template <typename Acceptor>
  void serve(Acceptor& acceptor, wire::Role role, wire::Envelope registered, std::vector<wire::Envelope> then) {
    acceptor.async_accept([this, role, registered, then](const boost::system::error_code& ec, auto socket) {
      if (ec) return;
      Connection::Options o;
      o.localRole = role;
      o.localName = "fake-peer";
      conn_ = Connection::create(StreamSocket(std::move(socket)), o);
      Connection::Handlers h;
      h.onMessage = [this, registered, then](wire::Envelope& e) {
        if (!e.has_register_framework() && !e.has_register_executor()) return;
        (void)conn_->send(registered);
        for (const auto& m : then) (void)conn_->send(m);
      };
      conn_->start(std::move(h));
    });
  }
  ~FakePeer() {
    if (conn_) conn_->close("test over");
  }

 private:
  std::shared_ptr<Connection> conn_;
};

wire::Envelope offers(size_t n) {
  wire::Envelope e;
  for (size_t i = 0; i < n; ++i) {
    auto* o = e.mutable_resource_offers()->add_offers();
    o->set_offer_id("O-" + std::to_string(i));
    o->set_agent_id("A");
    auto* r = o->add_resources();
    r->set_name("cpus");
    r->set_scalar(1);
  }
  return e;
}

class RecordingScheduler : public Scheduler {
 public:
  void resourceOffers(SchedulerDriver&, const std::vector<wire::Offer>& o) override {
    offerBatches.push_back(o.size());
    if (offerBatches.size() == 1) io->stop();
  }
  void statusUpdate(SchedulerDriver&, const wire::TaskStatus&) override { ++updates; }
  void error(SchedulerDriver&, const std::string& message) override { errors.push_back(message); }

  asio::io_context* io = nullptr;
  std::vector<size_t> offerBatches;
  std::vector<std::string> errors;
  int updates = 0;
};

TEST(SdkValidation, SchedulerDriverReportsARefusedMessageAndGoesOn) {
  asio::io_context io;
  asio::ip::tcp::acceptor acceptor(io, {asio::ip::make_address("127.0.0.1"), 0});
  wire::Envelope registered;
  registered.mutable_framework_registered()->set_framework_id("F-1");
  wire::Envelope badUpdate;
  badUpdate.mutable_status_update()->mutable_status()->set_task_id(std::string(limits::kIdBytesMax + 1, 't'));
  FakePeer master;
  master.serve(acceptor, wire::ROLE_MASTER, registered,
               {offers(limits::kOffersPerMessageMax + 1), badUpdate, offers(3)});
  RecordingScheduler scheduler;
  scheduler.io = &io;
  wire::FrameworkInfo info;
  info.set_name("validation");
  SchedulerDriver driver(io, scheduler, info,
                         {.master = "127.0.0.1:" + std::to_string(acceptor.local_endpoint().port())});
  ASSERT_TRUE(driver.start().ok());
  io.run_for(10s);
  driver.stop(true);
  ASSERT_EQ(scheduler.offerBatches, std::vector<size_t>{3});
  EXPECT_EQ(scheduler.updates, 0);
  ASSERT_EQ(scheduler.errors.size(), 2u);
  EXPECT_NE(scheduler.errors[0].find("ResourceOffers.offers: 1001 entries (limit 1000)"), std::string::npos)
      << scheduler.errors[0];
  EXPECT_NE(scheduler.errors[1].find("StatusUpdate.status.task_id: 257 bytes"), std::string::npos)
      << scheduler.errors[1];
}

class RecordingExecutor : public Executor {
 public:
  void launchTask(ExecutorDriver&, const wire::TaskInfo& t) override {
    launched.push_back(t.task_id());
    io->stop();
  }
  void killTask(ExecutorDriver&, const std::string&, double) override { ++kills; }
  void shutdown(ExecutorDriver&, double) override {}
  void error(ExecutorDriver&, const std::string& message) override { errors.push_back(message); }

  asio::io_context* io = nullptr;
  std::vector<std::string> launched;
  std::vector<std::string> errors;
  int kills = 0;
};

TEST(SdkValidation, ExecutorDriverReportsARefusedMessageAndGoesOn) {
  asio::io_context io;
  std::string path = "/tmp/allot-sdk-validation-" + std::to_string(::getpid()) + ".sock";
  ::unlink(path.c_str());
  asio::local::stream_protocol::acceptor acceptor(io, asio::local::stream_protocol::endpoint(path));
  wire::Envelope registered;
  registered.mutable_executor_registered()->set_agent_id("A");
  wire::Envelope hugeTask;
  hugeTask.mutable_launch_task()->mutable_task()->set_task_id("huge");
  hugeTask.mutable_launch_task()->mutable_task()->set_data(std::string(limits::kTaskDataBytesMax + 1, 'd'));
  wire::Envelope badKill;
  badKill.mutable_kill_task()->set_task_id("huge");
  badKill.mutable_kill_task()->set_grace_s(NAN);
  wire::Envelope normal;
  normal.mutable_launch_task()->mutable_task()->set_task_id("normal");
  FakePeer agent;
  agent.serve(acceptor, wire::ROLE_AGENT, registered, {hugeTask, badKill, normal});
  RecordingExecutor executor;
  executor.io = &io;
  ExecutorOptions options;
  options.endpoint = "unix:" + path;
  options.frameworkId = "F-1";
  options.executorId = std::string(limits::kIdBytesMax, 'e');
  ExecutorDriver driver(io, executor, options);
  ASSERT_TRUE(driver.start().ok());
  io.run_for(10s);
  ::unlink(path.c_str());
  EXPECT_EQ(executor.launched, std::vector<std::string>{"normal"});
  EXPECT_EQ(executor.kills, 0);
  ASSERT_EQ(executor.errors.size(), 2u);
  EXPECT_NE(executor.errors[0].find("LaunchTask.task.data"), std::string::npos) << executor.errors[0];
  EXPECT_NE(executor.errors[1].find("KillTask.grace_s"), std::string::npos) << executor.errors[1];

  // What the agent would refuse is refused by sendStatus itself; a
  // 256-byte executor id still makes update ids within the limit.
  wire::TaskStatus tooLong;
  tooLong.set_task_id("normal");
  tooLong.set_state(wire::TASK_RUNNING);
  tooLong.set_message(std::string(limits::kStatusMessageBytesMax + 1, 'm'));
  Status st = driver.sendStatus(tooLong);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().describe().find("sendStatus.message: 4097 bytes"), std::string::npos);
  wire::TaskStatus fine;
  fine.set_task_id("normal");
  fine.set_state(wire::TASK_RUNNING);
  EXPECT_TRUE(driver.sendStatus(fine).ok());
  driver.stop();
}

}  // namespace
}  // namespace allot
