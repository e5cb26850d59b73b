#include "agent/status_updates.h"
#include "proto/task_state.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "base/files.h"
#include "base/log.h"
#include "proto/frame.h"

namespace allot {
namespace {

constexpr std::string_view kSuffix = ".updates";
constexpr size_t kTombstonesBeforeCompaction = 256;

Status writeAll(int fd, const std::string& data, const std::string& path) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Error::fromErrno("write " + path);
    done += static_cast<size_t>(n);
  }
  return okStatus();
}

}  // namespace

UpdateStore::UpdateStore(std::string dir, size_t updatesPerFrameworkMax, asio::io_context* io)
    : dir_(std::move(dir)), perFrameworkMax_(updatesPerFrameworkMax), io_(io) {
  if (io_) syncer_ = std::thread([this] { syncerLoop(); });
}

UpdateStore::~UpdateStore() {
  alive_.reset();
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (syncer_.joinable()) syncer_.join();
}

void UpdateStore::syncLater(std::shared_ptr<UniqueFd> fd, const std::string& path, Durable durable) {
  {
    std::lock_guard lock(mutex_);
    syncJobs_.push_back(SyncJob{std::move(fd), path, std::move(durable)});
  }
  wake_.notify_one();
}

// One fdatasync per file covers every job queued for it so far (group
// commit); the results go back to the loop thread.
void UpdateStore::syncerLoop() {
  std::unique_lock lock(mutex_);
  while (true) {
    wake_.wait(lock, [&] { return stopping_ || !syncJobs_.empty(); });
    if (syncJobs_.empty()) return;
    std::vector<SyncJob> jobs = std::move(syncJobs_);
    syncJobs_.clear();
    lock.unlock();
    std::map<int, Status> results;
    for (const auto& job : jobs) {
      int fd = job.fd->get();
      if (results.count(fd)) continue;
      results[fd] = ::fdatasync(fd) == 0 ? okStatus() : Status(Error::fromErrno("fdatasync " + job.path));
    }
    std::weak_ptr<int> alive = alive_;
    for (auto& job : jobs) {
      Status st = results[job.fd->get()];
      asio::post(*io_, [alive, st, durable = std::move(job.durable)] {
        if (!alive.expired() && durable) durable(st);
      });
    }
    lock.lock();
  }
}

std::string UpdateStore::pathOf(const std::string& frameworkId) const {
  return dir_ + "/" + escapeId(frameworkId) + std::string(kSuffix);
}

Status UpdateStore::load() {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) return Error{"create " + dir_ + ": " + ec.message()};
  // Listed first: loading may rename logs in this directory.
  std::vector<std::string> logs;
  for (const auto& entry : std::filesystem::directory_iterator(dir_, ec)) {
    std::string name = entry.path().filename();
    if (name.size() > kSuffix.size() && name.ends_with(kSuffix)) logs.push_back(name);
  }
  if (ec) return Error{"list " + dir_ + ": " + ec.message()};
  for (const auto& name : logs) {
    if (auto st = loadFile(name); !st) return st;
  }
  return okStatus();
}

Status UpdateStore::loadFile(const std::string& fileName) {
  std::string path = dir_ + "/" + fileName;
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error::fromErrno("open " + path);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  FrameDecoder decoder;
  decoder.append(bytes.data(), bytes.size());
  wire::Envelope e;
  std::string frameworkId;
  std::vector<wire::Envelope> records;
  while (true) {
    auto more = decoder.next(&e);
    if (!more) {
      LOG_WARNING(path << ": dropping a corrupt tail: " << more.error().describe());
      break;
    }
    if (!*more) break;
    records.push_back(e);
  }
  if (decoder.midFrame()) LOG_WARNING(path << ": dropping a torn last record");
  for (const auto& r : records) {
    if (r.has_status_update()) frameworkId = r.status_update().status().framework_id();
    if (r.has_status_acknowledgement()) frameworkId = r.status_acknowledgement().framework_id();
    if (!frameworkId.empty()) break;
  }
  if (frameworkId.empty()) return okStatus();
  Queue& q = queues_[frameworkId];
  for (const auto& r : records) {
    if (r.has_status_update()) insert(q, r.status_update().status());
    if (r.has_status_acknowledgement()) erase(q, r.status_acknowledgement().update_id());
  }
  // Start from a compact log that holds exactly what survived, under the
  // name this version gives it (older agents escaped ids differently).
  if (auto st = rewrite(q, frameworkId); !st) return st;
  if (fileName != escapeId(frameworkId) + std::string(kSuffix) && ::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return Error::fromErrno("unlink " + path + " (moved to " + pathOf(frameworkId) + ")");
  }
  return okStatus();
}

void UpdateStore::insert(Queue& q, const wire::TaskStatus& status) {
  if (q.sequenceOf.count(status.update_id())) return;
  uint64_t seq = q.nextSequence++;
  q.bySequence.emplace(seq, status);
  q.sequenceOf.emplace(status.update_id(), seq);
}

