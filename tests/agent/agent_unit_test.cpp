// Unit tests of the agent's pure pieces: resources, attributes, the update
// store, checkpoints, sandbox gc and the process-tree kill.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>

#include "agent/checkpoint.h"
#include "agent/executor_manager.h"
#include "agent/gc.h"
#include "agent/resources_detect.h"
#include "agent/status_updates.h"

namespace allot {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/allot-agent-unit-XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~TempDir() { fs::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

wire::TaskStatus status(const std::string& fid, const std::string& tid, const std::string& uid,
                        wire::TaskState state = wire::TASK_RUNNING) {
  wire::TaskStatus s;
  s.set_framework_id(fid);
  s.set_task_id(tid);
  s.set_update_id(uid);
  s.set_state(state);
  return s;
}

TEST(AgentResources, DetectsWhatTheFlagDoesNotName) {
  NodeFacts facts{8, 16384, 100000};
  auto r = agentResources("ports:[31000-32000];mem:2048", facts);
  ASSERT_TRUE(r) << r.error().describe();
  EXPECT_EQ(r->scalar("cpus"), 8);
  EXPECT_EQ(r->scalar("mem"), 2048);  // as written, no reserve
  EXPECT_EQ(r->scalar("disk"), 90000);
  EXPECT_EQ(r->toString().find("ports:[31000-32000]") != std::string::npos, true);
}

TEST(AgentResources, DetectedMemoryKeepsAReserve) {
  auto r = agentResources("", NodeFacts{2, 16384, 1000});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->scalar("mem"), 14745);  // floor(16384 - 10%): 10% > 1 GiB
  auto small = agentResources("", NodeFacts{1, 1500, 1000});
  ASSERT_TRUE(small);
  EXPECT_EQ(small->scalar("mem"), 750);  // too small for the reserve: half
}

TEST(AgentResources, MalformedTextIsAnErrorNamingTheFlag) {
  NodeFacts facts{1, 1024, 1024};
  for (const char* bad : {"cpus:abc", "cpus:-1", "mem", "ports:[5-1]", "cpus:1;cpus:2"}) {
    auto r = agentResources(bad, facts);
    ASSERT_FALSE(r) << bad;
    EXPECT_NE(r.error().message.find("--resources"), std::string::npos) << r.error().message;
  }
  EXPECT_FALSE(agentResources("cpus:0", facts));
}

TEST(AgentResources, ReadsThisNode) {
  TempDir dir;
  auto facts = readNodeFacts(dir.path());
  ASSERT_TRUE(facts) << facts.error().describe();
  EXPECT_GE(facts->cpus, 1);
  EXPECT_GT(facts->memTotalMib, 0);
  EXPECT_FALSE(readNodeFacts("/nonexistent/dir"));
}

TEST(AgentAttributes, ParsesPairsAndRejectsBadOnes) {
  auto a = parseAttributes("rack:r1;zone:a");
  ASSERT_TRUE(a);
  ASSERT_EQ(a->size(), 2u);
  EXPECT_EQ((*a)[1].name(), "zone");
  EXPECT_EQ((*a)[1].value(), "a");
  EXPECT_FALSE(parseAttributes("rack"));
  EXPECT_FALSE(parseAttributes(":x"));
  EXPECT_FALSE(parseAttributes("a:1;a:2"));
  EXPECT_TRUE(parseAttributes("")->empty());
}

TEST(UpdateStore, KeepsUpdatesUntilAcknowledgedAcrossReload) {
  TempDir dir;
  {
    UpdateStore store(dir.path());
    ASSERT_TRUE(store.load());
    ASSERT_TRUE(store.add(status("f1", "t1", "u1")));
    ASSERT_TRUE(store.add(status("f1", "t1", "u2", wire::TASK_FINISHED)));
    ASSERT_TRUE(store.add(status("f/2", "t2", "u3")));
    ASSERT_TRUE(store.add(status("f1", "t1", "u1")));  // duplicate: no-op
    EXPECT_EQ(store.size(), 3u);
    auto acked = store.acknowledge("f1", "u1");
    ASSERT_TRUE(acked);
    EXPECT_TRUE(*acked);
    EXPECT_FALSE(*store.acknowledge("f1", "u1"));
    EXPECT_FALSE(*store.acknowledge("nobody", "u9"));
  }
  UpdateStore reloaded(dir.path());
  ASSERT_TRUE(reloaded.load());
  EXPECT_EQ(reloaded.size(), 2u);
  EXPECT_TRUE(reloaded.contains("f1", "u2"));
  EXPECT_TRUE(reloaded.contains("f/2", "u3"));
  EXPECT_FALSE(reloaded.contains("f1", "u1"));
}

TEST(UpdateStore, DropsATornLastRecord) {
  TempDir dir;
  {
    UpdateStore store(dir.path());
    ASSERT_TRUE(store.load());
    ASSERT_TRUE(store.add(status("f1", "t1", "u1")));
    ASSERT_TRUE(store.add(status("f1", "t2", "u2")));
  }
  std::string file = dir.path() + "/f1.updates";
  auto size = fs::file_size(file);
  fs::resize_file(file, size - 3);
  UpdateStore reloaded(dir.path());
  ASSERT_TRUE(reloaded.load());
  EXPECT_EQ(reloaded.size(), 1u);
  EXPECT_TRUE(reloaded.contains("f1", "u1"));
}

TEST(UpdateStore, BoundedPerFrameworkDropsTheOldest) {
  TempDir dir;
  UpdateStore store(dir.path(), 3);
  ASSERT_TRUE(store.load());
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(store.add(status("f", "t" + std::to_string(i), "u" + std::to_string(i))));
  }
  EXPECT_EQ(store.size(), 3u);
  EXPECT_FALSE(store.contains("f", "u1"));
  EXPECT_TRUE(store.contains("f", "u4"));
  auto pending = store.pending();
  ASSERT_EQ(pending.size(), 3u);
  EXPECT_EQ(pending[0].update_id(), "u2");  // arrival order
}

