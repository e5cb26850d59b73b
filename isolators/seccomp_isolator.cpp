#include "isolators/seccomp_isolator.h"

#include "isolators/seccomp_profile.h"

namespace allot {
namespace {

class SeccompIsolator final : public SetupOnlyIsolator {
 public:
  explicit SeccompIsolator(std::vector<char> bpf) : bpf_(std::move(bpf)) {}

  std::string_view name() const override { return "seccomp"; }
  Status prepare(const ContainerId&, const ContainerConfig&, ChildSetup* setup) override {
    setup->seccompBpf = bpf_;
    setup->noNewPrivs = true;
    return okStatus();
  }

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