void UpdateStore::erase(Queue& q, const std::string& updateId) {
  auto it = q.sequenceOf.find(updateId);
  if (it == q.sequenceOf.end()) return;
  q.bySequence.erase(it->second);
  q.sequenceOf.erase(it);
}

Status UpdateStore::add(const wire::TaskStatus& status, Durable durable) {
  CHECK(!status.framework_id().empty() && !status.update_id().empty());
  Queue& q = queues_[status.framework_id()];
  if (q.sequenceOf.count(status.update_id())) {
    if (durable) durable(okStatus());
    return okStatus();
  }
  bool overflow = q.bySequence.size() >= perFrameworkMax_;
  if (overflow) {
    const wire::TaskStatus& oldest = q.bySequence.begin()->second;
    LOG_WARNING("framework " << status.framework_id() << " has " << q.bySequence.size()
                             << " unacknowledged updates; dropping the oldest (task "
                             << oldest.task_id() << ")");
    erase(q, std::string(oldest.update_id()));
  }
  insert(q, status);
  bool terminal = isTerminal(status.state());
  Status st;
  if (overflow) {
    st = rewrite(q, status.framework_id());  // fdatasync'd inline: rare
  } else {
    wire::Envelope record;
    *record.mutable_status_update()->mutable_status() = status;
    st = append(q, status.framework_id(), record, terminal && !io_);
  }
  if (!st || !terminal || !io_ || overflow) {
    if (durable) durable(st);
    return st;
  }
  syncLater(q.log, pathOf(status.framework_id()), std::move(durable));
  return st;
}

Result<bool> UpdateStore::acknowledge(const std::string& frameworkId, const std::string& updateId) {
  auto qit = queues_.find(frameworkId);
  if (qit == queues_.end() || !qit->second.sequenceOf.count(updateId)) return false;
  Queue& q = qit->second;
  erase(q, updateId);
  ++q.tombstones;
  // Compact only when tombstones dominate: creating and unlinking files is
  // the slow part of an ext4 journal, appends are cheap.
  if (q.tombstones > kTombstonesBeforeCompaction + q.bySequence.size()) {
    if (auto st = rewrite(q, frameworkId); !st) return st.error();
    return true;
  }
  wire::Envelope record;
  auto* a = record.mutable_status_acknowledgement();
  a->set_framework_id(frameworkId);
  a->set_update_id(updateId);
  if (auto st = append(q, frameworkId, record, false); !st) return st.error();
  return true;
}

Status UpdateStore::append(Queue& q, const std::string& frameworkId, const wire::Envelope& record,
                           bool durable) {
  std::string path = pathOf(frameworkId);
  if (!q.log) {
    auto fd = std::make_shared<UniqueFd>(::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600));
    if (!fd->valid()) return Error::fromErrno("open " + path);
    q.log = std::move(fd);
  }
  std::string frame;
  if (auto st = appendFrame(record, &frame); !st) return st;
  if (auto st = writeAll(q.log->get(), frame, path); !st) return st;
  if (durable && ::fdatasync(q.log->get()) != 0) return Error::fromErrno("fdatasync " + path);
  return okStatus();
}

Status UpdateStore::rewrite(Queue& q, const std::string& frameworkId) {
  std::string path = pathOf(frameworkId);
  q.log.reset();
  q.tombstones = 0;
  if (q.bySequence.empty()) {
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) return Error::fromErrno("unlink " + path);
    return okStatus();
  }
  std::string data;
  wire::Envelope record;
  for (const auto& [seq, status] : q.bySequence) {
    *record.mutable_status_update()->mutable_status() = status;
    if (auto st = appendFrame(record, &data); !st) return st;
  }
  return writeFileAtomically(path, data);
}

Status UpdateStore::forgetFramework(const std::string& frameworkId) {
  auto it = queues_.find(frameworkId);
  if (it == queues_.end()) return okStatus();
  it->second.bySequence.clear();
  it->second.sequenceOf.clear();
  Status st = rewrite(it->second, frameworkId);
  queues_.erase(it);
  return st;
}

bool UpdateStore::contains(const std::string& frameworkId, const std::string& updateId) const {
  auto it = queues_.find(frameworkId);
  return it != queues_.end() && it->second.sequenceOf.count(updateId);
}

std::vector<wire::TaskStatus> UpdateStore::pending() const {
  std::vector<wire::TaskStatus> out;
  for (const auto& [fid, q] : queues_) {
    for (const auto& [seq, status] : q.bySequence) out.push_back(status);
  }
  return out;
}

size_t UpdateStore::size() const {
  size_t n = 0;
  for (const auto& [fid, q] : queues_) n += q.bySequence.size();
  return n;
}

}  // namespace allot
