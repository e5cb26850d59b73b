// One validation pass per message where it enters a daemon: every string,
// count and number a peer controls is checked against proto/input_limits.h
// before any handler runs. Each function costs time linear in the message
// and returns an Error naming the field, e.g.
//   "AcceptOffers.tasks[3].command.argv: 2000 entries (limit 1024)".
//
// What passes here is still untrusted in meaning (unknown ids, offers of
// another framework...): the handlers decide that. What passes is bounded,
// finite and well-formed, so handlers may size maps and loops from it.
//
// Thread: pure functions.
#pragma once

#include "base/result.h"
#include "proto/allot.pb.h"

namespace allot {

// Messages a scheduler sends to the master.
Status validateFromScheduler(const wire::Envelope& e);
// Messages an agent sends to the master.
Status validateFromAgent(const wire::Envelope& e);
// Messages the master sends to an agent.
Status validateFromMaster(const wire::Envelope& e);
// Messages an executor sends to its agent.
Status validateFromExecutor(const wire::Envelope& e);
// Messages a scheduler driver receives from the master (sdk/scheduler).
Status validateFromMasterToScheduler(const wire::Envelope& e);
// Messages an executor driver receives from its agent (sdk/executor).
Status validateFromAgentToExecutor(const wire::Envelope& e);

// Building blocks, also used by handlers that take these pieces alone.
Status validateResources(const google::protobuf::RepeatedPtrField<wire::Resource>& list,
                         const std::string& where);
Status validateFrameworkInfo(const wire::FrameworkInfo& info, const std::string& where);
Status validateTaskInfo(const wire::TaskInfo& task, const std::string& where);
Status validateTaskStatus(const wire::TaskStatus& status, const std::string& where);

}  // namespace allot
