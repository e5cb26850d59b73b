// MasterHttp: the master's operator endpoints on --http-listen, served by
// http::Server on the master's own loop:
//   GET  /health                  {"status":"ok","role":"master",...}
//   GET  /state                   allot.state.State as JSON (streamed; one
//                                 rendering shared by concurrent readers,
//                                 master/state_view_cache.h; 503 with
//                                 Retry-After past stateClientsMax)
//   GET  /metrics                 Prometheus text format
//   GET  /                        the web UI (master/ui/)
//   POST /api/v1/drain?agent=ID[&deadline=S]
//   POST /api/v1/undrain?agent=ID
//   POST /api/v1/kill?task=ID[&framework=ID]
//   GET  /roles                   every role's weight, quota, allocation
//   POST /api/v1/roles?role=R[&weight=W][&quota=RES]  (PUT too; quota=
//                                 empty removes it; answered once stored:
//                                 503 when this master cannot store it)
// Operating endpoints (POST) answer 200 with {"ok":true}, 400 on bad
// parameters, 404 when the agent or task is unknown, 403 when the caller
// may not operate (operatePermission below).
//
// Who may call what (docs/acls.md, "HTTP endpoints"): with TLS
// (MasterHttpOptions::server.tls) every caller holds a certificate from the
// cluster's CA, and any of them may read (GET). Operating (POST) needs the
// principal's `operate` rule when the master has --acls, and a certificate
// of role `operator` when it has none. On a plaintext port (loopback, or
// --insecure) callers have no identity: whoever reaches the port may do
// everything.
//
// Thread: the master's loop. Construct after the MasterServer, stop before
// destroying it.
#pragma once

#include <functional>
#include <memory>

#include "http/server.h"
#include "master/server.h"
#include "master/state_view_cache.h"

namespace allot {

struct MasterHttpOptions {
  http::ServerOptions server;
  // The master was given --acls: operating takes an `operate` rule.
  bool aclsFromFile = false;
  Duration maxDrainDeadline = std::chrono::hours(24 * 7);
  // GET /state readers at once (each holds a connection and a document).
  size_t stateClientsMax = 8;
};

// OK when the caller of `request` may operate (the policy above); the error
// names the principal and what it lacks.
Status operatePermission(const Master& master, bool aclsFromFile, const http::Request& request);

class MasterHttp {
 public:
  static Result<std::unique_ptr<MasterHttp>> create(asio::io_context& io, MasterServer& master,
                                                    MasterHttpOptions options);
  void start() { server_->start(); }
  void stop() {
    server_->stop();
    stateCache_->stop();
  }
  uint16_t port() const { return server_->port(); }

 private:
  MasterHttp(asio::io_context& io, MasterServer& master, MasterHttpOptions options,
             std::unique_ptr<http::Server> server);
  void addRoutes();
  void addReadRoutes();     // /health, /state, /metrics, the UI, GET /roles
  void addOperateRoutes();  // drain, undrain, kill, setting roles
  http::Response metrics();
  http::Response state();
  http::Response roles();
  void setRole(const http::Request& r, http::Reply reply);
  http::Response operate(const http::Request& r, const std::function<Status()>& action);

  MasterServer& master_;
  MasterHttpOptions options_;
  std::unique_ptr<http::Server> server_;
  double startTimeS_;
  std::unique_ptr<StateCache> stateCache_;
};

}  // namespace allot
