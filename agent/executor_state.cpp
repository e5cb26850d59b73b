// ExecutorManager::fillState: the agent's executors as GET /state shows
// them (proto/state.proto ExecutorView).
#include <fstream>

#include "agent/executor_manager.h"

namespace allot {

namespace {

// The executor's cgroups as the kernel reports them ("0::/allot/x" on v2,
// "4:memory:/allot/x" per v1 hierarchy). Bounded: the file is tiny.
void readCgroups(pid_t pid, google::protobuf::RepeatedPtrField<std::string>* out) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/cgroup");
  std::string line;
  for (int n = 0; n < 64 && std::getline(in, line); ++n) *out->Add() = line;
}

}  // namespace

void ExecutorManager::fillState(state::AgentState* out) const {
  for (const auto& [name, c] : containers_) {
    state::ExecutorView* v = out->add_executors();
    c->fillView(agentId_, v);
    if (c->life().hasProcess()) {
      for (const auto& iso : isolators_) (void)iso->usage(c->id, v->mutable_usage());
      readCgroups(c->pid, v->mutable_cgroups());
    }
  }
}

}  // namespace allot
