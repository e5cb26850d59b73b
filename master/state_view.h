// MasterStateView: GET /state on the master, as protobuf JSON of
// allot.state.State (proto/state.proto), produced piece by piece so a large
// cluster's state streams instead of holding the loop.
//
// start() copies only the ids of agents, frameworks, tasks and offers;
// each next() renders up to kItemsPerChunk items looked up afresh, and
// stops early once it has used kChunkBudget of the loop (offers and
// replies wait behind a chunk), so every item is consistent in itself and
// items that vanished meanwhile are left out. The whole answer is one JSON object:
//   {"master":{...summary..., "agents":[...], "frameworks":[...],
//              "tasks":[...], "offers":[...]}}
//
// Thread: the master's loop; the Master must outlive the view (the HTTP
// layer drops unfinished views when the server stops, before the Master).
#pragma once

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "master/master.h"
#include "proto/state.pb.h"

namespace allot {

class MasterStateView {
 public:
  static constexpr size_t kItemsPerChunk = 256;
  static constexpr std::chrono::microseconds kChunkBudget{2000};

  MasterStateView(const Master& master, uint64_t leaderEpoch, double startTimeS);

  // Appends the next piece of JSON; false once the document is complete.
  bool next(std::string* out);

  // The whole state at once (tests, small clusters).
  static state::State snapshot(const Master& master);

  // Item renderers, shared with snapshot().
  static bool fillAgent(const Master& m, const std::string& id, state::AgentView* out);
  static bool fillFramework(const Master& m, const std::string& id, state::FrameworkView* out);
  static bool fillTask(const Master& m, const std::string& frameworkId, const std::string& taskId,
                       state::TaskView* out);
  static bool fillOffer(const Master& m, const std::string& id, state::OfferView* out);
  static void fillSummary(const Master& m, state::MasterState* out);

 private:
  enum class Section { kHeader, kAgents, kFrameworks, kTasks, kOffers, kDone };

  void renderSection(std::string* out);

  const Master& master_;
  uint64_t leaderEpoch_;
  double startTimeS_;
  Section section_ = Section::kHeader;
  size_t position_ = 0;
  bool firstInSection_ = true;
  std::vector<std::string> agents_;
  std::vector<std::string> frameworks_;
  std::vector<std::pair<std::string, std::string>> tasks_;
  std::vector<std::string> offers_;
};

}  // namespace allot
