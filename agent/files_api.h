// FilesApi: a task's sandbox over the agent's HTTP endpoint, for its owner.
//
//   GET /files/browse?framework=F&task=T[&path=DIR]
//       {"path":..,"truncated":false,"entries":[{"name","type","size","mtimeS"}]}
//   GET /files/read?framework=F&task=T&(stream=stdout|stderr|path=FILE)
//                  [&offset=N][&length=N | &tail=N]
//       the bytes (at most kReadBytesMax) at `offset`, or the last `tail`
//       bytes; headers X-Allot-Offset (where they start), X-Allot-Size (the
//       file's size) and X-Allot-File (its identity, "dev:inode").
//   GET /files/follow?framework=F&task=T&(stream=..|path=..)[&offset=N][&file=ID]
//       the file from `offset` (default: its end) as it grows, chunked. The
//       answer ends after followDuration, once the file was rotated and its
//       last bytes sent, or at its end once the task no longer runs; the client resumes with offset = X-Allot-Offset
//       + the bytes it got and file = X-Allot-File. A `file` that is no
//       longer the one at the path (rotated) resumes at offset 0 of the new
//       one; an offset past the end (truncated) too.
//
// `stream` names the task's output: <task>.stdout/.stderr
// (base/files.h taskOutputFile) for a command task, the executor's
// stdout/stderr otherwise. The task is found among the executors that run
// it or ran it lately (ExecutorManager::taskSandbox).
//
// Who may read: with TLS, the task's framework principal
// (FrameworkInfo.principal, from the master), and operators as the master's
// ACLs say (Agent::sandboxReaders(): an `operate` rule with --acls, a
// certificate of role `operator` without); anyone else gets 403. Without TLS
// the endpoint listens on loopback only (or --insecure) and carries no
// identity: everyone who reaches it may read, like /state.
// Files open beneath the sandbox only (agent/sandbox_files.h).
//
// Follow is bounded: at most followersMax at once (503 past it), at most
// passBytes per follower per pass, one pass per poll of the loop's timer
// while any follower waits; the read is a pread on the loop (page cache),
// never a blocking wait.
//
// Thread: the agent's loop. Lives inside AgentHttp, which stops its server
// before destroying it.
#pragma once

#include <list>
#include <memory>
#include <string>

#include "agent/agent.h"
#include "agent/sandbox_files.h"
#include "http/server.h"

namespace allot {

struct FilesApiOptions {
  size_t followersMax = 64;
  size_t passBytes = 64 * 1024;
  Duration poll = std::chrono::milliseconds(20);
  Duration followDuration = std::chrono::seconds(30);
};

class FilesApi {
 public:
  FilesApi(asio::io_context& io, Agent& agent, FilesApiOptions options = {});
  ~FilesApi();
  void addRoutes(http::Server& server);
  // Ends every follow (the server is stopping).
  void stop();
  size_t followers() const { return followers_.size(); }

 private:
  struct Target;
  struct Follower;
  Result<Target> target(const http::Request& request, unsigned* status) const;
  http::Response browse(const http::Request& request) const;
  http::Response read(const http::Request& request) const;
  http::Response follow(const http::Request& request);
  void serve(const std::shared_ptr<Follower>& f);
  void finish(const std::shared_ptr<Follower>& f);
  void armPoll();
  void poll();

  asio::io_context& io_;
  Agent& agent_;
  FilesApiOptions options_;
  std::list<std::shared_ptr<Follower>> followers_;  // at most followersMax
  asio::steady_timer pollTimer_;
  bool pollArmed_ = false;
};

// Why the peer of `request` may not read a sandbox of a task of framework
// principal `owner` (empty: it may).
std::string readRefusal(const http::Request& request, const std::string& owner,
                        const SandboxReaders& readers);

}  // namespace allot
