// The namespaces/pid isolator (--isolation namespaces/pid, Mesos's name):
// every executor starts as pid 1 of its own PID namespace, with its own
// /proc in a private mount namespace (ChildSetup::newPidNamespace). Its
// tasks see and can signal only the processes of their executor; when the
// executor exits the kernel kills whatever is left in the namespace. The
// agent keeps supervising the executor by its host pid and pidfd, also
// after an agent restart. Tasks that run as root get a PID namespace
// whether or not this isolator is on (ChildSetup::confineRoot).
// A SetupOnlyIsolator (isolator.h): the namespace lives and dies with the
// executor, so recover, isolate, watch, update, usage and cleanup have
// nothing to do.
#pragma once

#include <memory>

#include "base/result.h"
#include "isolators/isolator.h"
#include "isolators/isolator_table.h"

namespace allot {

// The table's factory. Refuses an agent that is not root (CLONE_NEWPID and
// mounting /proc need CAP_SYS_ADMIN) at start, not at the first launch.
Result<std::unique_ptr<Isolator>> makePidNamespaceIsolator(const IsolatorContext& context);

}  // namespace allot
