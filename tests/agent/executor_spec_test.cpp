// Unit tests of agent/executor_spec.h: the executor a task runs in and the
// process an executor's container starts with.
#include <algorithm>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "agent/executor_spec.h"

namespace allot {
namespace {

wire::FrameworkInfo framework(const std::string& user = "") {
  wire::FrameworkInfo f;
  f.set_id("f1");
  f.set_user(user);
  return f;
}

wire::TaskInfo commandTask(const std::string& id, const std::string& user = "") {
  wire::TaskInfo t;
  t.set_task_id(id);
  t.mutable_command()->set_shell("true");
  t.mutable_command()->set_user(user);
  return t;
}

bool hasEnv(const LaunchSpec& spec, const std::string& entry) {
  return std::find(spec.env.begin(), spec.env.end(), entry) != spec.env.end();
}

TEST(ExecutorFor, ACommandTaskRunsInItsFrameworksBuiltInExecutor) {
  wire::ExecutorInfo e = executorFor(framework(), commandTask("t1"), "nobody");
  EXPECT_EQ(e.executor_id(), kCommandExecutorId);
  EXPECT_EQ(e.framework_id(), "f1");
  EXPECT_TRUE(isBuiltinExecutor(e));
}

TEST(ExecutorFor, ACommandTaskOfAnotherUserGetsACommandExecutorOfItsOwn) {
  wire::ExecutorInfo own = executorFor(framework("alice"), commandTask("t1", "bob"), "nobody");
  EXPECT_EQ(own.executor_id(), std::string(kCommandExecutorId) + ".bob");
  EXPECT_EQ(own.command().user(), "bob");
  wire::ExecutorInfo same = executorFor(framework("alice"), commandTask("t2", "alice"), "nobody");
  EXPECT_EQ(same.executor_id(), kCommandExecutorId);
  wire::ExecutorInfo byDefault = executorFor(framework(), commandTask("t3", "nobody"), "nobody");
  EXPECT_EQ(byDefault.executor_id(), kCommandExecutorId) << "the default user is the framework's";
}

TEST(ExecutorFor, ATaskWithItsOwnExecutorKeepsItNamedByTheTaskIfUnnamed) {
  wire::TaskInfo t = commandTask("t1");
  t.mutable_executor()->mutable_command()->add_argv("/bin/my-executor");
  wire::ExecutorInfo e = executorFor(framework(), t, "");
  EXPECT_EQ(e.executor_id(), "t1");
  EXPECT_FALSE(isBuiltinExecutor(e));
}

TEST(ExecutorLaunchSpec, TheExecutorGetsItsIdentityAndNeverTheAgentsSystemdVariables) {
  asio::io_context io;
  wire::ExecutorInfo executor;
  executor.set_executor_id("e1");
  executor.mutable_command()->set_shell("exec my-executor");
  auto* env = executor.mutable_command()->mutable_environment();
  (*env)["COLOR"] = "blue";
  (*env)["NOTIFY_SOCKET"] = "/run/systemd/notify";
  (*env)["WATCHDOG_USEC"] = "1000";
  Container c(io, "f1.e1", 1, framework(), executor);
  c.sandbox = "/w/sandboxes/f1.e1.1";
  c.secret = "s3cret";
  LaunchSpec spec = executorLaunchSpec(c, ExecutorSite{.executorPath = "/usr/libexec/allot-executor",
                                                       .socketPath = "/w/agent.sock",
                                                       .agentId = "a1",
                                                       .workDir = "/w",
                                                       .recoveryTimeout = std::chrono::seconds(900)});
  EXPECT_EQ(spec.argv, (std::vector<std::string>{"/bin/sh", "-c", "exec my-executor"}));
  EXPECT_TRUE(hasEnv(spec, "ALLOT_AGENT_ENDPOINT=unix:/w/agent.sock"));
  EXPECT_TRUE(hasEnv(spec, "ALLOT_AGENT_ID=a1"));
  EXPECT_TRUE(hasEnv(spec, "ALLOT_EXECUTOR_SECRET=s3cret"));
  EXPECT_TRUE(hasEnv(spec, "ALLOT_SANDBOX_DIR=/w/sandboxes/f1.e1.1"));
  EXPECT_TRUE(hasEnv(spec, "COLOR=blue"));
  EXPECT_FALSE(hasEnv(spec, "NOTIFY_SOCKET=/run/systemd/notify"));
  EXPECT_FALSE(hasEnv(spec, "WATCHDOG_USEC=1000"));
  EXPECT_EQ(spec.workDir, "/w/sandboxes/f1.e1.1");
  EXPECT_EQ(spec.stdoutPath, "/w/sandboxes/f1.e1.1/stdout");
  EXPECT_TRUE(spec.setup.noNewPrivs);
  EXPECT_EQ(spec.setup.uid, -1) << "no run-as user: the agent's own";
}

}  // namespace
}  // namespace allot
