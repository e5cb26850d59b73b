// Resources: a bag of named scalars (cpus, mem, disk, gpus: fixed-point,
// 1/1000 units, so sums never drift) and named range sets (ports).
//
// Text form, shared by every flag and tool (SPEC section 1):
//   "cpus:4;mem:4096;disk:10240;ports:[31000-32000,33000-33010]"
// Wire form: repeated wire::Resource.
//
// Values are immutable-ish plain data; copy freely. Not thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/container/small_vector.hpp>

#include "base/result.h"
#include "proto/allot.pb.h"

namespace allot {

using ResourceList = google::protobuf::RepeatedPtrField<wire::Resource>;

class Resources {
 public:
  // Inline capacity for the common shapes (a handful of scalars, one port
  // range set of a few ranges): copying Resources then allocates nothing,
  // which matters on the allocator's per-offer path.
  template <typename T, size_t N>
  using SmallVector = boost::container::small_vector<T, N>;
  using Ranges = SmallVector<std::pair<uint64_t, uint64_t>, 2>;

  struct Scalar {
    std::string name;
    int64_t millis = 0;
  };
  struct RangeSet {
    std::string name;
    Ranges ranges;  // sorted, disjoint, merged
  };

  Resources() = default;

  // Parses the text form. Errors name the offending entry. Duplicate names,
  // negative or non-finite numbers and inverted ranges are rejected.
  static Result<Resources> parse(std::string_view text);
  // Validates and converts the wire form (same rules as parse).
  static Result<Resources> fromWire(const ResourceList& list);

  void toWire(ResourceList* out) const;
  std::string toString() const;

  bool empty() const;
  double scalar(std::string_view name) const;
  int64_t scalarMillis(std::string_view name) const;
  void setScalar(std::string_view name, double value);
  void setScalarMillis(std::string_view name, int64_t millis);
  // Adds [begin, end] to the named range set.
  void addRange(std::string_view name, uint64_t begin, uint64_t end);
  // Adds many ranges at once (any order, may overlap): O(n log n) in all
  // ranges of that name, where n calls to addRange would be quadratic.
  void addRanges(std::string_view name, Ranges ranges);
  const SmallVector<Scalar, 5>& scalars() const { return scalars_; }
  const SmallVector<RangeSet, 1>& rangeSets() const { return rangeSets_; }

  // True when every scalar here is >= other's and every range of other is
  // covered here.
  bool contains(const Resources& other) const;

  Resources& operator+=(const Resources& other);
  // Subtracts; scalars stop at zero and ranges are removed where covered.
  Resources& operator-=(const Resources& other);
  friend Resources operator+(Resources a, const Resources& b) { return a += b; }
  friend Resources operator-(Resources a, const Resources& b) { return a -= b; }
  bool operator==(const Resources& other) const;

 private:
  Scalar* findScalar(std::string_view name);
  const Scalar* findScalar(std::string_view name) const;
  RangeSet* findRanges(std::string_view name);
  const RangeSet* findRanges(std::string_view name) const;
  void removeEmpty();

  SmallVector<Scalar, 5> scalars_;      // sorted by name
  SmallVector<RangeSet, 1> rangeSets_;  // sorted by name
};

// Converts a double to fixed-point millis (rounded); values past 2^53/1000
// or negative are an error.
Result<int64_t> toMillis(double value, std::string_view what);

}  // namespace allot
