// allot-locality: a data-parallel job with delay scheduling (paper section
// 5.1; Zaharia et al., EuroSys 2010). Each task reads one input block; the
// --blocks file says which hosts hold each block:
//
//   # block  hosts holding a replica (offer hostnames), comma-separated
//   b0 node1,node4,node7
//   b1 node2,node4,node9
//
// A task prefers an offer from a host that holds its block. When no pending
// task is local to an offer, the job declines it (briefly) as long as it has
// waited less than --delay seconds since its last local launch; after that it
// launches non-local tasks until a local one starts again. Each task runs
// `sleep --task-seconds` (its data carries the seconds for emulated agents).
//
// The last line is the result, for scripts (bench/locality):
//   result tasks=N local=L locality=0.97 run_s=12.3
//
// Exit codes: 0 every task finished; 1 some task did not; 2 bad flags or
// blocks file; 124 the job did not finish within --timeout.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <unordered_map>

#include "base/asio.h"
#include "base/clock.h"
#include "base/flags.h"
#include "base/log.h"
#include "examples/common/example.h"
#include "proto/resources.h"
#include "proto/task_state.h"
#include "sdk/scheduler.h"

namespace {

using namespace allot;

constexpr size_t kBlocksMax = 1'000'000;
constexpr size_t kReplicasMax = 64;

struct Settings {
  std::string master = "127.0.0.1:5050";
  std::string blocksFile;
  std::string resources = "cpus:0.5;mem:64";
  std::string name = "allot-locality";
  double delayS = 1;
  double taskSeconds = 1;
  double timeoutS = 600;
};

struct Block {
  std::string id;
  std::set<std::string> hosts;
};

Result<std::vector<Block>> readBlocks(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Error{"cannot read " + path};
  std::vector<Block> blocks;
  std::string line;
  for (size_t number = 1; std::getline(in, line); ++number) {
    std::istringstream fields(line);
    Block b;
    std::string hosts;
    if (!(fields >> b.id) || b.id[0] == '#') continue;
    std::string where = path + ":" + std::to_string(number);
    if (!(fields >> hosts)) return Error{where + ": block " + b.id + " names no hosts"};
    std::stringstream split(hosts);
    for (std::string h; std::getline(split, h, ',');) {
      if (!h.empty()) b.hosts.insert(h);
    }
    if (b.hosts.empty() || b.hosts.size() > kReplicasMax)
      return Error{where + ": 1..64 hosts per block"};
    if (blocks.size() == kBlocksMax) return Error{path + ": more than 1,000,000 blocks"};
    blocks.push_back(std::move(b));
  }
  if (blocks.empty()) return Error{path + ": no blocks"};
  return blocks;
}

class LocalityScheduler final : public Scheduler {
 public:
  LocalityScheduler(asio::io_context& io, const Settings& s, std::vector<Block> blocks,
                    Resources each)
      : io_(io), s_(s), blocks_(std::move(blocks)), each_(std::move(each)) {
    for (size_t i = 0; i < blocks_.size(); ++i) {
      pending_.insert(i);
      for (const auto& h : blocks_[i].hosts) byHost_[h].insert(i);
    }
    start_ = waitingSince_ = SteadyClock::now();
  }

  bool finished() const { return ended_ == blocks_.size(); }
  int exitCode() const { return failed_ ? 1 : 0; }

  void resourceOffers(SchedulerDriver& d, const std::vector<wire::Offer>& offers) override {
    for (const auto& offer : offers) {
      auto free = Resources::fromWire(offer.resources());
      std::vector<wire::TaskInfo> tasks;
      if (free) {
        launchLocal(offer, *free, tasks);
        if (tasks.empty() && waited() >= s_.delayS) launchAny(offer, *free, tasks);
      }
      if (tasks.empty()) {
        wire::Filters f;  // back soon: the wait may end or a local task free up
        f.set_refuse_seconds(pending_.empty() ? 3600 : 0.2);
        (void)d.declineOffer(offer.offer_id(), f);
      } else {
        (void)d.acceptOffer({offer.offer_id()}, tasks);
      }
    }
    if (pending_.empty()) (void)d.setNeedsOffers(false);
  }

