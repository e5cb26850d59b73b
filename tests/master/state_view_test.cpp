// GET /state's machinery without HTTP: MasterStateView (budgeted copies,
// keys collected again after a rehash) and StateCache (one rendering for
// concurrent readers, the reader limit, invalidation, at most two
// documents alive), on a real master (fake clock) and a real loop with the
// cache's worker thread.
#include <gtest/gtest.h>

#include <google/protobuf/util/json_util.h>

#include <set>

#include "master/state_view.h"
#include "master/state_view_cache.h"
#include "proto/json_writer.h"
#include "master_fixture.h"

namespace allot::testing {
namespace {

state::State parse(const std::string& json) {
  state::State s;
  auto st = google::protobuf::util::JsonStringToMessage(json, &s);
  EXPECT_TRUE(st.ok()) << st.ToString() << " in " << json.substr(0, 300);
  return s;
}

std::set<std::string> agentIds(const state::State& s) {
  std::set<std::string> ids;
  for (const auto& a : s.master().agents()) ids.insert(a.id());
  return ids;
}

class StateViewTest : public MasterTest {
 protected:
  // Agents on peers 100.., a framework with a task on the first.
  void populate(int agents) {
    for (int i = 0; i < agents; ++i) registerAgent(100 + i, "cpus:2;mem:2048");
    registerFramework();
    master_->allocate();
    auto offers = offersTo(kFrameworkPeer);
    ASSERT_FALSE(offers.empty());
    accept(kFrameworkPeer, offers[0].offer_id(), {task("t1", "cpus:1;mem:128")});
  }

  // A document rendered by the view alone, `unitsMax` units per step,
  // calling `between` after the first step.
  std::string render(size_t unitsMax, const std::function<void()>& between = [] {}) {
    MasterStateView view(*master_, 7, 1.5);
    std::string out = view.header();
    MasterStateView::Slice slice;
    slice.unitsMax = unitsMax;
    bool first = true;
    for (int steps = 0; !view.done(); ++steps) {
      EXPECT_LT(steps, 1000000) << "the view does not finish";
      if (steps >= 1000000) break;
      if (auto batch = view.step(slice)) {
        EXPECT_LE(batch->itemCount(), MasterStateView::kBatchItemsMax);
        out += batch->render();
      }
      if (first) between();
      first = false;
    }
    return out;
  }

  std::unique_ptr<StateCache> makeCache(StateCacheOptions options = {}) {
    return std::make_unique<StateCache>(
        io_, [this] { return std::make_unique<MasterStateView>(*master_, 0, 0); }, options);
  }

  // Pulls a reader's pieces until the end or until `piecesMax`.
  struct Client {
    std::shared_ptr<StateReader> reader;
    std::string body;
    size_t pieces = 0;
    size_t piecesMax = SIZE_MAX;
    bool done = false;
    void next(asio::io_context& io) {
      if (pieces >= piecesMax) return;
      reader->pull([this, &io](http::Piece piece, bool more) {
        if (piece) body += *piece;
        ++pieces;
        if (!more) {
          done = true;
          return;
        }
        asio::post(io, [this, &io] { next(io); });
      });
    }
  };

  void runUntil(const std::function<bool()>& condition) {
    auto deadline = std::chrono::steady_clock::now() + 20s;
    while (!condition() && std::chrono::steady_clock::now() < deadline) {
      io_.run_one_for(std::chrono::milliseconds(10));
      if (io_.stopped()) io_.restart();
    }
    ASSERT_TRUE(condition()) << "not within 20 s";
  }

