#include "agent/files_api.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <optional>
#include <vector>

#include "base/files.h"
#include "base/log.h"
#include "proto/json_writer.h"

namespace allot {

struct FilesApi::Target {
  SandboxDir dir;
  std::string path;  // relative to the sandbox
  std::string container, task;
};

struct FilesApi::Follower {
  Target target;
  UniqueFd fd;
  FileIdentity id;
  uint64_t offset = 0;
  std::chrono::steady_clock::time_point deadline;
  http::PieceSink sink;  // set while the server waits for the next piece
  bool rotated = false;  // the path names another file now: drain, then end
};

namespace {

std::string param(const http::Request& r, const char* name) {
  auto it = r.query.find(name);
  return it == r.query.end() ? std::string() : it->second;
}

// A decimal query value; `fallback` when absent, nullopt when malformed.
std::optional<uint64_t> number(const http::Request& r, const char* name, uint64_t fallback) {
  std::string text = param(r, name);
  if (text.empty()) return fallback;
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return v;
}

std::string fileId(const FileIdentity& id) {
  return std::to_string(id.dev) + ":" + std::to_string(id.ino);
}

unsigned statusFor(const Error& e) {
  return e.errnum == ENOENT || e.errnum == ENOTDIR ? 404 : 403;
}

// The master's web UI reads these from another origin (its own page).
void allowCrossOrigin(http::Response* r) {
  r->headers.emplace_back("Access-Control-Allow-Origin", "*");
  r->headers.emplace_back("Access-Control-Expose-Headers", "X-Allot-Offset, X-Allot-Size, X-Allot-File");
}

http::Response refused(unsigned status, const std::string& why) {
  http::Response r = http::Response::text(status, why);
  allowCrossOrigin(&r);
  return r;
}

}  // namespace

std::string readRefusal(const http::Request& request, const std::string& owner,
                        const SandboxReaders& readers) {
  if (!request.tls) return "";  // loopback (or --insecure): no identity, like /state
  if (!owner.empty() && request.principal == owner) return "";
  std::string who = "principal " + request.principal + " may not read this task's files (not its framework's";
  if (!readers.known) return who + "; operators are known once the agent has registered with a master)";
  if (readers.aclsFromFile) {
    for (const auto& p : readers.operators) {
      if (p == "*" || p == request.principal) return "";
    }
    return who + ", no operate rule in the master's --acls)";
  }
  if (request.certRole == "operator") return "";
  return who + ", not of role operator)";
}

FilesApi::FilesApi(asio::io_context& io, Agent& agent, FilesApiOptions options)
    : io_(io), agent_(agent), options_(options), pollTimer_(io) {}

FilesApi::~FilesApi() { stop(); }

void FilesApi::addRoutes(http::Server& server) {
  server.route("GET", "/files/browse", [this](const http::Request& r) { return browse(r); });
  server.route("GET", "/files/read", [this](const http::Request& r) { return read(r); });
  server.route("GET", "/files/follow", [this](const http::Request& r) { return follow(r); });
}

void FilesApi::stop() {
  pollTimer_.cancel();
  // Dropping the sinks lets their sessions go (the server closes them).
  followers_.clear();
}

Result<FilesApi::Target> FilesApi::target(const http::Request& r, unsigned* status) const {
  *status = 400;
  std::string framework = param(r, "framework"), task = param(r, "task");
  if (framework.empty() || task.empty()) return Error{"framework= and task= are required"};
  std::string stream = param(r, "stream"), path = param(r, "path");
  if (!stream.empty() && stream != "stdout" && stream != "stderr") {
    return Error{"stream= is stdout or stderr"};
  }
  if (Status st = checkRelativePath(path); !st) return st.error();
  auto where = agent_.executors().taskSandbox(framework, task);
  *status = 404;
  if (!where) return Error{"no task " + task + " of framework " + framework + " on this agent"};
  *status = 403;
  if (std::string why = readRefusal(r, where->principal, agent_.sandboxReaders()); !why.empty()) {
    return Error{why};
  }
  if (!stream.empty()) path = where->commandExecutor ? taskOutputFile(task, stream) : stream;
  auto dir = SandboxDir::open(where->sandbox);
  *status = 404;
  if (!dir) return Error{"the task's sandbox is gone: " + dir.error().describe()};
  return Target{std::move(*dir), path, where->container, task};
}

http::Response FilesApi::browse(const http::Request& r) const {
  auto timer = agent_.loopSections().time(AgentSection::kHttp);
  unsigned status = 0;
  auto t = target(r, &status);
  if (!t) return refused(status, t.error().describe());
  auto listing = t->dir.list(t->path);
  if (!listing) return refused(statusFor(listing.error()), listing.error().describe());
  std::string out = "{\"path\":";
  appendJsonString(t->path, &out);
  out += listing->truncated ? ",\"truncated\":true" : ",\"truncated\":false";
  out += ",\"entries\":[";
  for (size_t i = 0; i < listing->entries.size(); ++i) {
    const FileEntry& e = listing->entries[i];
    out += i ? ",{\"name\":" : "{\"name\":";
    appendJsonString(e.name, &out);
    out += ",\"type\":\"";
    out += e.type;
    out += "\",\"size\":";
    appendJsonUint64(e.size, &out);
    out += ",\"mtimeS\":";
    appendJsonDouble(e.mtimeS, &out);
    out += "}";
  }
  out += "]}\n";
  http::Response answer = http::Response::json(std::move(out));
  allowCrossOrigin(&answer);
  return answer;
}

http::Response FilesApi::read(const http::Request& r) const {
  auto timer = agent_.loopSections().time(AgentSection::kHttp);
  unsigned status = 0;
  auto t = target(r, &status);
  if (!t) return refused(status, t.error().describe());
  auto offset = number(r, "offset", 0);
  auto length = number(r, "length", kReadBytesMax);
  auto tail = number(r, "tail", 0);
  if (!offset || !length || !tail) return refused(400, "offset=, length= and tail= are decimal numbers");
  auto fd = t->dir.openFile(t->path);
  if (!fd) return refused(statusFor(fd.error()), fd.error().describe());
  auto id = identifyFd(fd->get());
  if (!id) return refused(500, id.error().describe());
  if (*tail > 0) {
    *length = std::min<uint64_t>(*tail, kReadBytesMax);
    *offset = id->size > *length ? id->size - *length : 0;
  }
  auto data = readAt(fd->get(), *offset, static_cast<size_t>(std::min<uint64_t>(*length, kReadBytesMax)));
  if (!data) return refused(500, t->path + ": " + data.error().describe());
  http::Response out;
  out.contentType = "application/octet-stream";
  out.body = std::move(*data);
  out.headers = {{"X-Allot-Offset", std::to_string(*offset)},
                 {"X-Allot-Size", std::to_string(id->size)},
                 {"X-Allot-File", fileId(*id)}};
  allowCrossOrigin(&out);
  return out;
}

http::Response FilesApi::follow(const http::Request& r) {
  auto timer = agent_.loopSections().time(AgentSection::kHttp);
  if (followers_.size() >= options_.followersMax) {
    http::Response busy = refused(503, "the agent serves its limit of " +
                                           std::to_string(options_.followersMax) + " follows");
    busy.headers.emplace_back("Retry-After", "1");
    return busy;
  }
  unsigned status = 0;
  auto t = target(r, &status);
  if (!t) return refused(status, t.error().describe());
  auto fd = t->dir.openFile(t->path);
  if (!fd) return refused(statusFor(fd.error()), fd.error().describe());
  auto id = identifyFd(fd->get());
  if (!id) return refused(500, id.error().describe());
  auto offset = number(r, "offset", id->size);
  if (!offset) return refused(400, "offset= is a decimal number");
  std::string wanted = param(r, "file");
  // Another file now (rotated) or a shorter one (truncated): from its start.
  if ((!wanted.empty() && wanted != fileId(*id)) || *offset > id->size) *offset = 0;
  auto f = std::make_shared<Follower>(Follower{std::move(*t), std::move(*fd), *id, *offset,
                                               std::chrono::steady_clock::now() + options_.followDuration,
                                               nullptr, false});
  followers_.push_back(f);
  armPoll();
  http::Response out;
  out.contentType = "application/octet-stream";
  out.headers = {{"X-Allot-Offset", std::to_string(*offset)}, {"X-Allot-File", fileId(*id)}};
  allowCrossOrigin(&out);
  out.pull = [this, weak = std::weak_ptr<Follower>(f)](http::PieceSink sink) {
    auto follower = weak.lock();
    if (!follower) return sink(nullptr, false);
    follower->sink = std::move(sink);
    serve(follower);
  };
  return out;
}

// One pass for one follower that waits for a piece: at most passBytes, or
// the end of the answer (rotated and drained, past its duration, an error).
void FilesApi::serve(const std::shared_ptr<Follower>& f) {
  if (!f->sink) return;
  auto data = readAt(f->fd.get(), f->offset, options_.passBytes);
  if (!data) {
    LOG_WARNING("follow " << f->target.dir.path() << "/" << f->target.path << ": " << data.error().describe());
    return finish(f);
  }
  if (!data->empty()) {
    f->offset += data->size();
    auto sink = std::move(f->sink);
    f->sink = nullptr;
    return sink(std::make_shared<const std::string>(std::move(*data)), true);
  }
  if (f->rotated || std::chrono::steady_clock::now() >= f->deadline) return finish(f);
  // The task ended and its executor's logger wrote all before that was
  // reported: nothing more comes.
  if (!agent_.executors().taskRunsIn(f->target.container, f->target.task)) return finish(f);
  // At the end: a rotation renamed it away (and everything was written to
  // it before the rename), so one more read drains it before the answer ends.
  auto now = f->target.dir.identify(f->target.path);
  if (!now || now->dev != f->id.dev || now->ino != f->id.ino) {
    f->rotated = true;
    return serve(f);
  }
  armPoll();
}

void FilesApi::finish(const std::shared_ptr<Follower>& f) {
  followers_.remove(f);
  if (!f->sink) return;
  auto sink = std::move(f->sink);
  f->sink = nullptr;
  sink(nullptr, false);
}

void FilesApi::armPoll() {
  if (pollArmed_ || followers_.empty()) return;
  pollArmed_ = true;
  pollTimer_.expires_after(options_.poll);
  pollTimer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec) return;
    pollArmed_ = false;
    poll();
  });
}

void FilesApi::poll() {
  auto timer = agent_.loopSections().time(AgentSection::kHttp);
  auto now = std::chrono::steady_clock::now();
  // A copy: serve() and finish() change the list.
  std::vector<std::shared_ptr<Follower>> all(followers_.begin(), followers_.end());
  for (const auto& f : all) {
    if (f->sink) {
      serve(f);
    } else if (now >= f->deadline) {
      finish(f);  // its client is gone or slow: the answer ends at its next pull
    }
  }
  armPoll();
}

}  // namespace allot
