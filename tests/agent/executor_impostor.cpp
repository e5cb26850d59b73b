// A task that tries to pass for an executor (tests/agent/trust_root_test):
//   executor_impostor register FRAMEWORK_ID EXECUTOR_ID [SECRET]
//       connects to $ALLOT_AGENT_ENDPOINT, registers with those ids and prints
//       REGISTERED, REFUSED: <message> or CLOSED: <reason>
//   executor_impostor hold N SECONDS
//       opens N connections that never register and keeps them SECONDS,
//       printing how many the agent closed at once
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "proto/connection.h"

using namespace allot;

namespace {

std::shared_ptr<Connection> connectToAgent(asio::io_context& io) {
  const char* endpoint = std::getenv("ALLOT_AGENT_ENDPOINT");
  if (!endpoint || std::string(endpoint).rfind("unix:", 0) != 0) return nullptr;
  asio::local::stream_protocol::socket socket(io);
  boost::system::error_code ec;
  socket.connect(asio::local::stream_protocol::endpoint(std::string(endpoint).substr(5)), ec);
  if (ec) return nullptr;
  Connection::Options o;
  o.localRole = wire::ROLE_EXECUTOR;
  o.localName = "impostor";
  o.acceptRoles = {wire::ROLE_AGENT};
  return Connection::create(StreamSocket(std::move(socket)), o);
}

int registerAs(const std::string& frameworkId, const std::string& executorId, const std::string& secret) {
  asio::io_context io;
  auto conn = connectToAgent(io);
  if (!conn) {
    std::printf("CLOSED: cannot connect\n");
    return 1;
  }
  std::string outcome;
  Connection::Handlers h;
  h.onHello = [&](const wire::Hello&) {
    wire::Envelope e;
    e.mutable_register_executor()->set_framework_id(frameworkId);
    e.mutable_register_executor()->set_executor_id(executorId);
    e.mutable_register_executor()->set_executor_secret(secret);
    (void)conn->send(e);
  };
  h.onMessage = [&](wire::Envelope& e) {
    if (e.has_executor_registered()) outcome = "REGISTERED";
    if (e.has_error()) outcome = "REFUSED: " + e.error().message();
    if (!outcome.empty()) io.stop();
  };
  h.onClose = [&](const std::string& reason) {
    if (outcome.empty()) outcome = "CLOSED: " + reason;
    io.stop();
  };
  conn->start(std::move(h));
  io.run_for(std::chrono::seconds(10));
  std::printf("%s\n", outcome.empty() ? "CLOSED: no answer" : outcome.c_str());
  return 0;
}

int hold(int count, int seconds) {
  asio::io_context io;
  std::vector<std::shared_ptr<Connection>> conns;
  int closed = 0;
  for (int i = 0; i < count; ++i) {
    auto conn = connectToAgent(io);
    if (!conn) {
      ++closed;
      continue;
    }
    Connection::Handlers h;
    h.onMessage = [](wire::Envelope&) {};
    h.onClose = [&](const std::string&) { ++closed; };
    conn->start(std::move(h));
    conns.push_back(conn);
  }
  io.run_for(std::chrono::seconds(1));
  std::printf("HELD %d of %d\n", count - closed, count);
  std::fflush(stdout);
  io.run_for(std::chrono::seconds(seconds));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() >= 3 && args[0] == "register") return registerAs(args[1], args[2], args.size() > 3 ? args[3] : "");
  if (args.size() == 3 && args[0] == "hold") return hold(std::atoi(args[1].c_str()), std::atoi(args[2].c_str()));
  std::fprintf(stderr, "usage: executor_impostor register FID EID [SECRET] | hold N SECONDS\n");
  return 2;
}