  asio::io_context io_;
};

TEST_F(StateViewTest, SlicedDocumentEqualsTheSnapshot) {
  populate(600);
  state::State whole = MasterStateView::snapshot(*master_);
  state::State sliced = parse(render(37));
  EXPECT_EQ(sliced.master().agents_size(), 600);
  EXPECT_EQ(agentIds(sliced), agentIds(whole));
  EXPECT_EQ(sliced.master().leader_epoch(), 7u);
  ASSERT_EQ(sliced.master().tasks_size(), 1);
  EXPECT_EQ(sliced.master().tasks(0).task_id(), "t1");
  EXPECT_EQ(sliced.master().frameworks_size(), 1);
  EXPECT_EQ(sliced.master().offers_size(), whole.master().offers_size());
}

// The loop copies plain items and the worker writes their JSON by hand
// (master/state_items.h): each must print exactly what appendJson prints
// for the protobuf view snapshot() fills, with every field in use
// (attributes, port ranges, usage, a drain, escapes, a completed task).
TEST_F(StateViewTest, EveryItemPrintsWhatItsProtobufViewPrints) {
  hello(kAgentPeer, wire::ROLE_AGENT);
  wire::Envelope reg;
  auto* info = reg.mutable_register_agent()->mutable_info();
  info->set_hostname("n\"ode\t1\x01\xc3\xa9");
  Resources::parse("cpus:4;mem:4096.5;ports:[31000-31010,32000-32000]")->toWire(info->mutable_resources());
  auto* attr = info->add_attributes();
  attr->set_name("rack");
  attr->set_value("r7 \"west\"\\");
  master_->peerMessage(kAgentPeer, reg);
  auto replies = outbox_.take(kAgentPeer, wire::Envelope::kAgentRegistered);
  ASSERT_EQ(replies.size(), 1u);
  std::string agent = replies[0].agent_registered().agent_id();
  std::string drained = registerAgent(101, "cpus:1;mem:512");
  registerFramework();
  master_->allocate();
  auto offers = offersTo(kFrameworkPeer);
  ASSERT_FALSE(offers.empty());
  std::string offerOnAgent;
  for (const auto& o : offers) if (o.agent_id() == agent) offerOnAgent = o.offer_id();
  ASSERT_FALSE(offerOnAgent.empty());
  wire::TaskInfo web = task("web", "cpus:1;mem:128;ports:[31000-31001]");
  web.set_name("web \"front\"\n");
  web.mutable_container()->set_image("registry.local:5000/web@sha256:\"odd\"");
  accept(kFrameworkPeer, offerOnAgent, {web, task("gone", "cpus:0.5;mem:64")});
  std::string fw = MasterStateView::snapshot(*master_).master().frameworks(0).id();
  wire::TaskStatus running;
  running.set_task_id("web");
  running.set_framework_id(fw);
  running.set_agent_id(agent);
  running.set_state(wire::TASK_RUNNING);
  running.set_message("up\tand \"running\"");
  running.set_timestamp_s(1234.5678);
  agentUpdate(running);
  wire::TaskStatus failed = running;
  failed.set_task_id("gone");
  failed.set_state(wire::TASK_FAILED);
  failed.set_reason(wire::REASON_DISK_LIMIT);
  agentUpdate(failed);
  wire::Envelope usage;
  auto* u = usage.mutable_usage_report()->add_executors();
  u->set_framework_id(fw);
  u->set_executor_id("web");
  u->mutable_usage()->set_cpu_time_s(0.125);
  u->mutable_usage()->set_mem_bytes(uint64_t{1} << 40);
  u->mutable_usage()->set_processes(3);
  master_->peerMessage(kAgentPeer, usage);
  ASSERT_TRUE(master_->drainAgent(drained, 30s).ok());
  clock_.advance(1500ms);
  master_->allocate();

  state::State whole = MasterStateView::snapshot(*master_);
  const auto& m = whole.master();
  ASSERT_EQ(m.agents_size(), 2);
  ASSERT_EQ(m.tasks_size(), 1);
  ASSERT_EQ(m.completed_tasks_size(), 1);
  ASSERT_GE(m.offers_size(), 1);
  std::string doc = render(2);
  std::vector<const google::protobuf::Message*> items;
  for (const auto& v : m.agents()) items.push_back(&v);
  for (const auto& v : m.frameworks()) items.push_back(&v);
  for (const auto& v : m.tasks()) items.push_back(&v);
  for (const auto& v : m.offers()) items.push_back(&v);
  for (const auto& v : m.completed_tasks()) items.push_back(&v);
  bool sawUsage = false, sawRanges = false, sawImage = false;
  for (const auto* item : items) {
    std::string expected;
    appendJson(*item, &expected);
    sawImage |= expected.find("\"image\":\"registry.local:5000/web@sha256:\\\"odd\\\"\"") != std::string::npos;
    sawUsage |= expected.find("\"memBytes\":\"1099511627776\"") != std::string::npos;
    sawRanges |= expected.find("\"begin\":\"31000\"") != std::string::npos;
    EXPECT_NE(doc.find(expected), std::string::npos) << "not in the document: " << expected << "\n" << doc;
  }
  EXPECT_TRUE(sawUsage && sawRanges && sawImage) << doc;
  state::State back = parse(doc);
  EXPECT_EQ(back.master().agents_size(), m.agents_size());
  EXPECT_EQ(back.master().offers_size(), m.offers_size());
}

TEST_F(StateViewTest, EmptyMasterRendersEveryList) {
  std::string json = render(1);
  EXPECT_NE(json.find("\"agents\":[]"), std::string::npos) << json;
  EXPECT_NE(json.find("\"offers\":[],\"completedTasks\":[]}}"), std::string::npos) << json;
  parse(json);
}

// Agents registered while the keys are collected make the map rehash: the
// collection starts over, so no agent is listed twice or lost.
TEST_F(StateViewTest, KeysOfARehashedMapAreCollectedAgain) {
  populate(3);
  std::string json = render(1, [&] {
    for (int i = 0; i < 200; ++i) registerAgent(1000 + i, "cpus:1;mem:512");
  });
  state::State s = parse(json);
  EXPECT_EQ(s.master().agents_size(), 203);
  EXPECT_EQ(agentIds(s).size(), 203u) << "an agent listed twice";
}

// A task that ended is gone from the master's books but stays in /state's
// completedTasks with its last status, in the sliced rendering too.
TEST_F(StateViewTest, EndedTasksStayWithTheirReason) {
  std::string agent = registerAgent();
  registerFramework();
  master_->allocate();
  auto offers = offersTo(kFrameworkPeer);
  ASSERT_EQ(offers.size(), 1u);
  accept(kFrameworkPeer, offers[0].offer_id(), {task("drained", "cpus:1;mem:128")});
  wire::TaskStatus s;
  s.set_task_id("drained");
  s.set_framework_id(MasterStateView::snapshot(*master_).master().frameworks(0).id());
  s.set_agent_id(agent);
  s.set_state(wire::TASK_KILLED);
  s.set_reason(wire::REASON_AGENT_DRAINED);
  agentUpdate(s);
  for (const state::State& st : {MasterStateView::snapshot(*master_), parse(render(3))}) {
    EXPECT_EQ(st.master().tasks_size(), 0);
    ASSERT_EQ(st.master().completed_tasks_size(), 1);
    EXPECT_EQ(st.master().completed_tasks(0).task_id(), "drained");
    EXPECT_EQ(st.master().completed_tasks(0).state(), wire::TASK_KILLED);
    EXPECT_EQ(st.master().completed_tasks(0).reason(), wire::REASON_AGENT_DRAINED);
  }
}

TEST_F(StateViewTest, ConcurrentReadersShareOneRendering) {
  populate(600);
  auto cache = makeCache();
  std::vector<Client> clients(3);
  for (auto& c : clients) c.reader = cache->open();
  for (auto& c : clients) c.next(io_);
  runUntil([&] { return clients[0].done && clients[1].done && clients[2].done; });
  EXPECT_EQ(cache->renderingsStarted(), 1u);
  EXPECT_GT(clients[0].pieces, 3u) << "the document streams in pieces";
  EXPECT_EQ(clients[0].body, clients[1].body);
  EXPECT_EQ(clients[0].body, clients[2].body);
  EXPECT_EQ(agentIds(parse(clients[0].body)), agentIds(MasterStateView::snapshot(*master_)));
}

TEST_F(StateViewTest, ReadersPastTheLimitAreRefused) {
  populate(2);
  StateCacheOptions options;
  options.clientsMax = 2;
  auto cache = makeCache(options);
  auto a = cache->open();
  auto b = cache->open();
  ASSERT_TRUE(a && b);
  EXPECT_FALSE(cache->open());
  EXPECT_EQ(cache->readersOpen(), 2u);
  a.reset();
  EXPECT_TRUE(cache->open());
}

// An operator action invalidates: the next reader gets a rendering that
// started after it and shows it.
TEST_F(StateViewTest, InvalidateGivesTheNextReaderAFreshRendering) {
  populate(5);
  auto cache = makeCache();
  Client before{cache->open()};
  before.next(io_);
  runUntil([&] { return before.done; });
  std::string agent = *agentIds(parse(before.body)).begin();
  ASSERT_TRUE(master_->drainAgent(agent, 10s).ok());
  cache->invalidate();
  Client after{cache->open()};
  after.next(io_);
  runUntil([&] { return after.done; });
  EXPECT_EQ(cache->renderingsStarted(), 2u);
  state::State fresh = parse(after.body);
  for (const auto& a : fresh.master().agents()) {
    EXPECT_EQ(a.draining(), a.id() == agent) << a.id();
  }
}

// Slow readers hold their documents; a third rendering waits until one of
// them lets go, so no more than two documents are ever alive.
TEST_F(StateViewTest, AtMostTwoDocumentsAlive) {
  populate(600);
  auto cache = makeCache();
  auto slow = [&] {
    auto c = std::make_unique<Client>();
    c->reader = cache->open();
    c->piecesMax = 1;
    c->next(io_);
    return c;
  };
  auto first = slow();
  runUntil([&] { return first->pieces == 1; });
  cache->invalidate();
  auto second = slow();
  runUntil([&] { return second->pieces == 1 && cache->documentsAlive() == 2; });
  for (int i = 0; i < 50; ++i) io_.run_one_for(std::chrono::milliseconds(5));  // doc 2 completes
  cache->invalidate();
  Client third{cache->open()};
  third.next(io_);
  for (int i = 0; i < 50; ++i) io_.run_one_for(std::chrono::milliseconds(5));
  EXPECT_LE(cache->documentsAlive(), StateCache::kDocumentsMax);
  EXPECT_FALSE(third.done) << "a third document while two were held";
  first.reset();
  runUntil([&] { return third.done; });
  EXPECT_LE(cache->documentsAlive(), StateCache::kDocumentsMax);
  EXPECT_EQ(cache->renderingsStarted(), 3u);
  parse(third.body);
}

TEST_F(StateViewTest, StopDropsWaitingReaders) {
  populate(600);
  auto cache = makeCache();
  Client c{cache->open()};
  c.next(io_);
  io_.poll();
  cache->stop();
  for (int i = 0; i < 20; ++i) io_.run_one_for(std::chrono::milliseconds(5));
  EXPECT_FALSE(c.done);
  EXPECT_FALSE(cache->open()) << "a stopped cache hands out readers";
}

}  // namespace
}  // namespace allot::testing
