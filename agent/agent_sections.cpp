#include "agent/agent_sections.h"

#include <iterator>

namespace allot {
namespace {

std::vector<std::string> sectionNames(const std::vector<std::unique_ptr<Isolator>>& isolators) {
  // In the order of AgentSection, then IsolatorCall per isolator.
  constexpr const char* kFixed[] = {"master message", "executor message", "executor exit", "launch",
                                    "launcher start", "reaped", "container timer", "checkpoint",
                                    "status update", "usage", "http", "executor connect",
                                    "update files"};
  static_assert(std::size(kFixed) == static_cast<size_t>(AgentSection::kCount));
  std::vector<std::string> names(std::begin(kFixed), std::end(kFixed));
  for (const auto& iso : isolators) {
    std::string name(iso->name());
    for (const char* call : {"prepare ", "isolate ", "update ", "cleanup ", "usage "}) names.push_back(call + name);
  }
  return names;
}

}  // namespace

AgentSections::AgentSections(const std::vector<std::unique_ptr<Isolator>>& isolators)
    : isolators_(isolators.size()), sections_(sectionNames(isolators), LoopSections::Nesting::kExclusive) {}

size_t AgentSections::isolatorSection(IsolatorCall call, size_t isolator) const {
  constexpr auto kCalls = static_cast<size_t>(IsolatorCall::kCount);
  // Past the last section: LoopSections times nothing.
  if (isolator >= isolators_) return sections_.names().size();
  return static_cast<size_t>(AgentSection::kCount) + isolator * kCalls + static_cast<size_t>(call);
}

}  // namespace allot
