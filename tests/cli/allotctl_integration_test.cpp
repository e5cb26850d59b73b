// A real allot-master (with --http-listen), allot-agent (with
// --http-listen) and allot-execute on loopback; allotctl and the HTTP
// endpoints checked against each other.
#include <sstream>

#include <gtest/gtest.h>

#include <google/protobuf/util/json_util.h>

#include "http/client.h"
#include "proto/state.pb.h"
#include "tests/agent/cluster.h"
#include "tests/common/test_util.h"
#include "tests/common/agent_cgroups.h"

namespace allot::testing {
namespace {

using namespace std::chrono_literals;

class OpsCluster : public ::testing::Test {
 protected:
  void SetUp() override {
    for (auto [var, out] : {std::pair{"ALLOT_MASTER", &master_}, {"ALLOT_AGENT", &agent_},
                            {"ALLOT_EXECUTE", &execute_}, {"ALLOTCTL", &allotctl_}}) {
      const char* v = envOr(var);
      if (!v) GTEST_SKIP() << var << " not set (binary not built)";
      *out = v;
    }
    char tmpl[] = "/tmp/allot-ops-it-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    ::chmod(dir_.c_str(), 0711);  // executors run as the agent's --default-user (nobody)
    masterProc_ = Child({master_, "--listen", "127.0.0.1:0", "--port-file", dir_ + "/m.port",
                         "--http-listen", "127.0.0.1:0", "--http-port-file", dir_ + "/m.http",
                         "--allocation-interval", "0.2", "--refuse-seconds", "0.2"},
                        dir_ + "/master.out", dir_ + "/master.err");
    ASSERT_TRUE(waitFor([&] { return readPort(dir_ + "/m.http") > 0; }, 10s)) << readAll(dir_ + "/master.err");
    masterPort_ = readPort(dir_ + "/m.port");
    http_ = {"127.0.0.1", readPort(dir_ + "/m.http")};
    agentProc_ = Child({agent_, "--master", "127.0.0.1:" + std::to_string(masterPort_), "--work-dir",
                        dir_ + "/work", "--resources", "cpus:4;mem:2048;disk:1024",
                        "--attributes", "rack:r7", "--http-listen", "127.0.0.1:0",
                        "--http-port-file", dir_ + "/a.http", "--usage-interval", "0.5",
                        "--executor-idle-timeout", "0.5"},
                       dir_ + "/agent.out", dir_ + "/agent.err");
    ASSERT_TRUE(waitFor([&] { return readAll(dir_ + "/agent.err").find("registered with master") !=
                                     std::string::npos; }, 15s)) << readAll(dir_ + "/agent.err");
    agentHttp_ = {"127.0.0.1", readPort(dir_ + "/a.http")};
  }
  void TearDown() override {
    for (auto& e : executes_) e.kill(SIGKILL);
    agentProc_.kill(SIGKILL);
    for (int i = 0; i < 3 && !dir_.empty(); ++i) {
      for (pid_t p : processesUnder(dir_ + "/work")) ::kill(p, SIGKILL);
      std::this_thread::sleep_for(50ms);
    }
    masterProc_.kill(SIGKILL);
    if (dir_.empty()) return;
    // The agent left its tracking cgroups behind (by design: executors
    // outlive an agent restart); the test removes them.
    EXPECT_EQ(removeAgentCgroupTree(defaultAgentCgroupsRoot(dir_ + "/work")), "");
    fs::remove_all(dir_);
  }

  Child& execute(const std::string& name, const std::string& command, const std::string& resources,
                 std::vector<std::string> extra = {}) {
    ++runs_;
    std::string base = dir_ + "/execute" + std::to_string(runs_);
    std::vector<std::string> args{execute_, "--master", "127.0.0.1:" + std::to_string(masterPort_),
                                  "--name", name, "--command", command,
                                  "--resources", resources, "--timeout", "60"};
    args.insert(args.end(), extra.begin(), extra.end());
    executes_.emplace_back(args, base + ".out", base + ".err");
    return executes_.back();
  }

