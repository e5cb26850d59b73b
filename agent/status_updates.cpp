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
constexpr int kLogFlags = O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC;

// The log replaced by `data` (temp file, fdatasync, rename), or removed
// when there is nothing left in it.
Status replaceLog(const std::string& path, const std::string& data) {
  if (!data.empty()) return writeFileAtomically(path, data);
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) return Error::fromErrno("unlink " + path);
  return okStatus();
}

}  // namespace

UpdateStore::UpdateStore(std::string dir, size_t updatesPerFrameworkMax, asio::io_context* io)
    : dir_(std::move(dir)), perFrameworkMax_(updatesPerFrameworkMax), io_(io) {
  // The thread gets its own weak_ptr: the destructor resets alive_ while it runs.
  if (io_) fileThread_ = std::thread([this, alive = std::weak_ptr<int>(alive_)] { fileLoop(alive); });
}

UpdateStore::~UpdateStore() {
  alive_.reset();
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (fileThread_.joinable()) fileThread_.join();
}

void UpdateStore::enqueue(FileJob job) {
  {
    std::lock_guard lock(mutex_);
    fileJobs_.push_back(std::move(job));
  }
  wake_.notify_one();
}

// Jobs run in the order they were queued (an open queued after a rewrite
// opens the new file; a removal queued after an open removes what it
// made). One fdatasync per log covers every sync job of a batch (group
// commit: each was queued after its record was written). The results go
// back to the loop thread; jobs left at destruction still run.
void UpdateStore::fileLoop(std::weak_ptr<int> alive) {
  std::unique_lock lock(mutex_);
  while (true) {
    wake_.wait(lock, [&] { return stopping_ || !fileJobs_.empty(); });
    if (fileJobs_.empty()) return;
    std::vector<FileJob> jobs = std::move(fileJobs_);
    fileJobs_.clear();
    lock.unlock();
    std::map<const UniqueFd*, Status> synced;
    for (auto& job : jobs) {
      auto result = perform(job, synced);
      asio::post(*io_, [this, alive, st = result.first, fd = result.second, done = std::move(job.done)] {
        if (alive.expired() || !done) return;
        LoopSections::Timer timer(sections_, section_);
        done(st, fd);
      });
    }
    lock.lock();
  }
}