TEST(UpdateStore, CompactsTheLogAfterManyAcknowledgements) {
  TempDir dir;
  UpdateStore store(dir.path());
  ASSERT_TRUE(store.load());
  ASSERT_TRUE(store.add(status("f", "keep", "k")));
  for (int i = 0; i < 500; ++i) {
    std::string id = "u" + std::to_string(i);
    ASSERT_TRUE(store.add(status("f", "t", id)));
    ASSERT_TRUE(store.acknowledge("f", id));
  }
  EXPECT_LT(fs::file_size(dir.path() + "/f.updates"), 20000u);
  UpdateStore reloaded(dir.path());
  ASSERT_TRUE(reloaded.load());
  EXPECT_EQ(reloaded.size(), 1u);
}

TEST(Checkpoint, RoundTripsAnExecutor) {
  ExecutorCheckpoint c;
  c.framework.set_id("F1");
  c.framework.set_name("fw");
  c.executor.set_executor_id("E1");
  c.pid = 1234;
  c.startTime = 98765;
  c.sandbox = "/work dir/sandboxes/F1.E1.1";
  wire::TaskInfo t;
  t.set_task_id("T1");
  c.tasks.push_back(t);
  c.latest["T1"] = status("F1", "T1", "u1");
  auto back = decodeCheckpoint(encodeCheckpoint(c));
  ASSERT_TRUE(back) << back.error().describe();
  EXPECT_EQ(back->pid, 1234);
  EXPECT_EQ(back->startTime, 98765u);
  EXPECT_EQ(back->sandbox, c.sandbox);
  EXPECT_EQ(back->framework.name(), "fw");
  EXPECT_EQ(back->executor.executor_id(), "E1");
  ASSERT_EQ(back->tasks.size(), 1u);
  EXPECT_EQ(back->latest.at("T1").update_id(), "u1");
  std::string bytes = encodeCheckpoint(c);
  EXPECT_FALSE(decodeCheckpoint(bytes.substr(0, bytes.size() - 2)));
  EXPECT_FALSE(decodeCheckpoint(bytes + "stale tail"));
  EXPECT_FALSE(decodeCheckpoint("garbage"));
}

