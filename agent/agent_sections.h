// AgentSections: what the agent's loop thread spends its time on, for the
// late ticks of its stall meter (diag/loop_sections.h, exclusive nesting):
// the handlers the loop runs (a master message, an executor's message, an
// executor's exit, a worker's result, a timer, an HTTP request...) and,
// inside them, each isolator's calls and the launcher's start(), each
// charged for its own time only, so that the biggest section of a late tick
// names the call that blocked the loop ("prepare cgroups/mem").
//
//   AgentSections sections(isolators);
//   { auto timed = sections.time(AgentSection::kMasterMessage); ... }
//   { auto timed = sections.time(IsolatorCall::kPrepare, i); isolators[i]->prepare(...); }
//
// Sections are named once, from the isolators the agent runs; an isolator
// index past them times nothing.
// Thread: the agent's loop thread.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "diag/loop_sections.h"
#include "isolators/isolator.h"

namespace allot {

enum class AgentSection : size_t {
  kMasterMessage,    // a message from the master (RunTask, KillTask, ...)
  kExecutorMessage,  // an executor's registration or message
  kExecutorExit,     // the launcher reports an executor's exit
  kLaunch,           // a new executor's launch, once its sandbox is made
  kLauncherStart,    // Launcher::startOffLoop(): the clone handed to its thread
  kReaped,           // a container's reap is done: cleanup and removal
  kContainerTimer,   // a container's timer (kill grace, idle, drain, ...)
  kCheckpoint,       // an executor's checkpoint written
  kStatusUpdate,     // an update stored (log append) and forwarded
  kUsage,            // the usage report to the master
  kHttp,             // an operator's request (/state, /metrics, /health)
  kExecutorConnect,  // an executor's connection accepted: its owner looked up in /proc
  kUpdateFiles,      // the update store's file thread's results (appends once a log is open)
  kCount
};

// The isolator calls the loop makes, each timed per isolator.
enum class IsolatorCall : size_t { kPrepare, kIsolate, kUpdate, kCleanup, kUsage, kCount };

class AgentSections {
 public:
  explicit AgentSections(const std::vector<std::unique_ptr<Isolator>>& isolators);

  LoopSections::Timer time(AgentSection section) { return sections_.time(static_cast<size_t>(section)); }
  LoopSections::Timer time(IsolatorCall call, size_t isolator) {
    return sections_.time(isolatorSection(call, isolator));
  }
  LoopSections& sections() { return sections_; }

 private:
  size_t isolatorSection(IsolatorCall call, size_t isolator) const;

  size_t isolators_;
  LoopSections sections_;
};

}  // namespace allot
