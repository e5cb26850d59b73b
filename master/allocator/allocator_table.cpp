#include <functional>

#include "master/allocator/allocator.h"

namespace allot {
namespace {

struct AllocatorEntry {
  const char* name;
  std::function<std::unique_ptr<FrameworkOrdering>(const AllocatorOptions&)> ordering;
};

// The explicit table behind --allocator; the first entry is the default.
const AllocatorEntry kAllocators[] = {
    {"drf", [](const AllocatorOptions&) { return makeDrfOrdering(); }},
    {"priority", [](const AllocatorOptions&) { return makePriorityOrdering(); }},
    {"lottery", [](const AllocatorOptions& o) { return makeLotteryOrdering(o.seed); }},
};

}  // namespace

std::vector<std::string> knownAllocators() {
  std::vector<std::string> names;
  for (const auto& e : kAllocators) names.emplace_back(e.name);
  return names;
}

Result<std::unique_ptr<Allocator>> createAllocator(std::string_view name,
                                                   const AllocatorOptions& options) {
  for (const auto& e : kAllocators) {
    if (name == e.name) {
      auto factory = e.ordering;
      return std::make_unique<Allocator>(
          options, [factory, options, roles = uint64_t{0}]() mutable {
            AllocatorOptions perRole = options;  // lottery: each role its own draws
            perRole.seed += roles++;
            return factory(perRole);
          });
    }
  }
  std::string valid;
  for (const auto& n : knownAllocators()) valid += (valid.empty() ? "" : ", ") + n;
  return Error{"unknown allocator '" + std::string(name) + "' (valid: " + valid + ")"};
}

}  // namespace allot
