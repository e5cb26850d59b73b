#include "isolators/namespaces_isolator.h"

#include <unistd.h>

namespace allot {
namespace {

class PidNamespaceIsolator final : public SetupOnlyIsolator {
 public:
  std::string_view name() const override { return "namespaces/pid"; }
  Status prepare(const ContainerId&, const ContainerConfig&, ChildSetup* setup) override {
    setup->newPidNamespace = true;
    return okStatus();
  }
};

}  // namespace

Result<std::unique_ptr<Isolator>> makePidNamespaceIsolator(const IsolatorContext&) {
  if (geteuid() != 0) {
    return Error{"namespaces/pid needs allot-agent to run as root (CLONE_NEWPID and mounting /proc need "
                 "CAP_SYS_ADMIN)"};
  }
  return std::unique_ptr<Isolator>(new PidNamespaceIsolator());
}

}  // namespace allot
