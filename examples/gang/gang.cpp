// allot-gang: all-or-nothing placement of an MPI-style job of --ranks ranks.
// It holds offers until together they fit every rank (each rank: --resources
// plus one port from the offers' `ports`), then launches all ranks at once;
// if the held offers do not fit the job within --hold seconds it releases
// them all and starts collecting again. Each rank's command sees
//   ALLOT_RANK (0..N-1), ALLOT_RANKS (N), ALLOT_PORT (its port) and
//   ALLOT_PEERS ("host:port,host:port,...", indexed by rank).
// When a rank fails the others are killed: the job ends as a whole.
//
//   allot-gang --master 127.0.0.1:5050 --ranks 4 --command 'my-mpi-program'
//
// Exit codes: 0 every rank finished; the first failing rank's code (137
// killed, 1 lost or error); 2 bad flags; 124 not placed within --timeout.
#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>
#include <optional>
#include <set>

#include "base/asio.h"
#include "base/flags.h"
#include "base/log.h"
#include "examples/common/example.h"
#include "proto/resources.h"
#include "proto/task_state.h"
#include "sdk/scheduler.h"

namespace {

using namespace allot;

constexpr int64_t kRanksMax = 10'000;

struct Settings {
  std::string master = "127.0.0.1:5050";
  int64_t ranks = 2;
  std::string command;
  std::string resources = "cpus:0.1;mem:32";
  double holdS = 5;
  double timeoutS = 60;
};

struct Placement {
  std::string offerId;
  std::string agentId;
  std::string host;
  uint64_t port = 0;
};

// The first port of `free`'s port ranges, removed from it; nullopt if none.
std::optional<uint64_t> takePort(Resources& free) {
  for (const auto& set : free.rangeSets()) {
    if (set.name != "ports" || set.ranges.empty()) continue;
    uint64_t port = set.ranges.front().first;
    Resources one;
    one.addRange("ports", port, port);
    free -= one;
    return port;
  }
  return std::nullopt;
}

int exitCodeOf(const wire::TaskStatus& s) {
  if (s.state() == wire::TASK_FINISHED) return 0;
  if (s.state() == wire::TASK_FAILED && s.has_exit_code() && s.exit_code()) return s.exit_code();
  return s.state() == wire::TASK_KILLED ? 137 : 1;
}

class GangScheduler final : public Scheduler {
 public:
  GangScheduler(asio::io_context& io, const Settings& s, Resources each)
      : io_(io), s_(s), each_(std::move(each)), holdTimer_(io) {}

  int exitCode() const { return exitCode_; }
  bool launched() const { return launched_; }

  void resourceOffers(SchedulerDriver& d, const std::vector<wire::Offer>& offers) override {
    if (launched_) {
      for (const auto& o : offers) (void)d.declineOffer(o.offer_id());
      return;
    }
    if (held_.empty()) startHoldTimer(d);
    for (const auto& o : offers) held_[o.offer_id()] = o;
    if (auto plan = place()) launch(d, *plan);
  }

  void offerRescinded(SchedulerDriver&, const std::string& offerId) override {
    held_.erase(offerId);
  }

  void statusUpdate(SchedulerDriver& d, const wire::TaskStatus& s) override {
    (void)d.acknowledge(s);
    if (!isTerminal(s.state()) || !ended_.insert(s.task_id()).second) return;
    int code = exitCodeOf(s);
    std::printf("rank %s %s\n", s.task_id().c_str(), wire::TaskState_Name(s.state()).c_str());
    std::fflush(stdout);
    if (code != 0 && exitCode_ == 0) {
      exitCode_ = code;  // all or nothing: the others go too
      for (int64_t r = 0; r < s_.ranks; ++r) {
        if (!ended_.count(rankId(r))) (void)d.killTask(rankId(r));
      }
    }
    if (ended_.size() == static_cast<size_t>(s_.ranks)) {
      d.stop(false);
      asio::post(io_, [this] { io_.stop(); });
    }
  }

 private:
  static std::string rankId(int64_t rank) { return "rank-" + std::to_string(rank); }

  // Every rank placed on the held offers, or nullopt if they do not fit.
  std::optional<std::vector<Placement>> place() const {
    std::vector<Placement> plan;
    for (const auto& [id, offer] : held_) {
      auto free = Resources::fromWire(offer.resources());
      if (!free) continue;
      while (plan.size() < static_cast<size_t>(s_.ranks) && free->contains(each_)) {
        Resources left = *free - each_;
        auto port = takePort(left);
        if (!port) break;
        plan.push_back({id, offer.agent_id(), offer.hostname(), *port});
        *free = left;
      }
    }
    if (plan.size() < static_cast<size_t>(s_.ranks)) return std::nullopt;
    return plan;
  }

