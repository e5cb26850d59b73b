#include "isolators/seccomp_isolator.h"

#include "isolators/seccomp_profile.h"

namespace allot {
namespace {

class SeccompIsolator final : public Isolator {
 public:
  explicit SeccompIsolator(std::vector<char> bpf) : bpf_(std::move(bpf)) {}

  std::string_view name() const override { return "seccomp"; }
  Status recover(const std::vector<KnownContainer>&) override { return okStatus(); }
  Status prepare(const ContainerId&, const ContainerConfig&, ChildSetup* setup) override {
    setup->seccompBpf = bpf_;
    setup->noNewPrivs = true;
    return okStatus();
  }
  Status isolate(const ContainerId&, pid_t) override { return okStatus(); }
  Status watch(const ContainerId&, std::function<void(const Limitation&)>) override { return okStatus(); }
  Status update(const ContainerId&, const Resources&) override { return okStatus(); }
  Status usage(const ContainerId&, wire::ResourceUsage*) override { return okStatus(); }
  Status cleanup(const ContainerId&) override { return okStatus(); }

 private:
  std::vector<char> bpf_;
};

}  // namespace

Result<std::unique_ptr<Isolator>> makeSeccompIsolatorFromFile(const std::string& profilePath) {
  auto profile = profilePath.empty() ? parseSeccompProfile(defaultProfileText(), "default seccomp profile")
                                     : loadSeccompProfile(profilePath);
  if (!profile) return Error{"--seccomp-profile: " + profile.error().describe()};
  auto bpf = compileSeccompProfile(*profile);
  if (!bpf) return Error{"compiling seccomp profile " + (profilePath.empty() ? "(default)" : profilePath) + ": " +
                         bpf.error().describe()};
  return std::unique_ptr<Isolator>(new SeccompIsolator(std::move(*bpf)));
}

Result<std::unique_ptr<Isolator>> makeSeccompIsolator(const IsolatorContext& context) {
  return makeSeccompIsolatorFromFile(context.options.seccompProfile);
}

}  // namespace allot
