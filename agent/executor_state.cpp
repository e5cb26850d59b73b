// ExecutorManager::fillState: the agent's executors as GET /state shows
// them (proto/state.proto ExecutorView).
#include <fstream>

#include "agent/executor_manager_types.h"

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
    v->set_framework_id(c->id.frameworkId);
    v->set_executor_id(c->id.executorId);
    v->set_name(name);
    v->set_phase(containerStateName(c->life.state()));
    v->set_pid(c->pid);
    v->set_sandbox(c->sandbox);
    limitsOf(*c).toWire(v->mutable_limits());
    if (c->life.hasProcess()) {
      for (const auto& iso : isolators_) (void)iso->usage(c->id, v->mutable_usage());
      readCgroups(c->pid, v->mutable_cgroups());
    }
    for (const auto& [taskId, t] : c->tasks) {
      state::TaskView* tv = v->add_tasks();
      tv->set_task_id(taskId);
      tv->set_framework_id(c->id.frameworkId);
      tv->set_agent_id(agentId_);
      tv->set_executor_id(c->id.executorId);
      tv->set_name(t.info.name());
      *tv->mutable_resources() = t.info.resources();
      if (t.latest) {
        tv->set_state(t.latest->state());
        tv->set_reason(t.latest->reason());
        tv->set_message(t.latest->message());
        tv->set_updated_s(t.latest->timestamp_s());
      }
    }
  }
}

}  // namespace allot