TEST(Checkpoint, StoreSavesLoadsAndSetsCorruptFilesAside) {
  TempDir dir;
  CheckpointStore store(dir.path() + "/meta");
  ASSERT_TRUE(store.init());
  EXPECT_EQ(*store.loadAgentId(), "");
  ASSERT_TRUE(store.saveAgentId("A-1"));
  EXPECT_EQ(*store.loadAgentId(), "A-1");
  ExecutorCheckpoint c;
  c.container = "F1.E1";
  c.framework.set_id("F1");
  c.executor.set_executor_id("E1");
  c.pid = 42;
  ASSERT_TRUE(store.saveExecutor(c));
  std::ofstream(dir.path() + "/meta/executors/bad.0") << "not a checkpoint";
  auto loaded = store.loadExecutors();
  ASSERT_EQ(loaded.size(), 1u);
  EXPECT_EQ(loaded[0].container, "F1.E1");
  EXPECT_TRUE(fs::exists(dir.path() + "/meta/executors/bad.0.corrupt"));
  ASSERT_TRUE(store.removeExecutor("F1.E1"));
  EXPECT_TRUE(store.loadExecutors().empty());
}

TEST(Checkpoint, ATornNewestSlotFallsBackToTheOlderOne) {
  TempDir dir;
  ExecutorCheckpoint c;
  c.container = "F.E";
  c.framework.set_id("F");
  c.executor.set_executor_id("E");
  c.pid = 7;
  {
    CheckpointStore store(dir.path() + "/meta");
    ASSERT_TRUE(store.init());
    c.sandbox = "first";
    ASSERT_TRUE(store.saveExecutor(c));   // sequence 1: slot .1
    c.sandbox = "second";
    ASSERT_TRUE(store.saveExecutor(c));   // sequence 2: slot .0
    store.flush();
  }
  std::string newest = dir.path() + "/meta/executors/F.E.0";
  fs::resize_file(newest, fs::file_size(newest) - 5);
  CheckpointStore reloaded(dir.path() + "/meta");
  ASSERT_TRUE(reloaded.init());
  auto loaded = reloaded.loadExecutors();
  ASSERT_EQ(loaded.size(), 1u);
  EXPECT_EQ(loaded[0].sandbox, "first");
  EXPECT_EQ(loaded[0].sequence, 1u);
  // The next write goes past both slots' sequences.
  c.sandbox = "third";
  ASSERT_TRUE(reloaded.saveExecutor(c));
  auto again = reloaded.loadExecutors();
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].sandbox, "third");
}

// Agents before base/files.h kept '.' in escaped ids ("a.b" + "c" was
// "a.b.c"): their checkpoint slots move to the one container name on load.
TEST(Checkpoint, SlotsUnderAnOlderNameMoveToTheContainerName) {
  TempDir dir;
  ExecutorCheckpoint c;
  c.framework.set_id("fw.1");
  c.executor.set_executor_id("ex/1");
  c.pid = 9;
  c.sandbox = "s";
  c.sequence = 1;
  fs::create_directories(dir.path() + "/meta/executors");
  std::ofstream(dir.path() + "/meta/executors/fw.1.ex%2F1.1") << encodeCheckpoint(c);
  CheckpointStore store(dir.path() + "/meta");
  ASSERT_TRUE(store.init());
  auto loaded = store.loadExecutors();
  ASSERT_EQ(loaded.size(), 1u);
  std::string name = containerName("fw.1", "ex/1");
  EXPECT_EQ(name, "fw%2E1.ex%2F1");
  EXPECT_EQ(loaded[0].container, name);
  EXPECT_TRUE(fs::exists(dir.path() + "/meta/executors/" + name + ".1"));
  EXPECT_FALSE(fs::exists(dir.path() + "/meta/executors/fw.1.ex%2F1.1"));
  // The next write continues the sequence under the new name.
  c.container = name;
  ASSERT_TRUE(store.saveExecutor(c));
  store.flush();
  auto again = store.loadExecutors();
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].sequence, 2u);
}

