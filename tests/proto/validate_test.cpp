#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "proto/input_limits.h"
#include "proto/resources.h"
#include "proto/validate.h"

namespace allot {
namespace {

std::string refusal(const Status& st) { return st.ok() ? "ok" : st.error().describe(); }

TEST(Validate, AcceptsANormalLaunch) {
  wire::Envelope e;
  auto* a = e.mutable_accept_offers();
  a->add_offer_ids("O-1");
  auto* t = a->add_tasks();
  t->set_task_id("t1");
  t->mutable_command()->set_shell("echo hi");
  Resources::parse("cpus:1;mem:32;ports:[31000-31001]")->toWire(t->mutable_resources());
  EXPECT_EQ(refusal(validateFromScheduler(e)), "ok");
}

TEST(Validate, EveryLimitNamesTheField) {
  struct Case {
    std::function<void(wire::Envelope&)> build;
    const char* expected;
  };
  std::vector<Case> cases = {
      {[](wire::Envelope& e) {
         e.mutable_register_framework()->mutable_info()->set_id(std::string(257, 'x'));
       },
       "RegisterFramework.info.id: 257 bytes (limit 256)"},
      {[](wire::Envelope& e) {
         e.mutable_register_framework()->mutable_info()->set_weight(NAN);
       },
       "RegisterFramework.info.weight"},
      {[](wire::Envelope& e) {
         e.mutable_register_framework()->mutable_info()->set_failover_timeout_s(1e300);
       },
       "RegisterFramework.info.failover_timeout_s"},
      {[](wire::Envelope& e) {
         for (size_t i = 0; i <= limits::kOfferIdsPerMessageMax; ++i) e.mutable_decline_offers()->add_offer_ids("o");
       },
       "DeclineOffers.offer_ids: 1001 entries (limit 1000)"},
      {[](wire::Envelope& e) {
         for (size_t i = 0; i <= limits::kTasksPerAcceptMax; ++i) e.mutable_accept_offers()->add_tasks();
       },
       "AcceptOffers.tasks: 1001 entries (limit 1000)"},
      {[](wire::Envelope& e) {
         auto* r = e.mutable_accept_offers()->add_tasks()->add_resources();
         r->set_name("ports");
         for (size_t i = 0; i <= limits::kRangesPerResourceMax; ++i) r->add_ranges()->set_end(i);
       },
       "AcceptOffers.tasks[0].resources[0].ranges: 1025 entries (limit 1024)"},
      {[](wire::Envelope& e) {
         auto* env = e.mutable_accept_offers()->add_tasks()->mutable_command()->mutable_environment();
         (*env)["A"] = std::string(300 * 1024, 'x');
       },
       "AcceptOffers.tasks[0].command argv+environment"},
      {[](wire::Envelope& e) { e.mutable_kill_task()->set_grace_s(-1); }, "KillTask.grace_s"},
      {[](wire::Envelope& e) {
         for (size_t i = 0; i <= limits::kReconcileTasksMax; ++i) e.mutable_reconcile()->add_tasks();
       },
       "Reconcile.tasks: 10001 entries"},
      {[](wire::Envelope& e) { e.mutable_set_filters()->mutable_filters()->add_agent_ids(std::string(300, 'a')); },
       "SetFilters.filters.agent_ids[0]: 300 bytes"},
      {[](wire::Envelope& e) { e.mutable_hello(); }, "unexpected message from a scheduler"},
  };
  for (auto& c : cases) {
    wire::Envelope e;
    c.build(e);
    std::string got = refusal(validateFromScheduler(e));
    EXPECT_NE(got.find(c.expected), std::string::npos) << "got: " << got;
  }
}

TEST(Validate, ContainerImagesAndVolumes) {
  auto check = [](const std::function<void(wire::ContainerInfo&)>& build) {
    wire::Envelope e;
    auto* t = e.mutable_accept_offers()->add_tasks();
    t->set_task_id("t1");
    t->mutable_command()->set_shell("true");
    build(*t->mutable_container());
    return refusal(validateFromScheduler(e));
  };
  auto volume = [](const std::string& source, const std::string& target) {
    return [=](wire::ContainerInfo& c) {
      c.set_image("busybox");
      auto* v = c.add_volumes();
      v->set_source(source);
      v->set_container_path(target);
    };
  };
  EXPECT_EQ(check(volume("/data", "/mnt/data")), "ok");
  EXPECT_EQ(check(volume("cache", "/var/cache")), "ok");
  EXPECT_NE(check(volume("/data/../etc", "/mnt")).find("volumes[0].source: '..'"), std::string::npos);
  EXPECT_NE(check(volume("/data", "/a/../../etc")).find("volumes[0].container_path: '..'"), std::string::npos);
  EXPECT_NE(check(volume("/data", "relative")).find("must be absolute"), std::string::npos);
  EXPECT_NE(check(volume("/data", "/")).find("must be absolute and not '/'"), std::string::npos);
  EXPECT_NE(check(volume("/da\nta", "/x")).find("control characters"), std::string::npos);
  EXPECT_NE(check(volume(std::string(2000, 'a'), "/x")).find("2000 bytes (limit 1024)"), std::string::npos);
  EXPECT_NE(check([](wire::ContainerInfo& c) { c.set_image(std::string(600, 'a')); })
                .find("container.image: 600 bytes (limit 512)"),
            std::string::npos);
  EXPECT_NE(check([](wire::ContainerInfo& c) {
              c.set_image("busybox");
              for (size_t i = 0; i <= limits::kVolumesPerContainerMax; ++i) c.add_volumes();
            }).find("volumes: 17 entries (limit 16)"),
            std::string::npos);
  EXPECT_NE(check([](wire::ContainerInfo& c) { c.add_volumes(); }).find("volumes need an image"), std::string::npos);
}

TEST(Validate, AgentMessagesAreBoundedInTotal) {
  wire::Envelope e;
  auto* reg = e.mutable_register_agent();
  for (int i = 0; i < 3; ++i) {
    auto* ex = reg->add_executors();
    for (size_t j = 0; j < limits::kTasksPerAgentMax / 2; ++j) ex->add_tasks()->set_task_id("t");
  }
  EXPECT_NE(refusal(validateFromAgent(e)).find("RegisterAgent.executors[*].tasks: 15000 entries"),
            std::string::npos);
  wire::Envelope s;
  s.mutable_status_update()->mutable_status()->set_message(std::string(5000, 'm'));
  EXPECT_NE(refusal(validateFromAgent(s)).find("StatusUpdate.status.message: 5000 bytes"), std::string::npos);
  s.mutable_status_update()->mutable_status()->clear_message();
  s.mutable_status_update()->mutable_status()->set_state(static_cast<wire::TaskState>(99));
  EXPECT_NE(refusal(validateFromAgent(s)).find("StatusUpdate.status.state"), std::string::npos);
  wire::Envelope accept;
  accept.mutable_accept_offers();
  EXPECT_NE(refusal(validateFromAgent(accept)).find("unexpected message from an agent"), std::string::npos);
}

TEST(Validate, ExecutorAndMasterMessages) {
  wire::Envelope r;
  for (size_t i = 0; i <= limits::kTasksPerExecutorMax; ++i) r.mutable_register_executor()->add_unacknowledged();
  EXPECT_NE(refusal(validateFromExecutor(r)).find("RegisterExecutor.unacknowledged: 10001"), std::string::npos);
  wire::Envelope run;
  run.mutable_run_task()->mutable_task()->set_data(std::string(limits::kTaskDataBytesMax + 1, 'd'));
  EXPECT_EQ(refusal(validateFromMaster(run)), "RunTask.framework.id: empty");
  run.mutable_run_task()->mutable_framework()->set_id("F");
  run.mutable_run_task()->mutable_task()->set_task_id("t");
  EXPECT_NE(refusal(validateFromMaster(run)).find("RunTask.task.data"), std::string::npos);
}

// What the agent accepts from the master and from executors beyond the
// field limits: ids it needs, a usable heartbeat interval, no stray kinds.
TEST(Validate, AgentSideMessages) {
  wire::Envelope reg;
  reg.mutable_agent_registered()->set_heartbeat_interval_s(5);
  EXPECT_EQ(refusal(validateFromMaster(reg)), "AgentRegistered.agent_id: empty");
  reg.mutable_agent_registered()->set_agent_id("A");
  EXPECT_EQ(refusal(validateFromMaster(reg)), "ok");
  reg.mutable_agent_registered()->set_heartbeat_interval_s(1e-6);
  EXPECT_NE(refusal(validateFromMaster(reg)).find("heartbeat_interval_s"), std::string::npos);
  reg.mutable_agent_registered()->set_heartbeat_interval_s(0);  // the agent's default
  EXPECT_EQ(refusal(validateFromMaster(reg)), "ok");

  wire::Envelope error;
  error.mutable_error()->set_message(std::string(limits::kErrorMessageBytesMax + 1, 'e'));
  EXPECT_NE(refusal(validateFromMaster(error)).find("ErrorMessage.message: 4097 bytes"), std::string::npos);
  wire::Envelope stray;
  stray.mutable_accept_offers();
  EXPECT_NE(refusal(validateFromMaster(stray)).find("unexpected message from the master"), std::string::npos);

  wire::Envelope update;
  update.mutable_status_update()->mutable_status()->set_state(wire::TASK_RUNNING);
  EXPECT_EQ(refusal(validateFromExecutor(update)), "StatusUpdate.status.task_id: empty");
  wire::Envelope secret;
  secret.mutable_register_executor()->set_executor_secret(std::string(limits::kSecretBytesMax + 1, 's'));
  EXPECT_NE(refusal(validateFromExecutor(secret)).find("RegisterExecutor.executor_secret"), std::string::npos);
}

TEST(Validate, SdkSideMessages) {
  wire::Envelope offers;
  for (size_t i = 0; i <= limits::kOffersPerMessageMax; ++i) offers.mutable_resource_offers()->add_offers();
  EXPECT_EQ(refusal(validateFromMasterToScheduler(offers)), "ResourceOffers.offers: 1001 entries (limit 1000)");
  offers.mutable_resource_offers()->mutable_offers()->RemoveLast();
  EXPECT_EQ(refusal(validateFromMasterToScheduler(offers)), "ok");
  offers.mutable_resource_offers()->mutable_offers(7)->add_resources()->set_scalar(NAN);
  EXPECT_NE(refusal(validateFromMasterToScheduler(offers)).find("ResourceOffers.offers[7].resources[0].scalar"),
            std::string::npos);
  wire::Envelope registered;
  registered.mutable_framework_registered()->set_framework_id(std::string(limits::kIdBytesMax + 1, 'f'));
  EXPECT_NE(refusal(validateFromMasterToScheduler(registered)).find("FrameworkRegistered.framework_id: 257"),
            std::string::npos);

  wire::Envelope launch;
  launch.mutable_launch_task()->mutable_task()->set_task_id("t");
  EXPECT_EQ(refusal(validateFromAgentToExecutor(launch)), "ok");
  for (size_t i = 0; i <= limits::kArgvCountMax; ++i) launch.mutable_launch_task()->mutable_task()->mutable_command()->add_argv("a");
  EXPECT_NE(refusal(validateFromAgentToExecutor(launch)).find("LaunchTask.task.command.argv"), std::string::npos);
  wire::Envelope shutdown;
  shutdown.mutable_shutdown_executor()->set_grace_s(INFINITY);
  EXPECT_NE(refusal(validateFromAgentToExecutor(shutdown)).find("ShutdownExecutor.grace_s"), std::string::npos);
  wire::Envelope stray;
  stray.mutable_run_task();
  EXPECT_NE(refusal(validateFromAgentToExecutor(stray)).find("unexpected message from the agent"), std::string::npos);
}

// Ranges from the wire are merged once: many ranges cost n log n, not n^2.
TEST(Resources, ManyRangesStayCorrect) {
  ResourceList list;
  auto* r = list.Add();
  r->set_name("ports");
  for (uint64_t i = 0; i < 1024; ++i) {
    auto* range = r->add_ranges();
    range->set_begin((1023 - i) * 10);
    range->set_end((1023 - i) * 10 + 4);
  }
  auto parsed = Resources::fromWire(list);
  ASSERT_TRUE(parsed.ok());
  ASSERT_EQ(parsed->rangeSets().size(), 1u);
  EXPECT_EQ(parsed->rangeSets()[0].ranges.size(), 1024u);
  Resources half;
  for (uint64_t i = 0; i < 1024; i += 2) half.addRange("ports", i * 10, i * 10 + 4);
  EXPECT_TRUE(parsed->contains(half));
  Resources rest = *parsed - half;
  EXPECT_EQ(rest.rangeSets()[0].ranges.size(), 512u);
  EXPECT_FALSE(rest.contains(half));
  EXPECT_EQ(rest + half, *parsed);
  Resources edge;
  edge.addRange("ports", UINT64_MAX - 1, UINT64_MAX);
  edge.addRange("ports", 0, UINT64_MAX);
  EXPECT_EQ(edge.rangeSets()[0].ranges.size(), 1u);
}

TEST(Resources, ScalarSumsSaturateInsteadOfOverflowing) {
  Resources big = *Resources::parse("mem:1000000000000");
  Resources sum;
  for (int i = 0; i < 10000; ++i) sum += big;
  EXPECT_GT(sum.scalarMillis("mem"), 0);
}

}  // namespace
}  // namespace allot
