// FrameworkOrdering: the policy part of an allocator, deciding which active
// framework is served next. The allocator (allocator.h) does the
// accounting and filtering; an ordering only ranks frameworks.
//
// One allocation round: reset() with every active framework, then
// repeatedly pop() the next framework, grant it one agent, and push() it
// back with its new share (or drop it when nothing fits it any more).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "master/allocator/handles.h"

namespace allot {

class FrameworkOrdering {
 public:
  struct Entry {
    FrameworkHandle framework = 0;
    double share = 0;      // weighted dominant share
    double weight = 1;
    int32_t priority = 0;
    bool belowGuarantee = false;  // drf and priority serve these first
  };

  virtual ~FrameworkOrdering() = default;
  virtual void reset(const std::vector<Entry>& entries) = 0;
  virtual std::optional<Entry> pop() = 0;
  virtual void push(const Entry& entry) = 0;
};

// drf: frameworks below their guarantee first, then lowest weighted
// dominant share; ties served round-robin.
std::unique_ptr<FrameworkOrdering> makeDrfOrdering();
// priority: frameworks below their guarantee first, then highest priority,
// DRF among equal priorities.
std::unique_ptr<FrameworkOrdering> makePriorityOrdering();
// lottery: a random draw weighted by each framework's weight (its intended
// share, paper section 4.3).
std::unique_ptr<FrameworkOrdering> makeLotteryOrdering(uint64_t seed);

}  // namespace allot
