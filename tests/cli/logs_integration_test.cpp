// A task's output for its owner: a real master and agent over mutual TLS
// (certificates from scripts/allot-certs), tasks from allot-execute, and
// allotctl logs and http::fetch as readers (agent/files_api.h). Another
// framework's principal is refused; what a task puts in its sandbox never
// leads the agent's reads outside it; a task writing 1 GB keeps only the
// newest bytes (base/rotating_log.h).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <filesystem>

#include <google/protobuf/util/json_util.h>

#include "base/files.h"
#include "http/client.h"
#include "proto/state.pb.h"
#include "tests/agent/cluster.h"
#include "tests/common/test_util.h"

namespace allot::testing {
namespace {

using namespace std::chrono_literals;

constexpr const char* kAcls =
    "register_agent agent\n"
    "register_framework *\n"
    "operate operator\n";

class TaskLogs : public ::testing::Test {
 protected:
  void SetUp() override {
    cluster_ = std::make_unique<Cluster>();
    if (std::string m = cluster_->missing(); !m.empty()) GTEST_SKIP() << m;
    const char* root = envOr("ALLOT_SOURCE_ROOT");
    if (!root) GTEST_SKIP() << "ALLOT_SOURCE_ROOT not set";
    allotctl_ = envOr("ALLOTCTL") ? envOr("ALLOTCTL") : "";
    if (allotctl_.empty()) GTEST_SKIP() << "ALLOTCTL not set (allotctl not built)";
    certs_ = cluster_->dir() + "/tls";
    std::string script = std::string(root) + "/scripts/allot-certs " + certs_;
    ASSERT_EQ(std::system((script + " >/dev/null").c_str()), 0);
    ASSERT_EQ(std::system((script + " --principal other --role framework >/dev/null").c_str()), 0);
  }

  void start(std::vector<std::string> agentFlags = {}) {
    std::string acls = cluster_->dir() + "/acls";
    std::ofstream(acls) << kAcls;
    std::vector<std::string> extra = tls("master");
    extra.insert(extra.end(), {"--http-listen", "127.0.0.1:0", "--http-port-file",
                               cluster_->dir() + "/m.http", "--acls", acls});
    ASSERT_TRUE(cluster_->startMaster(extra)) << cluster_->masterLog();
    ASSERT_TRUE(waitFor([&] { return readPort(cluster_->dir() + "/m.http") > 0; }, 10s));
    masterHttp_ = {"127.0.0.1", readPort(cluster_->dir() + "/m.http")};
    std::vector<std::string> a = tls("agent");
    a.insert(a.end(), {"--http-listen", "127.0.0.1:0", "--http-port-file", cluster_->dir() + "/a.http"});
    a.insert(a.end(), agentFlags.begin(), agentFlags.end());
    ASSERT_TRUE(cluster_->startAgent(a)) << cluster_->agentLog() << cluster_->masterLog();
    ASSERT_TRUE(waitFor([&] { return readPort(cluster_->dir() + "/a.http") > 0; }, 10s));
    agentHttp_ = {"127.0.0.1", readPort(cluster_->dir() + "/a.http")};
  }

  std::vector<std::string> tls(const std::string& name) {
    return {"--tls-cert", certs_ + "/" + name + ".crt", "--tls-key", certs_ + "/" + name + ".key",
            "--tls-ca", certs_ + "/ca.crt"};
  }

  http::ClientTls client(const std::string& name, const std::string& role) {
    auto ctx = makeTlsContext({certs_ + "/" + name + ".crt", certs_ + "/" + name + ".key", certs_ + "/ca.crt"},
                              TlsSide::kClient);
    EXPECT_TRUE(ctx.ok());
    return {ctx ? *ctx : nullptr, role};
  }

  // allot-execute as the framework principal, one task named `name`-0.
  Child execute(const std::string& name, const std::string& command, std::vector<std::string> more = {}) {
    std::vector<std::string> args = {"--name", name, "--command", command, "--resources", "cpus:0.1;mem:32"};
    for (auto& f : tls("framework")) args.push_back(f);
    args.insert(args.end(), more.begin(), more.end());
    return cluster_->execute(args);
  }