  struct CtlResult {
    int code = -1;
    std::string out, err;
  };
  CtlResult ctl(std::vector<std::string> args) {
    args.insert(args.begin(), {allotctl_, "--master", http_.host + ":" + std::to_string(http_.port)});
    ++runs_;
    std::string base = dir_ + "/ctl" + std::to_string(runs_);
    Child c(args, base + ".out", base + ".err");
    int st = c.wait(15s);
    return {st >= 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1, c.out(), c.err()};
  }

  state::State getState(const HostPort& where) {
    state::State s;
    auto r = http::fetch(where, "GET", "/state");
    if (!r || r->status != 200) {
      ADD_FAILURE() << "GET /state: " << (r ? r->body : r.error().describe());
      return s;
    }
    auto st = google::protobuf::util::JsonStringToMessage(r->body, &s);
    EXPECT_TRUE(st.ok()) << st.ToString() << "\n" << r->body;
    return s;
  }

  std::string metrics(const HostPort& where) {
    auto r = http::fetch(where, "GET", "/metrics");
    return r && r->status == 200 ? r->body : "";
  }

  // The task's state as the master's /state shows it ("" when absent).
  std::string taskState(const std::string& taskId) {
    state::State s = getState(http_);
    for (const auto& t : s.master().tasks()) {
      if (t.task_id() == taskId) return wire::TaskState_Name(t.state());
    }
    return "";
  }