TEST(UpdateStore, ALogUnderAnOlderNameMovesToTheEscapedName) {
  TempDir dir;
  {
    UpdateStore store(dir.path());
    ASSERT_TRUE(store.load());
    ASSERT_TRUE(store.add(status("f.1", "t1", "u1")));
  }
  std::string now = dir.path() + "/" + escapeId("f.1") + ".updates";
  ASSERT_TRUE(fs::exists(now));
  fs::rename(now, dir.path() + "/f.1.updates");  // as older agents named it
  {
    UpdateStore reloaded(dir.path());
    ASSERT_TRUE(reloaded.load());
    EXPECT_TRUE(reloaded.contains("f.1", "u1"));
    EXPECT_TRUE(*reloaded.acknowledge("f.1", "u1"));
  }
  EXPECT_FALSE(fs::exists(dir.path() + "/f.1.updates"));
  UpdateStore third(dir.path());
  ASSERT_TRUE(third.load());
  EXPECT_EQ(third.size(), 0u);
}

TEST(SandboxGc, RemovesOnlyOldSandboxesNotInUse) {
  TempDir dir;
  for (const char* name : {"old", "young", "busy"}) fs::create_directories(dir.path() + "/" + name);
  auto now = std::chrono::system_clock::now();
  // Age "old" and "busy" by two hours.
  for (const char* name : {"old", "busy"}) {
    fs::last_write_time(dir.path() + "/" + name, fs::file_time_type::clock::now() - std::chrono::hours(2));
  }
  GcResult r = collectSandboxes(dir.path(), std::chrono::hours(1),
                                [&](const std::string& p) { return p == dir.path() + "/busy"; }, now);
  EXPECT_EQ(r.removed, 1u);
  EXPECT_EQ(r.kept, 2u);
  EXPECT_FALSE(fs::exists(dir.path() + "/old"));
  EXPECT_TRUE(fs::exists(dir.path() + "/young"));
  EXPECT_TRUE(fs::exists(dir.path() + "/busy"));
  EXPECT_TRUE(r.errors.empty()) << r.errors;
}

// Runs `io` until done() or 10 s.
bool runIoUntil(asio::io_context& io, const std::function<bool()>& done) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!done() && std::chrono::steady_clock::now() < deadline) {
    io.restart();
    io.run_for(std::chrono::milliseconds(5));
  }
  return done();
}

// With an io_context the loop never waits for the disk: a new framework's
// log is created on the file thread (its first update is durable once
// written there), later non-terminal updates are durable at once, and a
// terminal one once the file thread's fdatasync ran.
TEST(UpdateStore, TerminalUpdatesBecomeDurableOffTheLoop) {
  TempDir dir;
  asio::io_context io;
  {
    UpdateStore store(dir.path(), kUpdatesPerFrameworkMax, &io);
    ASSERT_TRUE(store.load());
    std::vector<std::string> durable;
    auto note = [&](const std::string& what) {
      return [&durable, what](Status st) {
        EXPECT_TRUE(st) << st.error().describe();
        durable.push_back(what);
      };
    };
    ASSERT_TRUE(store.add(status("f", "t", "starting"), note("starting")));
    EXPECT_TRUE(durable.empty()) << "the new log was created on the loop";
    ASSERT_TRUE(runIoUntil(io, [&] { return durable.size() == 1; }));
    ASSERT_TRUE(store.add(status("f", "t", "running"), note("running")));
    EXPECT_EQ(durable.size(), 2u);  // non-terminal, log open: at once
    ASSERT_TRUE(store.add(status("f", "t", "finished", wire::TASK_FINISHED), note("finished")));
    EXPECT_EQ(durable.size(), 2u);  // terminal: only after the file thread's fdatasync
    ASSERT_TRUE(runIoUntil(io, [&] { return durable.size() == 3; }));
    EXPECT_EQ(durable, (std::vector<std::string>{"starting", "running", "finished"}));
  }
  UpdateStore reloaded(dir.path());
  ASSERT_TRUE(reloaded.load());
  EXPECT_EQ(reloaded.size(), 3u);
  EXPECT_TRUE(reloaded.contains("f", "finished"));
}