  // The framework id of the running task `task`, from the master's /state.
  std::string frameworkOf(const std::string& task) {
    std::string id;
    waitFor([&] {
      auto r = http::fetch(masterHttp_, "GET", "/state", "", 5s, client("operator", "master"));
      if (!r || r->status != 200) return false;
      state::State st;
      google::protobuf::util::JsonParseOptions parse;
      parse.ignore_unknown_fields = true;
      if (!google::protobuf::util::JsonStringToMessage(r->body, &st, parse).ok()) return false;
      for (const auto& t : st.master().tasks()) {
        if (t.task_id() == task && t.state() == wire::TASK_RUNNING) id = t.framework_id();
      }
      return !id.empty();
    }, 20s);
    return id;
  }

  struct CtlResult {
    int code = -1;
    std::string out, err;
  };
  Child ctlChild(const std::string& cert, std::vector<std::string> args) {
    std::vector<std::string> full = {allotctl_, "--master", "https://127.0.0.1:" + std::to_string(masterHttp_.port)};
    for (auto& f : tls(cert)) full.push_back(f);
    full.insert(full.end(), args.begin(), args.end());
    std::string base = cluster_->dir() + "/ctl" + std::to_string(++runs_);
    return Child(full, base + ".out", base + ".err");
  }
  CtlResult ctl(const std::string& cert, std::vector<std::string> args) {
    Child c = ctlChild(cert, std::move(args));
    int st = c.wait(30s);
    return {st >= 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1, c.out(), c.err()};
  }

  Result<http::ClientResponse> files(const std::string& cert, const std::string& what) {
    return http::fetch(agentHttp_, "GET", "/files/" + what, "", 10s, client(cert, "agent"));
  }

