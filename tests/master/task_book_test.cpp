// TaskBook: indexes, counts by state, ends and drops (master/task_book.h).
#include "master/task_book.h"

#include <algorithm>

#include <gtest/gtest.h>

namespace allot {
namespace {

TimePoint at(int seconds) { return TimePoint{} + std::chrono::seconds(seconds); }

Resources res(const char* text) { return *Resources::parse(text); }

wire::TaskInfo task(const char* id, const char* agent) {
  wire::TaskInfo t;
  t.set_task_id(id);
  t.set_agent_id(agent);
  return t;
}

wire::TaskStatus status(const char* id, wire::TaskState state) {
  wire::TaskStatus s;
  s.set_task_id(id);
  s.set_state(state);
  return s;
}

std::vector<std::string> sorted(const std::unordered_set<std::string>& ids) {
  std::vector<std::string> v(ids.begin(), ids.end());
  std::sort(v.begin(), v.end());
  return v;
}

TEST(TaskBook, ListsEveryLiveTaskUnderItsFrameworkAndItsAgent) {
  TaskBook book;
  const TaskRecord& t1 = book.launch("F-1", task("T-1", "A-1"), res("cpus:1"), at(5));
  EXPECT_EQ(t1.latest.state(), wire::TASK_STAGING);
  EXPECT_EQ(t1.latest.agent_id(), "A-1");
  EXPECT_EQ(t1.launchedAt, at(5));
  book.launch("F-1", task("T-2", "A-2"), res("cpus:1"), at(6));
  book.launch("F-2", task("T-1", "A-1"), res("cpus:2"), at(7));
  EXPECT_EQ(book.size(), 3u);
  EXPECT_EQ(book.countOfFramework("F-1"), 2u);
  EXPECT_EQ(book.countOnAgent("A-1"), 2u);
  EXPECT_EQ(sorted(book.onAgent("A-1").at("F-1")), std::vector<std::string>{"T-1"});
  EXPECT_EQ(sorted(book.onAgent("A-1").at("F-2")), std::vector<std::string>{"T-1"});
  ASSERT_NE(book.find("F-2", "T-1"), nullptr);
  EXPECT_EQ(book.find("F-2", "T-1")->charged, res("cpus:2"));
  EXPECT_EQ(book.find("F-3", "T-1"), nullptr);
  EXPECT_TRUE(book.ofFramework("F-3").empty());
  EXPECT_TRUE(book.onAgent("A-3").empty());
}

TEST(TaskBook, CountsEveryLiveTaskUnderItsLatestState) {
  TaskBook book;
  book.launch("F-1", task("T-1", "A-1"), res("cpus:1"), at(0));
  book.launch("F-1", task("T-2", "A-1"), res("cpus:1"), at(0));
  EXPECT_EQ(book.countOf(wire::TASK_STAGING), 2);
  EXPECT_EQ(book.update("F-1", "T-1", status("T-1", wire::TASK_RUNNING)), nullptr);
  EXPECT_EQ(book.countOf(wire::TASK_STAGING), 1);
  EXPECT_EQ(book.countOf(wire::TASK_RUNNING), 1);
  EXPECT_EQ(book.update("F-1", "T-9", status("T-9", wire::TASK_RUNNING)), nullptr) << "not live";
  EXPECT_EQ(book.countOf(wire::TASK_RUNNING), 1);
  ASSERT_TRUE(book.drop("F-1", "T-2"));
  EXPECT_EQ(book.countOf(wire::TASK_STAGING), 0);
  book.dropFramework("F-1");
  EXPECT_EQ(book.countOf(wire::TASK_RUNNING), 0);
  EXPECT_EQ(book.size(), 0u);
}

TEST(TaskBook, TerminalStatusEndsTheTaskInTheSameCall) {
  TaskBook book;
  book.launch("F-1", task("T-1", "A-1"), res("cpus:1"), at(0));
  book.update("F-1", "T-1", status("T-1", wire::TASK_RUNNING));
  const TaskRecord* ended = book.update("F-1", "T-1", status("T-1", wire::TASK_FINISHED));
  ASSERT_NE(ended, nullptr);
  EXPECT_EQ(ended->charged, res("cpus:1"));
  EXPECT_EQ(ended->latest.state(), wire::TASK_FINISHED);
  EXPECT_EQ(book.find("F-1", "T-1"), nullptr);
  EXPECT_TRUE(book.onAgent("A-1").empty());
  EXPECT_EQ(book.size(), 0u);
  EXPECT_EQ(book.countOf(wire::TASK_FINISHED), 0) << "no live task is terminal";
  EXPECT_EQ(book.countOf(wire::TASK_RUNNING), 0);
  EXPECT_TRUE(book.endedOn("A-1", "F-1", "T-1"));
  EXPECT_FALSE(book.endedOn("A-2", "F-1", "T-1"));
  ASSERT_EQ(book.endedShown().size(), 1u);
  EXPECT_EQ(book.endedShown().front().frameworkId, "F-1");
  // Nothing follows a terminal state: a resent update changes nothing.
  EXPECT_EQ(book.update("F-1", "T-1", status("T-1", wire::TASK_RUNNING)), nullptr);
  EXPECT_EQ(book.size(), 0u);
  EXPECT_EQ(book.countOf(wire::TASK_RUNNING), 0);
}

TEST(TaskBook, EndedTasksShownAreTheLatestOnes) {
  TaskBook book;
  for (size_t i = 0; i < kEndedTasksShown + 3; ++i) {
    std::string id = "T-" + std::to_string(i);
    book.launch("F-1", task(id.c_str(), "A-1"), res("cpus:1"), at(0));
    book.update("F-1", id, status(id.c_str(), wire::TASK_KILLED));
  }
  EXPECT_EQ(book.endedShown().size(), kEndedTasksShown);
  EXPECT_EQ(book.endedDropped(), 3u);
  EXPECT_EQ(book.endedShown().front().record.info.task_id(), "T-3");
}

TEST(TaskBook, AnAgentRemembersABoundedNumberOfEndedTasks) {
  TaskBook book;
  for (size_t i = 0; i <= kMaxEndedTasksPerAgent; ++i) book.rememberEnded("A-1", "F-1", std::to_string(i));
  EXPECT_FALSE(book.endedOn("A-1", "F-1", "0")) << "the oldest is forgotten";
  EXPECT_TRUE(book.endedOn("A-1", "F-1", "1"));
  EXPECT_TRUE(book.endedOn("A-1", "F-1", std::to_string(kMaxEndedTasksPerAgent)));
}

TEST(TaskBook, AdoptionRefreshesATaskOnItsOwnAgentOnly) {
  TaskBook book;
  wire::TaskStatus none;
  ASSERT_TRUE(book.adopt("F-1", task("T-1", "A-1"), res("cpus:1"), status("T-1", wire::TASK_RUNNING)));
  EXPECT_EQ(book.countOf(wire::TASK_RUNNING), 1);
  EXPECT_FALSE(book.adopt("F-1", task("T-1", "A-2"), res("cpus:2"), none)) << "lives on A-1";
  EXPECT_EQ(book.find("F-1", "T-1")->charged, res("cpus:1"));
  EXPECT_TRUE(book.onAgent("A-2").empty());
  ASSERT_TRUE(book.adopt("F-1", task("T-1", "A-1"), res("cpus:3"), none));
  EXPECT_EQ(book.find("F-1", "T-1")->charged, res("cpus:3"));
  EXPECT_EQ(book.find("F-1", "T-1")->latest.state(), wire::TASK_RUNNING) << "no status: kept";
  EXPECT_EQ(book.size(), 1u);
}

TEST(TaskBook, DroppingAnAgentForgetsItsTasksAndWhatEndedThere) {
  TaskBook book;
  book.launch("F-1", task("T-1", "A-1"), res("cpus:1"), at(0));
  book.launch("F-2", task("T-2", "A-1"), res("cpus:1"), at(0));
  book.launch("F-2", task("T-3", "A-2"), res("cpus:1"), at(0));
  book.rememberEnded("A-1", "F-1", "T-0");
  auto dropped = book.dropAgent("A-1");
  ASSERT_EQ(dropped.size(), 2u);
  EXPECT_EQ(book.size(), 1u);
  EXPECT_EQ(book.find("F-1", "T-1"), nullptr);
  EXPECT_NE(book.find("F-2", "T-3"), nullptr);
  EXPECT_FALSE(book.endedOn("A-1", "F-1", "T-0"));
  EXPECT_EQ(book.countOf(wire::TASK_STAGING), 1);
}

TEST(TaskBook, DroppingAFrameworkUnlistsItFromEveryAgent) {
  TaskBook book;
  book.launch("F-1", task("T-1", "A-1"), res("cpus:1"), at(0));
  book.launch("F-1", task("T-2", "A-2"), res("cpus:1"), at(0));
  book.launch("F-2", task("T-3", "A-2"), res("cpus:1"), at(0));
  EXPECT_EQ(sorted(book.dropFramework("F-1")), (std::vector<std::string>{"A-1", "A-2"}));
  EXPECT_TRUE(book.onAgent("A-1").empty());
  EXPECT_EQ(book.onAgent("A-2").count("F-1"), 0u);
  EXPECT_EQ(book.countOnAgent("A-2"), 1u);
  EXPECT_EQ(book.size(), 1u);
}

TEST(TaskBook, RevokingMarksOnlyLiveTasks) {
  TaskBook book;
  book.launch("F-1", task("T-1", "A-1"), res("cpus:1"), at(0));
  const TaskRecord* marked = book.markRevoking("F-1", "T-1");
  ASSERT_NE(marked, nullptr);
  EXPECT_TRUE(marked->revoking);
  EXPECT_EQ(book.markRevoking("F-1", "T-2"), nullptr);
}

}  // namespace
}  // namespace allot
