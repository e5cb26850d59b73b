#include "isolators/disk_isolator.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include "base/log.h"

namespace allot {
namespace {

constexpr double kBytesPerMiB = 1024.0 * 1024.0;
// Seconds: longer would leave a task a day of unchecked writes.
constexpr double kIntervalMaxS = 24 * 3600;
// A sandbox near its limit is measured at most this many times as often
// as --disk-watch-interval says.
constexpr int kScanSpeedupMax = 16;

std::string mib(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / kBytesPerMiB);
  return buf;
}

// 0: the container has no `disk` resource (measured, never limited).
uint64_t limitBytesOf(const Resources& limits) {
  return static_cast<uint64_t>(limits.scalarMillis("disk")) * 1024 * 1024 / 1000;
}

class DiskIsolator final : public Isolator {
 public:
  DiskIsolator(asio::io_context& io, WorkerPool& pool, Duration interval, DiskScan scan)
      : pool_(pool), interval_(interval), scan_(std::move(scan)), timer_(io) {}
  ~DiskIsolator() override { alive_.reset(); }

  std::string_view name() const override { return "disk/du"; }

  Status recover(const std::vector<KnownContainer>& known) override {
    for (const auto& k : known) {
      if (!k.config.sandbox.empty()) track(k.id, k.config, false);
    }
    return okStatus();
  }
  Status prepare(const ContainerId& id, const ContainerConfig& config, ChildSetup*) override {
    if (config.sandbox.empty()) return Error{"disk/du: container " + id.name() + " has no sandbox to measure"};
    track(id, config, true);
    return okStatus();
  }
  Status isolate(const ContainerId&, pid_t) override { return okStatus(); }
  Status watch(const ContainerId& id, std::function<void(const Limitation&)> onLimitation) override {
    auto it = sandboxes_.find(id.name());
    if (it == sandboxes_.end()) return Error{"disk/du: no sandbox known for container " + id.name()};
    it->second.onLimitation = std::move(onLimitation);
    return okStatus();
  }
  Status update(const ContainerId& id, const Resources& limits) override {
    auto it = sandboxes_.find(id.name());
    if (it == sandboxes_.end()) return okStatus();
    Sandbox& s = it->second;
    uint64_t before = s.limitBytes;
    s.limitBytes = limitBytesOf(limits);
    // A lower limit may already be passed: measure soon.
    if (s.limitBytes > 0 && (before == 0 || s.limitBytes < before)) {
      s.due = std::min(s.due, SteadyClock::now() + interval_ / kScanSpeedupMax);
      arm();
    }
    return okStatus();
  }
  Status usage(const ContainerId& id, wire::ResourceUsage* usage) override {
    auto it = sandboxes_.find(id.name());
    if (it == sandboxes_.end() || !it->second.measured) return okStatus();
    usage->set_disk_bytes(it->second.bytes);
    return okStatus();
  }
  Status cleanup(const ContainerId& id) override {
    sandboxes_.erase(id.name());
    return okStatus();
  }

 private:
  struct Sandbox {
    std::string path;
    uint64_t generation = 0;
    uint64_t limitBytes = 0;
    uint64_t bytes = 0;  // the last measurement
    bool measured = false;
    bool scanning = false;
    bool limited = false;  // onLimitation fired
    TimePoint due;         // the next scan
    // Growth: the last measurement's time and the rate seen (bytes/s).
    TimePoint measuredAt;
    bool baseline = false;  // measuredAt/bytes are a starting point
    double growthPerS = 0;
    std::function<void(const Limitation&)> onLimitation;
  };

  void track(const ContainerId& id, const ContainerConfig& config, bool fresh);
  void arm();
  void tick();
  void scan(const std::string& name, Sandbox& s);
  void onScanned(const std::string& name, uint64_t generation, const Result<DiskUsage>& measured);
  void schedule(Sandbox& s, uint64_t bytes);
  void limit(Sandbox& s, const std::string& why);

  WorkerPool& pool_;
  Duration interval_;
  DiskScan scan_;
  asio::steady_timer timer_;
  bool armed_ = false;
  TimePoint armedFor_;
  uint64_t armGeneration_ = 0;
  uint64_t nextGeneration_ = 1;
  std::map<std::string, Sandbox> sandboxes_;  // by container name; one per executor
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);
};

// The first scan comes soon: it learns where the sandbox starts (a fresh
// one starts empty at prepare, so its growth is known from then).
void DiskIsolator::track(const ContainerId& id, const ContainerConfig& config, bool fresh) {
  Sandbox& s = sandboxes_[id.name()] = Sandbox{};
  s.path = config.sandbox;
  s.generation = nextGeneration_++;
  s.limitBytes = limitBytesOf(config.limits);
  s.measuredAt = SteadyClock::now();
  s.baseline = fresh;
  s.due = s.measuredAt + interval_ / kScanSpeedupMax;
  arm();
}

// One timer, for the earliest due sandbox; re-armed whenever that changes.
void DiskIsolator::arm() {
  TimePoint next = TimePoint::max();
  for (const auto& [name, s] : sandboxes_) {
    if (!s.scanning && !s.limited) next = std::min(next, s.due);
  }
  if (next == TimePoint::max() || (armed_ && armedFor_ <= next)) return;
  armed_ = true;
  armedFor_ = next;
  uint64_t generation = ++armGeneration_;
  timer_.expires_at(next);
  std::weak_ptr<int> alive = alive_;
  timer_.async_wait([this, alive, generation](const boost::system::error_code& ec) {
    if (ec || alive.expired() || generation != armGeneration_) return;
    armed_ = false;
    tick();
    arm();
  });
}

