#include "proto/resources.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <sstream>

namespace allot {
namespace {

constexpr double kMaxScalar = 1e12;

using Ranges = Resources::Ranges;

void normalize(Ranges* ranges) {
  std::sort(ranges->begin(), ranges->end());
  Ranges merged;
  for (const auto& r : *ranges) {
    if (!merged.empty() && (merged.back().second == UINT64_MAX || r.first <= merged.back().second + 1)) {
      merged.back().second = std::max(merged.back().second, r.second);
    } else {
      merged.push_back(r);
    }
  }
  *ranges = std::move(merged);
}

// Both inputs sorted, disjoint and merged: one merge pass, linear in both.
bool coversAll(const Ranges& have, const Ranges& want) {
  size_t h = 0;
  for (const auto& w : want) {
    while (h < have.size() && have[h].second < w.first) ++h;
    if (h == have.size() || have[h].first > w.first || have[h].second < w.second) return false;
  }
  return true;
}

// Both inputs sorted, disjoint and merged; so is the result. Linear.
Ranges subtractRanges(const Ranges& have, const Ranges& remove) {
  Ranges out;
  size_t x = 0;
  for (auto r : have) {
    while (x < remove.size() && remove[x].second < r.first) ++x;
    bool consumed = false;
    for (size_t y = x; y < remove.size() && remove[y].first <= r.second; ++y) {
      if (remove[y].first > r.first) out.push_back({r.first, remove[y].first - 1});
      if (remove[y].second >= r.second) {
        consumed = true;
        break;
      }
      r.first = remove[y].second + 1;
      x = y + 1;
    }
    if (!consumed) out.push_back(r);
  }
  return out;
}

// Adds `value` to `*millis`, saturating at kMaxMillis so sums over many
// agents or tasks can never overflow.
constexpr int64_t kMaxMillis = int64_t{1} << 62;
int64_t addMillis(int64_t a, int64_t b) {
  int64_t sum = 0;
  if (__builtin_add_overflow(a, b, &sum) || sum > kMaxMillis) return kMaxMillis;
  return sum;
}

Result<uint64_t> parseU64(std::string_view text, std::string_view what) {
  uint64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
    return Error{"resource '" + std::string(what) + "': '" + std::string(text) +
                 "' is not a non-negative integer"};
  }
  return value;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

Status parseRangeList(std::string_view name, std::string_view body, Resources* out) {
  // body is "a-b,c-d" (brackets already stripped); "a" alone means [a-a].
  while (!body.empty()) {
    size_t comma = body.find(',');
    std::string_view item = trim(body.substr(0, comma));
    body = comma == std::string_view::npos ? std::string_view{} : body.substr(comma + 1);
    size_t dash = item.find('-');
    auto begin = parseU64(trim(item.substr(0, dash)), name);
    if (!begin) return begin.error();
    uint64_t endValue = *begin;
    if (dash != std::string_view::npos) {
      auto end = parseU64(trim(item.substr(dash + 1)), name);
      if (!end) return end.error();
      endValue = *end;
    }
    if (endValue < *begin) {
      return Error{"resource '" + std::string(name) + "': range " + std::string(item) +
                   " ends before it begins"};
    }
    out->addRange(name, *begin, endValue);
  }
  return okStatus();
}

}  // namespace

Result<int64_t> toMillis(double value, std::string_view what) {
  if (!std::isfinite(value) || value < 0 || value > kMaxScalar) {
    std::ostringstream text;
    text << "resource '" << what << "': value " << value << " is not in 0.." << kMaxScalar;
    return Error{text.str()};
  }
  return static_cast<int64_t>(std::llround(value * 1000.0));
}

Result<Resources> Resources::parse(std::string_view text) {
  Resources out;
  std::vector<std::string> seen;
  while (!text.empty()) {
    size_t semi = text.find(';');
    std::string_view entry = trim(text.substr(0, semi));
    text = semi == std::string_view::npos ? std::string_view{} : text.substr(semi + 1);
    if (entry.empty()) continue;
    size_t colon = entry.find(':');
    if (colon == std::string_view::npos || colon == 0) {
      return Error{"resource entry '" + std::string(entry) + "' is not NAME:VALUE"};
    }
    std::string name(trim(entry.substr(0, colon)));
    std::string_view value = trim(entry.substr(colon + 1));
    if (std::find(seen.begin(), seen.end(), name) != seen.end()) {
      return Error{"resource '" + name + "' is given twice"};
    }
    seen.push_back(name);
    if (!value.empty() && value.front() == '[') {
      if (value.back() != ']') return Error{"resource '" + name + "': missing ']'"};
      if (Status st = parseRangeList(name, value.substr(1, value.size() - 2), &out); !st) {
        return st.error();
      }
      continue;
    }
    std::string number(value);
    char* end = nullptr;
    double parsed = std::strtod(number.c_str(), &end);
    if (number.empty() || end != number.c_str() + number.size()) {
      return Error{"resource '" + name + "': '" + number + "' is not a number"};
    }
    auto millis = toMillis(parsed, name);
    if (!millis) return millis.error();
    out.setScalarMillis(name, *millis);
  }
  return out;
}

Result<Resources> Resources::fromWire(const ResourceList& list) {
  Resources out;
  for (const wire::Resource& r : list) {
    if (r.name().empty()) return Error{"resource with an empty name"};
    if (out.findScalar(r.name()) != nullptr || out.findRanges(r.name()) != nullptr) {
      return Error{"resource '" + r.name() + "' is given twice"};
    }
    if (r.ranges_size() > 0) {
      Ranges ranges;
      ranges.reserve(r.ranges_size());
      for (const wire::Range& range : r.ranges()) {
        if (range.end() < range.begin()) {
          return Error{"resource '" + r.name() + "': range ends before it begins"};
        }
        ranges.push_back({range.begin(), range.end()});
      }
      out.addRanges(r.name(), std::move(ranges));
      continue;
    }
    auto millis = toMillis(r.scalar(), r.name());
    if (!millis) return millis.error();
    out.setScalarMillis(r.name(), *millis);
  }
  return out;
}

void Resources::toWire(ResourceList* out) const {
  for (const Scalar& s : scalars_) {
    wire::Resource* r = out->Add();
    r->set_name(s.name);
    r->set_scalar(static_cast<double>(s.millis) / 1000.0);
  }
  for (const RangeSet& set : rangeSets_) {
    wire::Resource* r = out->Add();
    r->set_name(set.name);
    for (const auto& [begin, end] : set.ranges) {
      wire::Range* range = r->add_ranges();
      range->set_begin(begin);
      range->set_end(end);
    }
  }
}

std::string Resources::toString() const {
  std::ostringstream text;
  bool first = true;
  for (const Scalar& s : scalars_) {
    text << (first ? "" : ";") << s.name << ":" << static_cast<double>(s.millis) / 1000.0;
    first = false;
  }
  for (const RangeSet& set : rangeSets_) {
    text << (first ? "" : ";") << set.name << ":[";
    for (size_t i = 0; i < set.ranges.size(); ++i) {
      text << (i ? "," : "") << set.ranges[i].first << "-" << set.ranges[i].second;
    }
    text << "]";
    first = false;
  }
  return text.str();
}

bool Resources::empty() const { return scalars_.empty() && rangeSets_.empty(); }

Resources::Scalar* Resources::findScalar(std::string_view name) {
  for (Scalar& s : scalars_) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

const Resources::Scalar* Resources::findScalar(std::string_view name) const {
  return const_cast<Resources*>(this)->findScalar(name);
}

Resources::RangeSet* Resources::findRanges(std::string_view name) {
  for (RangeSet& r : rangeSets_) {
    if (r.name == name) return &r;
  }
  return nullptr;
}

const Resources::RangeSet* Resources::findRanges(std::string_view name) const {
  return const_cast<Resources*>(this)->findRanges(name);
}

double Resources::scalar(std::string_view name) const {
  return static_cast<double>(scalarMillis(name)) / 1000.0;
}

int64_t Resources::scalarMillis(std::string_view name) const {
  const Scalar* s = findScalar(name);
  return s == nullptr ? 0 : s->millis;
}

void Resources::setScalar(std::string_view name, double value) {
  setScalarMillis(name, static_cast<int64_t>(std::llround(value * 1000.0)));
}

void Resources::setScalarMillis(std::string_view name, int64_t millis) {
  CHECK(millis >= 0);
  if (Scalar* s = findScalar(name)) {
    s->millis = millis;
    return;
  }
  Scalar s{std::string(name), millis};
  auto at = std::lower_bound(scalars_.begin(), scalars_.end(), s,
                             [](const Scalar& a, const Scalar& b) { return a.name < b.name; });
  scalars_.insert(at, std::move(s));
}

void Resources::addRange(std::string_view name, uint64_t begin, uint64_t end) {
  CHECK(begin <= end);
  addRanges(name, Ranges{{begin, end}});
}

void Resources::addRanges(std::string_view name, Ranges ranges) {
  RangeSet* set = findRanges(name);
  if (set == nullptr) {
    RangeSet fresh{std::string(name), {}};
    auto at = std::lower_bound(rangeSets_.begin(), rangeSets_.end(), fresh,
                               [](const RangeSet& a, const RangeSet& b) { return a.name < b.name; });
    set = &*rangeSets_.insert(at, std::move(fresh));
  }
  set->ranges.insert(set->ranges.end(), ranges.begin(), ranges.end());
  normalize(&set->ranges);
}

bool Resources::contains(const Resources& other) const {
  for (const Scalar& s : other.scalars_) {
    if (s.millis > scalarMillis(s.name)) return false;
  }
  for (const RangeSet& want : other.rangeSets_) {
    const RangeSet* have = findRanges(want.name);
    if (want.ranges.empty()) continue;
    if (have == nullptr || !coversAll(have->ranges, want.ranges)) return false;
  }
  return true;
}

Resources& Resources::operator+=(const Resources& other) {
  for (const Scalar& s : other.scalars_) setScalarMillis(s.name, addMillis(scalarMillis(s.name), s.millis));
  for (const RangeSet& set : other.rangeSets_) addRanges(set.name, set.ranges);
  return *this;
}

Resources& Resources::operator-=(const Resources& other) {
  for (const Scalar& s : other.scalars_) {
    if (Scalar* mine = findScalar(s.name)) mine->millis = std::max<int64_t>(0, mine->millis - s.millis);
  }
  for (const RangeSet& set : other.rangeSets_) {
    if (RangeSet* mine = findRanges(set.name)) mine->ranges = subtractRanges(mine->ranges, set.ranges);
  }
  removeEmpty();
  return *this;
}

void Resources::removeEmpty() {
  rangeSets_.erase(std::remove_if(rangeSets_.begin(), rangeSets_.end(),
                                  [](const RangeSet& r) { return r.ranges.empty(); }),
                   rangeSets_.end());
}

bool Resources::operator==(const Resources& other) const {
  auto scalarEq = [](const Scalar& a, const Scalar& b) { return a.name == b.name && a.millis == b.millis; };
  auto rangeEq = [](const RangeSet& a, const RangeSet& b) { return a.name == b.name && a.ranges == b.ranges; };
  std::vector<Scalar> a, b;
  std::copy_if(scalars_.begin(), scalars_.end(), std::back_inserter(a), [](const Scalar& s) { return s.millis != 0; });
  std::copy_if(other.scalars_.begin(), other.scalars_.end(), std::back_inserter(b), [](const Scalar& s) { return s.millis != 0; });
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), scalarEq) &&
         std::equal(rangeSets_.begin(), rangeSets_.end(), other.rangeSets_.begin(),
                    other.rangeSets_.end(), rangeEq);
}

}  // namespace allot