  std::unique_ptr<Cluster> cluster_;
  std::string certs_, allotctl_;
  HostPort masterHttp_, agentHttp_;
  int runs_ = 0;
};

TEST_F(TaskLogs, FrameworkReadsItsTaskThroughAllotctlAndHttpOthersAreRefused) {
  start();
  Child run = execute("hello", "echo out-line; echo err-line >&2; sleep 30");
  std::string fw = frameworkOf("hello-0");
  ASSERT_FALSE(fw.empty()) << run.out() << run.err() << cluster_->agentLog();
  std::string q = "framework=" + fw + "&task=hello-0";
  ASSERT_TRUE(waitFor([&] {
    auto r = files("framework", "read?" + q + "&stream=stdout");
    return r && r->status == 200 && r->body == "out-line\n";
  }, 10s));
  CtlResult out = ctl("framework", {"logs", "hello-0"});
  EXPECT_EQ(out.code, 0) << out.err;
  EXPECT_EQ(out.out, "out-line\n");
  CtlResult err = ctl("framework", {"logs", "hello-0", "--stderr"});
  EXPECT_EQ(err.code, 0) << err.err;
  EXPECT_EQ(err.out, "err-line\n");
  auto listing = files("framework", "browse?" + q);
  ASSERT_TRUE(listing.ok());
  EXPECT_NE(listing->body.find("\"hello-0.stdout\""), std::string::npos) << listing->body;
  // Another framework's principal, through the API and through allotctl.
  auto other = files("other", "read?" + q + "&stream=stdout");
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(other->status, 403u) << other->body;
  EXPECT_EQ(other->body.find("out-line"), std::string::npos);
  CtlResult refused = ctl("other", {"logs", "hello-0"});
  EXPECT_EQ(refused.code, 5) << refused.out << refused.err;
  EXPECT_NE(refused.err.find("403"), std::string::npos) << refused.err;
  // An operator (the ACL's operate rule) reads every task.
  auto op = files("operator", "read?" + q + "&stream=stdout");
  ASSERT_TRUE(op.ok());
  EXPECT_EQ(op->status, 200u);
  EXPECT_EQ(op->body, "out-line\n");
}

TEST_F(TaskLogs, FollowSeesLinesAsTheyAreWrittenAndEndsWithTheTask) {
  start();
  Child run = execute("tick", "sleep 1; for i in 1 2 3 4 5 6; do echo tick-$i; sleep 0.5; done");
  ASSERT_FALSE(frameworkOf("tick-0").empty()) << run.err();
  Child follow = ctlChild("framework", {"logs", "tick-0", "-f"});
  // The first lines arrive while the task still writes the rest.
  ASSERT_TRUE(waitFor([&] { return follow.out().find("tick-2\n") != std::string::npos; }, 15s)) << follow.err();
  EXPECT_EQ(follow.out().find("tick-6"), std::string::npos) << "not followed, printed at the end";
  int st = follow.wait(30s);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << follow.err();
  EXPECT_EQ(follow.out(), "tick-1\ntick-2\ntick-3\ntick-4\ntick-5\ntick-6\n");
  int rs = run.wait(30s);
  EXPECT_TRUE(WIFEXITED(rs) && WEXITSTATUS(rs) == 0) << run.err();
}

TEST_F(TaskLogs, ExecuteFollowPrefixesEachLineWithItsTask) {
  start();
  Child run = execute("pre", "echo first; echo oops >&2; sleep 0.5; echo second", {"--follow"});
  int st = run.wait(40s);
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << run.out() << run.err();
  EXPECT_NE(run.out().find("[pre-0] first\n"), std::string::npos) << run.out();
  EXPECT_NE(run.out().find("[pre-0] second\n"), std::string::npos) << run.out();
  EXPECT_NE(run.err().find("[pre-0] oops\n"), std::string::npos) << run.err();
}

TEST_F(TaskLogs, SymlinksOutOfTheSandboxGiveNothing) {
  start();
  std::string out = taskOutputFile("escape-0", "stdout");
  Child run = execute("escape", "rm -f " + out + "; ln -s /etc/shadow " + out +
                                    "; ln -s / root; ln -s ../../.. up; touch ready; sleep 30");
  std::string fw = frameworkOf("escape-0");
  ASSERT_FALSE(fw.empty()) << run.err();
  std::string q = "framework=" + fw + "&task=escape-0";
  ASSERT_TRUE(waitFor([&] {
    auto r = files("framework", "browse?" + q);
    return r && r->body.find("\"ready\"") != std::string::npos;
  }, 10s));
  for (std::string what : {"read?" + q + "&stream=stdout", "read?" + q + "&path=root/etc/shadow",
                           "read?" + q + "&path=up/etc/shadow", "browse?" + q + "&path=root",
                           "read?" + q + "&path=../../../../etc/shadow", "follow?" + q + "&stream=stdout"}) {
    auto r = files("framework", what);
    ASSERT_TRUE(r.ok()) << what;
    EXPECT_EQ(r->status, 403u) << what << ": " << r->body;
    EXPECT_EQ(r->body.find("root:"), std::string::npos) << what;
  }
  CtlResult ctlOut = ctl("framework", {"logs", "escape-0"});
  EXPECT_NE(ctlOut.code, 0);
  EXPECT_EQ(ctlOut.out, "");
}

// 1 GB of numbered lines through 3 files of 1 MiB: what is kept is the
// newest, continuous, ending with the last line.
TEST_F(TaskLogs, RotationKeepsTheNewestBytesOfAGigabyte) {
  start({"--task-log-max", "1MiB", "--task-log-files", "3"});
  constexpr long kLast = 110000000;  // ~1.0e9 bytes of "1\n".."110000000\n"
  Child run = execute("chatty", "seq 1 " + std::to_string(kLast));
  int st = run.wait(180s);
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << run.out() << run.err();
  std::string sandbox;
  for (const auto& e : std::filesystem::recursive_directory_iterator(cluster_->workDir() + "/sandboxes")) {
    if (e.path().filename() == "chatty-0.stdout") sandbox = e.path().parent_path();
  }
  ASSERT_FALSE(sandbox.empty());
  std::string base = sandbox + "/chatty-0.stdout";
  std::string kept = readAll(base + ".2") + readAll(base + ".1") + readAll(base);
  EXPECT_FALSE(std::filesystem::exists(base + ".3"));
  EXPECT_LE(kept.size(), 3u * 1024 * 1024);
  EXPECT_GE(kept.size(), 2u * 1024 * 1024);
  // Continuous numbers from the first whole line to kLast.
  size_t pos = kept.find('\n') + 1;
  long expect = std::stol(kept.substr(pos, kept.find('\n', pos) - pos));
  bool continuous = true;
  while (pos < kept.size()) {
    size_t nl = kept.find('\n', pos);
    ASSERT_NE(nl, std::string::npos);
    if (std::stol(kept.substr(pos, nl - pos)) != expect++) {
      continuous = false;
      break;
    }
    pos = nl + 1;
  }
  EXPECT_TRUE(continuous);
  EXPECT_EQ(expect - 1, kLast);
}

}  // namespace
}  // namespace allot::testing
