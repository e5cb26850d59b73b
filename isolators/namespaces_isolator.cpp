#include "isolators/namespaces_isolator.h"

#include <unistd.h>

namespace allot {
namespace {

class PidNamespaceIsolator final : public Isolator {
 public:
  std::string_view name() const override { return "namespaces/pid"; }
  Status recover(const std::vector<KnownContainer>&) override { return okStatus(); }
  Status prepare(const ContainerId&, const ContainerConfig&, ChildSetup* setup) override {
    setup->newPidNamespace = true;
    return okStatus();
  }
  Status isolate(const ContainerId&, pid_t) override { return okStatus(); }
  Status watch(const ContainerId&, std::function<void(const Limitation&)>) override { return okStatus(); }
  Status update(const ContainerId&, const Resources&) override { return okStatus(); }
  Status usage(const ContainerId&, wire::ResourceUsage*) override { return okStatus(); }
  Status cleanup(const ContainerId&) override { return okStatus(); }
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
