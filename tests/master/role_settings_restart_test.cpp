// A standalone allot-master keeps the role weights and quotas set through
// HTTP in --work-dir: killed and started again with the same flags, it
// applies them before it serves; a corrupt file leaves it on its flags
// (logged), and the next change replaces the file.
#include <gtest/gtest.h>

#include <signal.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "http/client.h"
#include "tests/common/test_util.h"
#include "tests/ha/zk_cluster.h"

namespace allot {
namespace {

using namespace std::chrono_literals;
using testing::Child;

class RoleSettingsRestart : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::getenv("ALLOT_MASTER")) GTEST_SKIP() << "ALLOT_MASTER not set (binary not built)";
    dir_ = ::testing::TempDir() + "/allot-role-restart-" + std::to_string(getpid());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_ + "/work");
  }
  void TearDown() override {
    master_ = Child();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  // Starts allot-master with the flags --role-weight batch:3 --quota
  // web:cpus:2 and waits for its HTTP port.
  void startMaster() {
    std::filesystem::remove(dir_ + "/http-port");
    master_ = Child({std::getenv("ALLOT_MASTER"), "--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0",
                     "--http-port-file", dir_ + "/http-port", "--work-dir", dir_ + "/work",
                     "--role-weight", "batch:3", "--quota", "web:cpus:2;mem:512"},
                    dir_ + "/master-" + std::to_string(starts_++) + ".log");
    auto deadline = std::chrono::steady_clock::now() + 10s;
    http_.port = 0;
    while (std::chrono::steady_clock::now() < deadline && master_.running()) {
      std::ifstream in(dir_ + "/http-port");
      if (in >> http_.port && http_.port != 0) break;
      std::this_thread::sleep_for(20ms);
    }
    ASSERT_NE(http_.port, 0) << master_.log();
  }

  http::ClientResponse call(const std::string& method, const std::string& target) {
    auto r = http::fetch(http_, method, target);
    EXPECT_TRUE(r) << (r ? "" : r.error().describe());
    return r ? *r : http::ClientResponse{};
  }

  // The JSON object of one role in GET /roles ("" when absent).
  std::string role(const std::string& name) {
    std::string body = call("GET", "/roles").body;
    size_t at = body.find("{\"name\":\"" + name + "\"");
    if (at == std::string::npos) return "";
    return body.substr(at, body.find('}', at) - at + 1);
  }

  std::string dir_;
  Child master_;
  HostPort http_{"127.0.0.1", 0};
  int starts_ = 0;  // one log per start
};

TEST_F(RoleSettingsRestart, SettingsSurviveAKilledMasterAndOverrideItsFlags) {
  ASSERT_NO_FATAL_FAILURE(startMaster());
  EXPECT_NE(role("batch").find("\"weight\":3,"), std::string::npos) << role("batch");
  EXPECT_NE(call("GET", "/roles").body.find("\"store\":\"file " + dir_ + "/work/role-settings\""),
            std::string::npos);
  EXPECT_EQ(call("POST", "/api/v1/roles?role=batch&weight=5").status, 200u);
  EXPECT_EQ(call("POST", "/api/v1/roles?role=web&quota=").status, 200u);
  EXPECT_EQ(call("POST", "/api/v1/roles?role=new&quota=cpus:1.5").status, 200u);
  EXPECT_EQ(call("POST", "/api/v1/roles?role=new&weight=0").status, 400u);
  // Acknowledged means stored: the file holds them now.
  std::string stored = testing::readFile(dir_ + "/work/role-settings");
  EXPECT_NE(stored.find("role batch weight=5\n"), std::string::npos) << stored;
  EXPECT_NE(stored.find("role web quota=none\n"), std::string::npos) << stored;

  master_.signal(SIGKILL);
  ASSERT_NO_FATAL_FAILURE(startMaster());
  EXPECT_NE(role("batch").find("\"weight\":5,\"quota\":\"\""), std::string::npos) << role("batch");
  EXPECT_NE(role("batch").find("\"run_time\":true"), std::string::npos) << role("batch");
  EXPECT_NE(role("web").find("\"weight\":1,\"quota\":\"\""), std::string::npos) << role("web");
  EXPECT_NE(role("new").find("\"quota\":\"cpus:1.5\""), std::string::npos) << role("new");
}

TEST_F(RoleSettingsRestart, ACorruptFileLeavesTheFlagsAndTheNextChangeReplacesIt) {
  std::ofstream(dir_ + "/work/role-settings") << "allot-role-settings 1\nepoch 0\nrole batch weight=\x01\n";
  ASSERT_NO_FATAL_FAILURE(startMaster());
  EXPECT_NE(call("GET", "/health").body.find("\"status\":\"ok\""), std::string::npos);
  EXPECT_NE(role("batch").find("\"weight\":3,"), std::string::npos) << role("batch");
  EXPECT_NE(role("web").find("\"quota\":\"cpus:2;mem:512\""), std::string::npos) << role("web");
  EXPECT_NE(master_.log().find("role settings: " + dir_ + "/work/role-settings: line 3"), std::string::npos)
      << master_.log();
  EXPECT_EQ(call("POST", "/api/v1/roles?role=batch&weight=7").status, 200u);
  master_.signal(SIGTERM);
  EXPECT_EQ(master_.waitExit(5000ms), 0);
  ASSERT_NO_FATAL_FAILURE(startMaster());
  EXPECT_NE(role("batch").find("\"weight\":7,"), std::string::npos) << role("batch");
  EXPECT_EQ(master_.log().find("role settings: " + dir_), std::string::npos) << "still corrupt";
}

}  // namespace
}  // namespace allot
