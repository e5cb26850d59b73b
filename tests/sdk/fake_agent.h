// FakeAgent: a protocol-level agent for master tests. It registers with the
// given resources, heartbeats, and "runs" every task it receives by
// answering RUNNING at once; it never forks.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "proto/connection.h"
#include "proto/resources.h"

namespace allot::testing {

class FakeAgent {
 public:
  FakeAgent(asio::io_context& io, uint16_t port, std::string resources)
      : io_(io), port_(port), resources_(std::move(resources)), heartbeat_(io) {}
  ~FakeAgent() { disconnect(); }

  void connect() {
    asyncConnect(io_, "127.0.0.1", port_, [this](Result<asio::ip::tcp::socket> s) {
      if (!s) return;
      Connection::Options o;
      o.localRole = wire::ROLE_AGENT;
      o.localName = "fake-agent";
      conn_ = Connection::create(std::move(*s), o);
      Connection::Handlers h;
      h.onHello = [this](const wire::Hello&) {
        wire::Envelope e;
        auto* info = e.mutable_register_agent()->mutable_info();
        info->set_hostname("fake");
        info->set_id(agentId);
        Resources::parse(resources_)->toWire(info->mutable_resources());
        (void)conn_->send(e);
      };
      h.onMessage = [this](wire::Envelope& e) { onMessage(e); };
      conn_->start(std::move(h));
    });
  }

  // Stops heartbeating but keeps the connection: the master must notice.
  void goSilent() { silent_ = true; }
  void disconnect() {
    heartbeat_.cancel();
    if (conn_) conn_->close("test");
  }

  void finishTask(const std::string& frameworkId, const std::string& taskId) {
    wire::Envelope e;
    auto* s = e.mutable_status_update()->mutable_status();
    s->set_framework_id(frameworkId);
    s->set_task_id(taskId);
    s->set_state(wire::TASK_FINISHED);
    s->set_update_id(taskId + "-finished");
    (void)conn_->send(e);
    running.erase(taskId);
  }

  std::string agentId;
  std::map<std::string, wire::TaskInfo> running;  // task id -> task
  std::map<std::string, std::string> frameworkOf;  // task id -> framework id
  int acknowledgements = 0;
  int launches = 0;

 private:
  void onMessage(const wire::Envelope& e) {
    if (e.has_agent_registered()) {
      agentId = e.agent_registered().agent_id();
      interval_ = e.agent_registered().heartbeat_interval_s();
      beat();
    } else if (e.has_run_task()) {
      const auto& t = e.run_task().task();
      running[t.task_id()] = t;
      frameworkOf[t.task_id()] = e.run_task().framework().id();
      ++launches;
      wire::Envelope u;
      auto* s = u.mutable_status_update()->mutable_status();
      s->set_framework_id(e.run_task().framework().id());
      s->set_task_id(t.task_id());
      s->set_state(wire::TASK_RUNNING);
      s->set_update_id(t.task_id() + "-running");
      (void)conn_->send(u);
    } else if (e.has_status_acknowledgement()) {
      ++acknowledgements;
    }
  }

  void beat() {
    heartbeat_.expires_after(std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::duration<double>(interval_)));
    heartbeat_.async_wait([this](const boost::system::error_code& ec) {
      if (ec) return;
      if (!silent_ && conn_ && conn_->open()) {
        wire::Envelope e;
        e.mutable_heartbeat()->set_sequence(++sequence_);
        (void)conn_->send(e);
      }
      beat();
    });
  }

  asio::io_context& io_;
  uint16_t port_;
  std::string resources_;
  asio::steady_timer heartbeat_;
  std::shared_ptr<Connection> conn_;
  double interval_ = 1;
  uint64_t sequence_ = 0;
  bool silent_ = false;
};

}  // namespace allot::testing