  std::string master_, agent_, execute_, allotctl_, dir_;
  uint16_t masterPort_ = 0;
  HostPort http_, agentHttp_;
  Child masterProc_, agentProc_;
  std::deque<Child> executes_;
  int runs_ = 0;
};

// This agent runs no images (no filesystem/linux): the launch is refused,
// and the ended task still names the image it asked for.
TEST_F(OpsCluster, TasksListShowsEachTasksImage) {
  Child& run = execute("ops-img", "true", "cpus:0.1;mem:32", {"--image", "registry.example:5000/web:1"});
  ASSERT_TRUE(waitFor([&] { return run.out().find("INVALID_LAUNCH") != std::string::npos; }, 20s))
      << run.out() << run.err();
  CtlResult tasks = ctl({"tasks"});
  ASSERT_EQ(tasks.code, 0) << tasks.err;
  EXPECT_NE(tasks.out.find("IMAGE"), std::string::npos) << tasks.out;
  std::istringstream lines(tasks.out);
  std::string line;
  bool shown = false;
  while (std::getline(lines, line)) {
    shown |= line.find("ops-img-0") != std::string::npos &&
             line.find("registry.example:5000/web:1") != std::string::npos;
  }
  EXPECT_TRUE(shown) << tasks.out;
}

TEST_F(OpsCluster, StateAndMetricsShowTheRunningTaskOnMasterAndAgent) {
  execute("ops-web", "sleep 60", "cpus:1;mem:128");
  ASSERT_TRUE(waitFor([&] { return taskState("ops-web-0") == "TASK_RUNNING"; }, 20s));

  auto health = http::fetch(http_, "GET", "/health");
  ASSERT_TRUE(health);
  EXPECT_NE(health->body.find("\"status\":\"ok\""), std::string::npos);

  state::MasterState m = getState(http_).master();
  ASSERT_EQ(m.agents_size(), 1);
  const auto& a = m.agents(0);
  EXPECT_TRUE(a.connected());
  EXPECT_EQ(a.task_count(), 1u);
  ASSERT_EQ(a.attributes_size(), 1);
  EXPECT_EQ(a.attributes(0).value(), "r7");
  auto scalar = [](const auto& list, const char* name) {
    for (const auto& r : list) if (r.name() == name) return r.scalar();
    return -1.0;
  };
  EXPECT_EQ(scalar(a.total(), "cpus"), 4);
  EXPECT_GE(scalar(a.used(), "cpus"), 1);
  EXPECT_DOUBLE_EQ(scalar(a.used(), "cpus") + scalar(a.free(), "cpus"), 4);
  ASSERT_EQ(m.frameworks_size(), 1);
  EXPECT_EQ(m.frameworks(0).name(), "ops-web");
  EXPECT_GT(m.frameworks(0).dominant_share(), 0);
  EXPECT_EQ(m.frameworks(0).weight(), 1);

  state::AgentState as = getState(agentHttp_).agent();
  EXPECT_EQ(as.agent_id(), a.id());
  EXPECT_TRUE(as.registered());
  ASSERT_EQ(as.executors_size(), 1);
  const auto& ex = as.executors(0);
  EXPECT_GT(ex.pid(), 0);
  EXPECT_EQ(ex.phase(), "running");
  EXPECT_GT(ex.cgroups_size(), 0);
  EXPECT_EQ(scalar(ex.limits(), "mem"), 128);
  ASSERT_EQ(ex.tasks_size(), 1);
  EXPECT_EQ(ex.tasks(0).task_id(), "ops-web-0");
  EXPECT_EQ(ex.tasks(0).state(), wire::TASK_RUNNING);

  std::string mm = metrics(http_);
  EXPECT_NE(mm.find("allot_master_tasks{state=\"TASK_RUNNING\"} 1"), std::string::npos) << mm;
  EXPECT_NE(mm.find("allot_master_agents 1"), std::string::npos);
  EXPECT_NE(mm.find("allot_master_frameworks 1"), std::string::npos);
  EXPECT_NE(mm.find("allot_master_allocation_seconds_count"), std::string::npos);
  EXPECT_EQ(mm.find("allot_master_offers_sent_total 0"), std::string::npos) << "no offer counted";
  std::string am = metrics(agentHttp_);
  EXPECT_NE(am.find("allot_agent_launch_seconds_count 1"), std::string::npos) << am;
  EXPECT_NE(am.find("allot_agent_tasks_live 1"), std::string::npos);
  EXPECT_NE(am.find("allot_agent_registered 1"), std::string::npos);
}

TEST_F(OpsCluster, EveryListCommandPrintsATableAndParsableJson) {
  execute("ops-list", "sleep 60", "cpus:0.5;mem:64");
  ASSERT_TRUE(waitFor([&] { return taskState("ops-list-0") == "TASK_RUNNING"; }, 20s));
  for (std::string cmd : {"agents", "frameworks", "tasks", "offers", "shares"}) {
    CtlResult table = ctl({cmd});
    EXPECT_EQ(table.code, 0) << cmd << ": " << table.err;
    EXPECT_EQ(table.out.rfind("ID", 0) == 0 || table.out.rfind("FRAMEWORK", 0) == 0, true) << table.out;
    CtlResult json = ctl({cmd, "--json"});
    ASSERT_EQ(json.code, 0) << cmd << ": " << json.err;
    std::string key = cmd == "shares" ? "frameworks" : cmd;
    state::MasterState parsed;
    auto st = google::protobuf::util::JsonStringToMessage("{\"" + key + "\":" + json.out + "}", &parsed);
    ASSERT_TRUE(st.ok()) << cmd << ": " << st.ToString() << "\n" << json.out;
    if (cmd == "agents") {
      ASSERT_EQ(parsed.agents_size(), 1);
      EXPECT_NE(table.out.find(parsed.agents(0).id()), std::string::npos);
      EXPECT_NE(table.out.find("rack:r7"), std::string::npos);
    } else if (cmd == "tasks") {
      ASSERT_EQ(parsed.tasks_size(), 1);
      EXPECT_EQ(parsed.tasks(0).task_id(), "ops-list-0");
      EXPECT_NE(table.out.find("RUNNING"), std::string::npos);
    } else if (cmd == "frameworks" || cmd == "shares") {
      ASSERT_EQ(parsed.frameworks_size(), 1);
      EXPECT_NE(table.out.find("ops-list"), std::string::npos);
    }
  }
}

TEST_F(OpsCluster, ExitCodesTellScriptsWhatHappened) {
  EXPECT_EQ(ctl({"kill", "no-such-task"}).code, 4);
  EXPECT_EQ(ctl({"drain", "no-such-agent"}).code, 4);
  EXPECT_EQ(ctl({"frobnicate"}).code, 2);
  EXPECT_EQ(ctl({"kill"}).code, 2);
  CtlResult unreachable = ctl({"--master", "127.0.0.1:1", "agents"});
  EXPECT_EQ(unreachable.code, 3) << unreachable.err;
}

TEST_F(OpsCluster, RoleWeightAndQuotaAreSetAtRunTime) {
  CtlResult w = ctl({"role", "weight", "batch", "3"});
  ASSERT_EQ(w.code, 0) << w.err;
  CtlResult q = ctl({"role", "quota", "batch", "cpus:1;mem:256"});
  ASSERT_EQ(q.code, 0) << q.err;
  CtlResult table = ctl({"roles"});
  ASSERT_EQ(table.code, 0) << table.err;
  EXPECT_EQ(table.out.rfind("ROLE", 0), 0u) << table.out;
  EXPECT_NE(table.out.find("batch"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("cpus:1;mem:256"), std::string::npos) << table.out;
  // The table has what --json has: which roles are set at run time, and
  // where (this master has no --zk or --work-dir: nowhere lasting).
  auto lineOf = [&](const std::string& prefix) {
    size_t at = table.out.find("\n" + prefix);
    if (at == std::string::npos) return std::string();
    size_t end = table.out.find('\n', at + 1);
    return table.out.substr(at + 1, end - at - 1);
  };
  EXPECT_NE(table.out.substr(0, table.out.find('\n')).find("SET"), std::string::npos) << table.out;
  EXPECT_NE(lineOf("batch").find("run-time"), std::string::npos) << table.out;
  EXPECT_NE(lineOf("run-time settings stored in: none (no --zk or --work-dir)"), "") << table.out;
  for (size_t at = 0, end; at < table.out.size(); at = end + 1) {
    end = table.out.find('\n', at);
    EXPECT_LE(end - at, 80u) << "the table is wider than a terminal:\n" << table.out;
  }
  CtlResult json = ctl({"roles", "--json"});
  ASSERT_EQ(json.code, 0) << json.err;
  EXPECT_NE(json.out.find("{\"name\":\"batch\",\"weight\":3,\"quota\":\"cpus:1;mem:256\""),
            std::string::npos) << json.out;
  ASSERT_EQ(ctl({"role", "quota", "batch", "none"}).code, 0);
  EXPECT_NE(ctl({"roles", "--json"}).out.find("\"weight\":3,\"quota\":\"\""), std::string::npos);
  // Bad input: refused by allotctl (2) before asking, and by the master (400).
  EXPECT_EQ(ctl({"role", "weight", "batch", "0"}).code, 2);
  EXPECT_EQ(ctl({"role", "weight", "batch", "-1"}).code, 2);
  EXPECT_EQ(ctl({"role", "weight", "batch", "1e7"}).code, 2);
  EXPECT_EQ(ctl({"role", "quota", "batch", "cpus:x"}).code, 2);
  EXPECT_EQ(ctl({"role", "weight", std::string(65, 'r'), "1"}).code, 2);
  EXPECT_EQ(ctl({"role", "weight", "batch"}).code, 2);
  for (const char* target : {"/api/v1/roles?role=batch&weight=0", "/api/v1/roles?role=batch&weight=nan",
                             "/api/v1/roles?role=a%20b&weight=1", "/api/v1/roles?role=batch",
                             "/api/v1/roles?role=batch&quota=ports:[1-2]"}) {
    auto r = http::fetch(http_, "POST", target);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->status, 400u) << target << ": " << r->body;
  }
  auto longName = http::fetch(http_, "POST", "/api/v1/roles?role=" + std::string(65, 'r') + "&weight=1");
  ASSERT_TRUE(longName.ok());
  EXPECT_EQ(longName->status, 400u) << longName->body;
  EXPECT_NE(ctl({"roles", "--json"}).out.find("\"weight\":3,"), std::string::npos) << "a refused call changed the role";
}

TEST_F(OpsCluster, KillEndsTheTask) {
  Child& run = execute("ops-kill", "sleep 60", "cpus:0.5;mem:64");
  ASSERT_TRUE(waitFor([&] { return taskState("ops-kill-0") == "TASK_RUNNING"; }, 20s));
  CtlResult k = ctl({"kill", "ops-kill-0"});
  ASSERT_EQ(k.code, 0) << k.err;
  EXPECT_TRUE(waitFor([&] { return run.out().find("KILLED") != std::string::npos; }, 15s)) << run.out();
  EXPECT_NE(metrics(http_).find("allot_master_operator_kills_total 1"), std::string::npos);
}

// A task that ignores SIGTERM keeps running through the drain deadline's
// first part, is killed after it, and no new task lands on the drained
// agent until it is undrained.
TEST_F(OpsCluster, DrainStopsOffersAndKillsTasksAfterTheDeadline) {
  Child& stubborn = execute("ops-drain", "trap '' TERM; while true; do sleep 0.1; done", "cpus:0.5;mem:64");
  ASSERT_TRUE(waitFor([&] { return taskState("ops-drain-0") == "TASK_RUNNING"; }, 20s));
  std::string agentId = getState(http_).master().agents(0).id();
  auto drained = std::chrono::steady_clock::now();
  CtlResult d = ctl({"drain", agentId, "--deadline", "3"});
  ASSERT_EQ(d.code, 0) << d.err;
  state::MasterState m = getState(http_).master();
  EXPECT_TRUE(m.agents(0).draining());
  EXPECT_EQ(m.offers_size(), 0);
  std::this_thread::sleep_for(1500ms);
  EXPECT_EQ(taskState("ops-drain-0"), "TASK_RUNNING") << "killed before the deadline";

  Child& waiting = execute("ops-after", "sleep 60", "cpus:0.5;mem:64");
  ASSERT_TRUE(waitFor([&] { return stubborn.out().find("KILLED") != std::string::npos; }, 15s))
      << stubborn.out();
  EXPECT_GE(std::chrono::steady_clock::now() - drained, 3s);
  // The drain's kill says so: in the framework's update, /state and allotctl.
  EXPECT_NE(stubborn.out().find("AGENT_DRAINED"), std::string::npos) << stubborn.out();
  EXPECT_TRUE(waitFor([&] {
    state::State s = getState(http_);
    for (const auto& t : s.master().completed_tasks()) {
      if (t.task_id() == "ops-drain-0") {
        return t.state() == wire::TASK_KILLED && t.reason() == wire::REASON_AGENT_DRAINED;
      }
    }
    return false;
  }, 10s)) << "ops-drain-0 not in /state's completedTasks as KILLED (AGENT_DRAINED)";
  CtlResult tasks = ctl({"tasks"});
  EXPECT_NE(tasks.out.find("AGENT_DRAINED"), std::string::npos) << tasks.out;
  std::this_thread::sleep_for(1s);
  EXPECT_EQ(taskState("ops-after-0"), "") << "a task launched on a drained agent";
  CtlResult agents = ctl({"agents"});
  EXPECT_NE(agents.out.find("draining"), std::string::npos) << agents.out;

  CtlResult u = ctl({"undrain", agentId});
  ASSERT_EQ(u.code, 0) << u.err;
  EXPECT_TRUE(waitFor([&] { return taskState("ops-after-0") == "TASK_RUNNING"; }, 20s))
      << waiting.out() << waiting.err();
}

}  // namespace
}  // namespace allot::testing