// Records and acknowledgements that arrive while the log is being created
// are written once it is, in order; a framework forgotten meanwhile leaves
// no log behind, and a later update of it starts a new one.
TEST(UpdateStore, RecordsWaitingForTheirLogAreWrittenInOrderAndAForgottenOneLeavesNoLog) {
  TempDir dir;
  asio::io_context io;
  std::string log = dir.path() + "/f.updates";
  {
    UpdateStore store(dir.path(), kUpdatesPerFrameworkMax, &io);
    ASSERT_TRUE(store.load());
    int durable = 0;
    ASSERT_TRUE(store.add(status("f", "t1", "u1"), [&](Status) { ++durable; }));
    ASSERT_TRUE(store.add(status("f", "t2", "u2", wire::TASK_FAILED), [&](Status) { ++durable; }));
    ASSERT_TRUE(store.acknowledge("f", "u1"));
    ASSERT_TRUE(store.add(status("g", "t3", "u3"), [&](Status) { ++durable; }));
    ASSERT_TRUE(store.forgetFramework("g"));
    ASSERT_TRUE(runIoUntil(io, [&] { return durable == 3; }));
  }
  EXPECT_FALSE(fs::exists(dir.path() + "/g.updates"));
  {
    UpdateStore reloaded(dir.path());
    ASSERT_TRUE(reloaded.load());
    EXPECT_EQ(reloaded.size(), 1u);
    EXPECT_TRUE(reloaded.contains("f", "u2"));
  }
  UpdateStore again(dir.path(), kUpdatesPerFrameworkMax, &io);
  ASSERT_TRUE(again.load());
  bool written = false;
  ASSERT_TRUE(again.add(status("g", "t4", "u4"), [&](Status st) { written = st.ok(); }));
  ASSERT_TRUE(runIoUntil(io, [&] { return written; }));
  EXPECT_TRUE(fs::exists(dir.path() + "/g.updates"));
}

// The compaction after many acknowledgements runs on the file thread;
// records that follow it go to the new log.
TEST(UpdateStore, ACompactionOffTheLoopKeepsWhatFollowsIt) {
  TempDir dir;
  asio::io_context io;
  {
    UpdateStore store(dir.path(), kUpdatesPerFrameworkMax, &io);
    ASSERT_TRUE(store.load());
    ASSERT_TRUE(store.add(status("f", "keep", "k")));
    for (int i = 0; i < 500; ++i) {
      std::string id = "u" + std::to_string(i);
      ASSERT_TRUE(store.add(status("f", "t", id)));
      ASSERT_TRUE(store.acknowledge("f", id));
    }
    bool last = false;
    ASSERT_TRUE(store.add(status("f", "t", "last", wire::TASK_FINISHED), [&](Status st) { last = st.ok(); }));
    ASSERT_TRUE(runIoUntil(io, [&] { return last; }));
  }
  EXPECT_LT(fs::file_size(dir.path() + "/f.updates"), 20000u);
  UpdateStore reloaded(dir.path());
  ASSERT_TRUE(reloaded.load());
  EXPECT_EQ(reloaded.size(), 2u);
  EXPECT_TRUE(reloaded.contains("f", "k"));
  EXPECT_TRUE(reloaded.contains("f", "last"));
}

}  // namespace
}  // namespace allot