void DiskIsolator::tick() {
  TimePoint now = SteadyClock::now();
  for (auto& [name, s] : sandboxes_) {
    if (!s.scanning && !s.limited && s.due <= now) scan(name, s);
  }
}

// The scan gets copies only (it runs beside the loop); its result finds
// the sandbox again by name and generation, so a replaced or cleaned-up
// container ignores it.
void DiskIsolator::scan(const std::string& name, Sandbox& s) {
  uint64_t stopAt = s.limitBytes > 0 ? s.limitBytes : UINT64_MAX;
  std::weak_ptr<int> alive = alive_;
  Status queued = pool_.submit<Result<DiskUsage>>(
      [scan = scan_, path = s.path, stopAt] { return scan(path, stopAt); },
      [this, alive, name, gen = s.generation](Result<DiskUsage> measured) {
        if (!alive.expired()) onScanned(name, gen, measured);
      });
  if (!queued) {
    LOG_DEBUG("disk/du: " << name << ": " << queued.error().describe() << "; checked at the next interval");
    s.due = SteadyClock::now() + interval_;
    return;
  }
  s.scanning = true;
}

void DiskIsolator::onScanned(const std::string& name, uint64_t generation, const Result<DiskUsage>& measured) {
  auto it = sandboxes_.find(name);
  if (it == sandboxes_.end() || it->second.generation != generation) return;
  Sandbox& s = it->second;
  s.scanning = false;
  if (!measured) {
    LOG_WARNING("disk/du: container " << name << ": " << measured.error().describe());
    s.due = SteadyClock::now() + interval_;
    arm();
    return;
  }
  schedule(s, measured->bytes);
  s.bytes = measured->bytes;
  s.measured = true;
  arm();
  if (s.limitBytes == 0) return;
  if (measured->bytes > s.limitBytes) {
    limit(s, "disk limit " + mib(s.limitBytes) + " exceeded: the sandbox holds " +
                 (measured->stopped ? "more than " : "") + mib(measured->bytes));
  } else if (measured->tooDeep) {
    limit(s, "disk limit " + mib(s.limitBytes) + " cannot be checked: the sandbox nests directories deeper than " +
                 std::to_string(kDiskUsageDepthMax) + " levels (" + mib(measured->bytes) + " counted above them)");
  }
}

// The growth seen since the last measurement (a burst is remembered, half
// as fast, for one more measurement) decides with the limit when to look
// again: diskScanDelay().
void DiskIsolator::schedule(Sandbox& s, uint64_t bytes) {
  TimePoint now = SteadyClock::now();
  double growth = 0;
  double elapsedS = std::chrono::duration<double>(now - s.measuredAt).count();
  uint64_t before = s.measured ? s.bytes : 0;
  if ((s.measured || s.baseline) && elapsedS > 0 && bytes > before) {
    growth = static_cast<double>(bytes - before) / elapsedS;
  }
  s.growthPerS = std::max(growth, s.growthPerS / 2);
  s.measuredAt = now;
  s.due = now + diskScanDelay(interval_, s.limitBytes, bytes, s.growthPerS);
}

void DiskIsolator::limit(Sandbox& s, const std::string& why) {
  if (s.limited || !s.onLimitation) return;
  s.limited = true;
  Limitation l;
  l.reason = wire::REASON_DISK_LIMIT;
  l.message = why;
  l.usage.set_disk_bytes(s.bytes);
  LOG_WARNING("disk/du: " << s.path << ": " << why);
  s.onLimitation(l);
}

}  // namespace

Duration diskScanDelay(Duration interval, uint64_t limitBytes, uint64_t bytes, double growthBytesPerS) {
  if (limitBytes == 0) return interval;
  Duration floor = interval / kScanSpeedupMax;
  if (bytes >= limitBytes) return floor;
  double free = static_cast<double>(limitBytes - bytes);
  double s = std::chrono::duration<double>(interval).count() * free / static_cast<double>(limitBytes);
  if (growthBytesPerS > 0) s = std::min(s, free / growthBytesPerS / 2);
  return std::clamp(std::chrono::duration_cast<Duration>(std::chrono::duration<double>(s)), floor, interval);
}

std::unique_ptr<Isolator> makeDiskIsolator(asio::io_context& io, WorkerPool& pool, Duration interval,
                                           DiskScan scan) {
  return std::make_unique<DiskIsolator>(io, pool, interval, std::move(scan));
}

Result<std::unique_ptr<Isolator>> makeDiskIsolatorFromOptions(const IsolatorOptions& options) {
  if (!options.io || !options.pool) return Error{"disk/du needs the agent's loop and worker pool"};
  if (!(options.diskWatchIntervalS > 0 && options.diskWatchIntervalS <= kIntervalMaxS)) {
    return Error{"--disk-watch-interval " + std::to_string(options.diskWatchIntervalS) + " is not in (0, " +
                 std::to_string(static_cast<int>(kIntervalMaxS)) + "] seconds"};
  }
  return makeDiskIsolator(*options.io, *options.pool, secondsToDuration(options.diskWatchIntervalS));
}

}  // namespace allot