  void statusUpdate(SchedulerDriver& d, const wire::TaskStatus& s) override {
    (void)d.acknowledge(s);
    if (!isTerminal(s.state()) || !done_.insert(s.task_id()).second) return;
    ++ended_;
    if (s.state() != wire::TASK_FINISHED) ++failed_;
    if (finished()) {
      double runS = std::chrono::duration<double>(SteadyClock::now() - start_).count();
      std::printf("result tasks=%zu local=%zu locality=%.4f run_s=%.3f delay_s=%g\n",
                  blocks_.size(), local_, static_cast<double>(local_) / blocks_.size(), runS,
                  s_.delayS);
      std::fflush(stdout);
      d.stop(false);
      asio::post(io_, [this] { io_.stop(); });
    }
  }

 private:
  double waited() const {
    return std::chrono::duration<double>(SteadyClock::now() - waitingSince_).count();
  }

  void launchLocal(const wire::Offer& offer, Resources& free, std::vector<wire::TaskInfo>& out) {
    auto it = byHost_.find(offer.hostname());
    if (it == byHost_.end()) return;
    for (auto b = it->second.begin(); b != it->second.end() && free.contains(each_);) {
      size_t index = *b++;  // launch() erases it from this set
      out.push_back(launch(index, offer, true));
      free -= each_;
    }
    if (!out.empty()) waitingSince_ = SteadyClock::now();
  }

  void launchAny(const wire::Offer& offer, Resources& free, std::vector<wire::TaskInfo>& out) {
    while (!pending_.empty() && free.contains(each_)) {
      out.push_back(launch(*pending_.begin(), offer, false));
      free -= each_;
    }
  }

  wire::TaskInfo launch(size_t index, const wire::Offer& offer, bool local) {
    pending_.erase(index);
    for (const auto& h : blocks_[index].hosts) byHost_[h].erase(index);
    if (local) ++local_;
    wire::TaskInfo t;
    t.set_task_id(s_.name + "-" + blocks_[index].id);
    t.set_name(s_.name);
    t.set_agent_id(offer.agent_id());
    each_.toWire(t.mutable_resources());
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%g", s_.taskSeconds);
    t.mutable_command()->set_shell(std::string("sleep ") + seconds);
    t.set_data(seconds);
    return t;
  }

  asio::io_context& io_;
  const Settings& s_;
  std::vector<Block> blocks_;
  Resources each_;
  std::set<size_t> pending_;
  std::unordered_map<std::string, std::set<size_t>> byHost_;  // pending blocks per host
  std::set<std::string> done_;
  TimePoint start_;
  TimePoint waitingSince_;
  size_t local_ = 0;
  size_t ended_ = 0;
  size_t failed_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  examples::startProgram("allot-locality");
  using examples::fail;
  Settings s;
  Flags flags("allot-locality", "Runs one task per input block with delay scheduling.");
  flags.addString("master", &s.master, "HOST:PORT (or zk://...) of the master");
  flags.addString("blocks", &s.blocksFile, "file: BLOCK HOST[,HOST...] per line (required)");
  flags.addString("resources", &s.resources, "resources of each task");
  flags.addString("name", &s.name, "framework name and task id prefix");
  flags.addDouble("delay", &s.delayS, "seconds to wait for a local offer (0: never wait)");
  flags.addDouble("task-seconds", &s.taskSeconds, "how long each task runs");
  flags.addDouble("timeout", &s.timeoutS, "give up when the job is not done after this long");
  if (int rc = handleFlags(flags, argc, argv); rc >= 0) return rc;
  if (s.blocksFile.empty()) return fail("--blocks is required");
  if (!(s.delayS >= 0) || !(s.taskSeconds >= 0) || !(s.timeoutS > 0))
    return fail("--delay and --task-seconds must be >= 0, --timeout > 0");
  auto blocks = readBlocks(s.blocksFile);
  if (!blocks) return fail(blocks.error().describe());
  auto each = Resources::parse(s.resources);
  if (!each) return fail("--resources: " + each.error().describe());

  asio::io_context io(1);
  LocalityScheduler scheduler(io, s, std::move(*blocks), *each);
  wire::FrameworkInfo info;
  info.set_name(s.name);
  SchedulerDriver driver(io, scheduler, info, SchedulerOptions{.master = s.master});
  examples::Deadline deadline{
      .seconds = s.timeoutS,
      .met = [&] { return scheduler.finished(); },
      .late = [&] { return "job not done within " + std::to_string(std::llround(s.timeoutS)) + " s"; }};
  if (int rc = examples::runDriver(io, driver, deadline); rc != 0) return rc;
  if (!scheduler.finished()) return examples::kExitDeadline;
  return scheduler.exitCode();
}
