// Bit sets over dense handles (agents, frameworks) for the allocator: a
// vector of 64-bit words that grows on set.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace allot {

inline constexpr size_t kBitsPerWord = 64;

inline void setBit(std::vector<uint64_t>* bits, size_t i) {
  size_t w = i / kBitsPerWord;
  if (bits->size() <= w) bits->resize(w + 1, 0);
  (*bits)[w] |= uint64_t{1} << (i % kBitsPerWord);
}

inline void clearBit(std::vector<uint64_t>* bits, size_t i) {
  size_t w = i / kBitsPerWord;
  if (w < bits->size()) (*bits)[w] &= ~(uint64_t{1} << (i % kBitsPerWord));
}

inline bool testBit(const std::vector<uint64_t>& bits, size_t i) {
  size_t w = i / kBitsPerWord;
  return w < bits.size() && (bits[w] >> (i % kBitsPerWord)) & 1;
}

inline uint64_t wordAt(const std::vector<uint64_t>& bits, size_t w) {
  return w < bits.size() ? bits[w] : 0;
}

}  // namespace allot
