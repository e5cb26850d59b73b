#include "agent/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstring>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "base/files.h"
#include "base/log.h"
#include "base/unique_fd.h"
#include "proto/frame.h"

namespace allot {
namespace {

constexpr std::string_view kMagic = "allot-executor-checkpoint 1\n";

Result<std::string> readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error::fromErrno("open " + path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

}  // namespace

std::string encodeCheckpoint(const ExecutorCheckpoint& c) {
  // A small text header (pid, start time, sandbox) and then frames: the
  // framework and executor, each live task, each task's latest status.
  std::string out = c.sandbox + "\n";
  wire::Envelope e;
  auto* r = e.mutable_executor_registered();
  *r->mutable_framework() = c.framework;
  *r->mutable_executor() = c.executor;
  Status st = appendFrame(e, &out);
  CHECK(st.ok());
  for (const auto& t : c.tasks) {
    wire::Envelope te;
    *te.mutable_launch_task()->mutable_task() = t;
    if (!appendFrame(te, &out)) LOG_ERROR("checkpoint: task " << t.task_id() << " too large");
  }
  for (const auto& [id, s] : c.latest) {
    wire::Envelope se;
    *se.mutable_status_update()->mutable_status() = s;
    if (!appendFrame(se, &out)) LOG_ERROR("checkpoint: status of " << id << " too large");
  }
  std::string layers;
  for (const std::string& layer : c.imageLayers) layers += (layers.empty() ? " " : ",") + layer;
  // The header says how long the rest is: a torn or stale tail is detected.
  return std::string(kMagic) + std::to_string(c.pid) + " " + std::to_string(c.startTime) + " " +
         std::to_string(c.sequence) + " " + std::to_string(out.size()) + " " + c.secret + layers + "\n" + out;
}

Result<ExecutorCheckpoint> decodeCheckpoint(const std::string& bytes) {
  if (bytes.compare(0, kMagic.size(), kMagic) != 0) return Error{"not an executor checkpoint"};
  size_t line1 = bytes.find('\n', kMagic.size());
  if (line1 == std::string::npos) return Error{"truncated header"};
  size_t line2 = bytes.find('\n', line1 + 1);
  if (line2 == std::string::npos) return Error{"truncated header"};
  ExecutorCheckpoint c;
  std::istringstream header(bytes.substr(kMagic.size(), line1 - kMagic.size()));
  long long pid = 0;
  size_t length = 0;
  if (!(header >> pid >> c.startTime >> c.sequence >> length) || pid <= 0) return Error{"bad header"};
  header >> c.secret;  // absent in checkpoints written before executor secrets
  std::string layers, layer;
  header >> layers;  // absent without an image
  std::istringstream layerList(layers);
  while (std::getline(layerList, layer, ',') && c.imageLayers.size() < kCheckpointLayersMax)
    if (!layer.empty()) c.imageLayers.push_back(layer);
  if (bytes.size() != line1 + 1 + length) return Error{"length mismatch (torn write)"};
  c.pid = static_cast<pid_t>(pid);
  c.sandbox = bytes.substr(line1 + 1, line2 - line1 - 1);
  FrameDecoder decoder;
  decoder.append(bytes.data() + line2 + 1, bytes.size() - line2 - 1);
  wire::Envelope e;
  bool first = true;
  while (true) {
    auto more = decoder.next(&e);
    if (!more) return Error{"bad frame: " + more.error().describe()};
    if (!*more) break;
    if (first) {
      if (!e.has_executor_registered()) return Error{"first record is not the executor"};
      c.framework = e.executor_registered().framework();
      c.executor = e.executor_registered().executor();
      first = false;
    } else if (e.has_launch_task()) {
      c.tasks.push_back(e.launch_task().task());
    } else if (e.has_status_update()) {
      c.latest[e.status_update().status().task_id()] = e.status_update().status();
    }
  }
  if (first || decoder.midFrame()) return Error{"truncated checkpoint"};
  return c;
}

CheckpointStore::CheckpointStore(std::string metaDir) : dir_(std::move(metaDir)) {}

CheckpointStore::~CheckpointStore() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (writer_.joinable()) writer_.join();
}

Status CheckpointStore::init() {
  std::error_code ec;
  std::filesystem::create_directories(dir_ + "/executors", ec);
  if (ec) return Error{"create " + dir_ + "/executors: " + ec.message()};
  if (!writer_.joinable()) writer_ = std::thread([this] { writerLoop(); });
  return okStatus();
}

void CheckpointStore::flush() {
  std::unique_lock lock(mutex_);
  idle_.wait(lock, [&] { return jobs_.empty() && !busy_; });
}

void CheckpointStore::enqueue(Job job) {
  {
    std::unique_lock lock(mutex_);
    if (writer_.joinable() && jobs_.size() < kCheckpointQueueMax) {
      jobs_.push_back(std::move(job));
      wake_.notify_one();
      return;
    }
  }
  flush();
  perform(job);
}

void CheckpointStore::writerLoop() {
  std::unique_lock lock(mutex_);
  while (true) {
    wake_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
    if (jobs_.empty()) return;  // stopping, all written
    Job job = std::move(jobs_.front());
    jobs_.pop_front();
    busy_ = true;
    lock.unlock();
    perform(job);
    lock.lock();
    busy_ = false;
    if (jobs_.empty()) idle_.notify_all();
  }
}

void CheckpointStore::perform(Job& job) {
  std::string base = executorPath(job.container);
  if (!job.checkpoint) {
    for (const char* slot : {".0", ".1"}) {
      std::string path = base + slot;
      if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
        LOG_ERROR("checkpoint: unlink " << path << ": " << std::strerror(errno));
      }
    }
    std::lock_guard lock(mutex_);
    nextSequence_.erase(job.container);
    return;
  }
  {
    std::lock_guard lock(mutex_);
    job.checkpoint->sequence = ++nextSequence_[job.container];
  }
  std::string data = encodeCheckpoint(*job.checkpoint);
  std::string path = base + (job.checkpoint->sequence % 2 ? ".1" : ".0");
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600));
  size_t done = 0;
  while (fd && done < data.size()) {
    ssize_t n = ::pwrite(fd.get(), data.data() + done, data.size() - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  if (!fd || done < data.size() || ::ftruncate(fd.get(), static_cast<off_t>(data.size())) != 0) {
    LOG_ERROR("checkpoint: write " << path << ": " << std::strerror(errno));
  }
}

Status CheckpointStore::saveAgentId(const std::string& agentId) {
  return writeFileAtomically(dir_ + "/agent_id", agentId + "\n");
}

Result<std::string> CheckpointStore::loadAgentId() const {
  std::string path = dir_ + "/agent_id";
  if (!std::filesystem::exists(path)) return std::string();
  auto bytes = readFile(path);
  if (!bytes) return bytes.error();
  std::string id = *bytes;
  while (!id.empty() && (id.back() == '\n' || id.back() == ' ')) id.pop_back();
  return id;
}

Status CheckpointStore::saveAgentSecret(const std::string& secret) {
  return writeFileAtomically(dir_ + "/agent_secret", secret + "\n");
}

Result<std::string> CheckpointStore::loadAgentSecret() const {
  std::string path = dir_ + "/agent_secret";
  if (!std::filesystem::exists(path)) return std::string();
  auto bytes = readFile(path);
  if (!bytes) return bytes.error();
  std::string secret = *bytes;
  while (!secret.empty() && (secret.back() == '\n' || secret.back() == ' ')) secret.pop_back();
  return secret;
}

std::string CheckpointStore::executorPath(const std::string& container) const {
  return dir_ + "/executors/" + container;
}

Status CheckpointStore::saveExecutor(const ExecutorCheckpoint& checkpoint) {
  enqueue(Job{checkpoint.container, checkpoint});
  return okStatus();
}

Status CheckpointStore::removeExecutor(const std::string& container) {
  enqueue(Job{container, std::nullopt});
  return okStatus();
}

// Checkpoints written before containerName() (base/files.h) carry an older
// spelling of the name: their slots are renamed to the one name, so the
// checkpoint, the sandbox and the cgroups of a container agree again.
std::string CheckpointStore::adoptName(const std::string& found, const ExecutorCheckpoint& c,
                                       const std::vector<std::string>& paths) {
  std::string name = containerName(c.framework.id(), c.executor.executor_id());
  if (name == found) return found;
  for (const auto& path : paths) {
    std::string slot = path.substr(path.size() - 2);  // ".0" or ".1"
    std::string to = executorPath(name) + slot;
    if (::rename(path.c_str(), to.c_str()) != 0) {
      LOG_ERROR("executor checkpoint " << found << ": rename " << path << " to " << to << ": "
                                       << std::strerror(errno) << "; keeping the old name");
      return found;
    }
  }
  LOG_INFO("executor checkpoint " << found << " renamed to " << name);
  return name;
}

std::vector<ExecutorCheckpoint> CheckpointStore::loadExecutors() {
  flush();
  std::map<std::string, std::vector<std::string>> slots;  // container -> slot paths
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir_ + "/executors", ec)) {
    std::string name = entry.path().filename();
    if (name.size() > 2 && (name.ends_with(".0") || name.ends_with(".1"))) {
      slots[name.substr(0, name.size() - 2)].push_back(entry.path());
    }
  }
  std::vector<ExecutorCheckpoint> out;
  for (auto& [container, paths] : slots) {
    std::optional<ExecutorCheckpoint> best;
    std::string problems;
    for (const auto& path : paths) {
      auto bytes = readFile(path);
      auto c = bytes ? decodeCheckpoint(*bytes) : Result<ExecutorCheckpoint>(bytes.error());
      if (!c) {
        problems += path + ": " + c.error().describe() + "; ";
      } else if (!best || c->sequence > best->sequence) {
        best = std::move(*c);
      }
    }
    if (!best) {
      LOG_ERROR("executor checkpoint " << container << " unreadable (" << problems
                                       << "); moved aside to .corrupt");
      for (const auto& path : paths) std::filesystem::rename(path, path + ".corrupt", ec);
      continue;
    }
    if (!problems.empty()) LOG_WARNING("executor checkpoint " << container << ": using the older slot: " << problems);
    best->container = adoptName(container, *best, paths);
    {
      std::lock_guard lock(mutex_);
      nextSequence_[best->container] = best->sequence;
    }
    out.push_back(std::move(*best));
  }
  return out;
}

}  // namespace allot