std::pair<Status, std::shared_ptr<UniqueFd>> UpdateStore::perform(const FileJob& job,
                                                                  std::map<const UniqueFd*, Status>& synced) {
  switch (job.kind) {
    case FileJob::Kind::kOpen: {
      auto fd = std::make_shared<UniqueFd>(::open(job.path.c_str(), kLogFlags, 0600));
      if (!fd->valid()) return {Error::fromErrno("open " + job.path), nullptr};
      return {okStatus(), fd};
    }
    case FileJob::Kind::kSync: {
      auto it = synced.find(job.fd.get());
      if (it == synced.end()) {
        Status st = ::fdatasync(job.fd->get()) == 0 ? okStatus() : Status(Error::fromErrno("fdatasync " + job.path));
        it = synced.emplace(job.fd.get(), st).first;
      }
      return {it->second, nullptr};
    }
    case FileJob::Kind::kReplace:
      return {replaceLog(job.path, job.data), nullptr};
  }
  return {Error{"update log " + job.path + ": unknown job"}, nullptr};
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
  Queue& q = queueOf(frameworkId);
  for (const auto& r : records) {
    if (r.has_status_update()) insert(q, r.status_update().status());
    if (r.has_status_acknowledgement()) erase(q, r.status_acknowledgement().update_id());
  }
  // Start from a compact log that holds exactly what survived, under the
  // name this version gives it (older agents escaped ids differently).
  if (auto st = rewrite(q, frameworkId, nullptr, /*now=*/true); !st) return st;
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

UpdateStore::Queue& UpdateStore::queueOf(const std::string& frameworkId) {
  auto [it, made] = queues_.try_emplace(frameworkId);
  if (made) it->second.generation = ++generations_;
  return it->second;
}

Status UpdateStore::add(const wire::TaskStatus& status, Durable durable) {
  CHECK(!status.framework_id().empty() && !status.update_id().empty());
  Queue& q = queueOf(status.framework_id());
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
  if (overflow) return rewrite(q, status.framework_id(), std::move(durable));  // fdatasync'd: rare
  wire::Envelope record;
  *record.mutable_status_update()->mutable_status() = status;
  return append(q, status.framework_id(), record, Waiting{std::move(durable), isTerminal(status.state())});
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
  if (auto st = append(q, frameworkId, record, Waiting{}); !st) return st.error();
  return true;
}

Status UpdateStore::append(Queue& q, const std::string& frameworkId, const wire::Envelope& record,
                           Waiting waiting) {
  std::string frame;
  if (auto st = appendFrame(record, &frame); !st) {
    if (waiting.durable) waiting.durable(st);
    return st;
  }
  std::string path = pathOf(frameworkId);
  if (!io_) return appendInline(q, path, frame, waiting);
  if (!q.log) {
    q.unwritten += frame;
    if (waiting.durable || waiting.terminal) q.waiting.push_back(std::move(waiting));
    openLater(q, frameworkId);
    return okStatus();
  }
  Status st = writeAll(q.log->get(), frame, path);
  afterWrite(q, path, st, std::move(waiting));
  return st;
}

Status UpdateStore::appendInline(Queue& q, const std::string& path, const std::string& frame, Waiting& waiting) {
  Status st;
  if (!q.log) {
    auto fd = std::make_shared<UniqueFd>(::open(path.c_str(), kLogFlags, 0600));
    if (fd->valid()) q.log = std::move(fd);
    else st = Error::fromErrno("open " + path);
  }
  if (st) st = writeAll(q.log->get(), frame, path);
  if (st && waiting.terminal && ::fdatasync(q.log->get()) != 0) st = Error::fromErrno("fdatasync " + path);
  if (waiting.durable) waiting.durable(st);
  return st;
}

// A record written to an open log: a terminal one waits for the file
// thread's fdatasync, any other is durable now.
void UpdateStore::afterWrite(Queue& q, const std::string& path, Status st, Waiting waiting) {
  if (st && waiting.terminal) {
    enqueue(FileJob{FileJob::Kind::kSync, path, q.log, {},
                    [durable = std::move(waiting.durable)](Status st, std::shared_ptr<UniqueFd>) {
                      if (durable) durable(st);
                    }});
    return;
  }
  if (waiting.durable) waiting.durable(st);
}

void UpdateStore::openLater(Queue& q, const std::string& frameworkId) {
  if (q.opening) return;
  q.opening = true;
  enqueue(FileJob{FileJob::Kind::kOpen, pathOf(frameworkId), nullptr, {},
                  [this, frameworkId, gen = q.generation](Status st, std::shared_ptr<UniqueFd> fd) {
                    onOpened(frameworkId, gen, std::move(st), std::move(fd));
                  }});
}

// The log is open: the records that waited for it are written, in order.
// A framework forgotten or a log rewritten meanwhile drops this open (the
// rewrite holds those records).
void UpdateStore::onOpened(const std::string& frameworkId, uint64_t generation, Status st,
                           std::shared_ptr<UniqueFd> fd) {
  auto it = queues_.find(frameworkId);
  if (it == queues_.end() || it->second.generation != generation) return;
  Queue& q = it->second;
  q.opening = false;
  std::string path = pathOf(frameworkId);
  std::string frames = std::move(q.unwritten);
  std::vector<Waiting> waiting = std::move(q.waiting);
  q.unwritten.clear();
  q.waiting.clear();
  if (st) {
    q.log = std::move(fd);
    st = writeAll(q.log->get(), frames, path);
  }
  if (!st) LOG_ERROR("update log of framework " << frameworkId << ": " << st.error().describe());
  std::vector<Durable> now;
  for (auto& w : waiting) {
    if (st && w.terminal) afterWrite(q, path, st, std::move(w));
    else if (w.durable) now.push_back(std::move(w.durable));
  }
  for (auto& durable : now) durable(st);  // last: a callback may change the store
}

std::string UpdateStore::encodeQueue(const Queue& q, Status* st) const {
  std::string data;
  wire::Envelope record;
  for (const auto& [seq, status] : q.bySequence) {
    *record.mutable_status_update()->mutable_status() = status;
    if (*st = appendFrame(record, &data); !*st) return "";
  }
  return data;
}

Status UpdateStore::rewrite(Queue& q, const std::string& frameworkId, Durable durable, bool now) {
  q.log.reset();
  q.tombstones = 0;
  q.generation = ++generations_;  // an open still queued was for the old file
  q.opening = false;
  q.unwritten.clear();  // the new content holds what those records said
  std::vector<Waiting> waiting = std::move(q.waiting);
  q.waiting.clear();
  if (durable) waiting.push_back(Waiting{std::move(durable), true});
  auto finish = [waiting = std::move(waiting)](Status st) mutable {
    for (auto& w : waiting) {
      if (w.durable) w.durable(st);
    }
  };
  Status st;
  std::string data = encodeQueue(q, &st);
  std::string path = pathOf(frameworkId);
  if (st && io_ && !now) {
    enqueue(FileJob{FileJob::Kind::kReplace, path, nullptr, std::move(data),
                    [finish = std::move(finish)](Status st, std::shared_ptr<UniqueFd>) mutable { finish(st); }});
    return okStatus();
  }
  if (st) st = replaceLog(path, data);
  finish(st);
  return st;
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