  void launch(SchedulerDriver& d, const std::vector<Placement>& plan) {
    std::string peers;
    for (const auto& p : plan) peers += (peers.empty() ? "" : ",") + p.host + ":" + std::to_string(p.port);
    std::map<std::string, std::vector<wire::TaskInfo>> byOffer;
    for (size_t rank = 0; rank < plan.size(); ++rank) {
      byOffer[plan[rank].offerId].push_back(rankTask(rank, plan[rank], peers));
    }
    for (const auto& [id, offer] : held_) {
      auto it = byOffer.find(id);
      if (it == byOffer.end()) {
        (void)d.declineOffer(id);
      } else {
        (void)d.acceptOffer({id}, it->second);
      }
    }
    held_.clear();
    holdTimer_.cancel();
    launched_ = true;
    (void)d.setNeedsOffers(false);
    std::printf("launched %zu ranks: %s\n", plan.size(), peers.c_str());
    std::fflush(stdout);
  }

  wire::TaskInfo rankTask(size_t rank, const Placement& p, const std::string& peers) const {
    wire::TaskInfo t;
    t.set_task_id(rankId(static_cast<int64_t>(rank)));
    t.set_name("gang-rank");
    t.set_agent_id(p.agentId);
    Resources r = each_;
    r.addRange("ports", p.port, p.port);
    r.toWire(t.mutable_resources());
    auto* c = t.mutable_command();
    c->set_shell(s_.command);
    auto& env = *c->mutable_environment();
    env["ALLOT_RANK"] = std::to_string(rank);
    env["ALLOT_RANKS"] = std::to_string(s_.ranks);
    env["ALLOT_PORT"] = std::to_string(p.port);
    env["ALLOT_PEERS"] = peers;
    return t;
  }

  // Not enough within --hold: give everything back and collect anew.
  void startHoldTimer(SchedulerDriver& d) {
    holdTimer_.expires_after(secondsToDuration(s_.holdS));
    holdTimer_.async_wait([this, &d](const boost::system::error_code& ec) {
      if (ec || launched_) return;
      std::printf("held %zu offers for %.1f s without room for %lld ranks: releasing them\n",
                  held_.size(), s_.holdS, static_cast<long long>(s_.ranks));
      std::fflush(stdout);
      wire::Filters f;
      f.set_refuse_seconds(1);
      for (const auto& [id, offer] : held_) (void)d.declineOffer(id, f);
      held_.clear();
    });
  }

  asio::io_context& io_;
  const Settings& s_;
  Resources each_;
  asio::steady_timer holdTimer_;
  std::map<std::string, wire::Offer> held_;
  std::set<std::string> ended_;
  bool launched_ = false;
  int exitCode_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  examples::startProgram("allot-gang");
  using examples::fail;
  Settings s;
  Flags flags("allot-gang", "Places all ranks of an MPI-style job at once, or none.");
  flags.addString("master", &s.master, "HOST:PORT (or zk://...) of the master");
  flags.addInt("ranks", &s.ranks, "number of ranks");
  flags.addString("command", &s.command, "each rank's shell command (required)");
  flags.addString("resources", &s.resources, "resources of each rank (a port is added)");
  flags.addDouble("hold", &s.holdS, "seconds to hold offers before releasing them");
  flags.addDouble("timeout", &s.timeoutS, "give up when not placed within this many seconds");
  if (int rc = handleFlags(flags, argc, argv); rc >= 0) return rc;
  if (s.command.empty()) return fail("--command is required");
  if (s.ranks < 1 || s.ranks > kRanksMax) return fail("--ranks must be 1..10000");
  if (!(s.holdS > 0) || !(s.timeoutS > 0)) return fail("--hold and --timeout must be > 0");
  auto each = Resources::parse(s.resources);
  if (!each) return fail("--resources: " + each.error().describe());

  asio::io_context io(1);
  GangScheduler scheduler(io, s, *each);
  wire::FrameworkInfo info;
  info.set_name("allot-gang");
  SchedulerDriver driver(io, scheduler, info, SchedulerOptions{.master = s.master});
  examples::Deadline deadline{
      .seconds = s.timeoutS,
      .met = [&] { return scheduler.launched(); },
      .late = [&] {
        return std::to_string(s.ranks) + " ranks not placed within " + std::to_string(std::llround(s.timeoutS)) + " s";
      }};
  if (int rc = examples::runDriver(io, driver, deadline); rc != 0) return rc;
  return scheduler.exitCode();
}
