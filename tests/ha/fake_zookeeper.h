// FakeZooKeeper: an in-memory ZooKeeper (one tree, many sessions) behind
// the ZkSession seam (ha/zk_session.h), for unit tests of the contender and
// the detector. It keeps the rules the real one has and the election code
// relies on: ephemeral znodes die with their session, sequence numbers grow
// per parent, czxids grow globally, watches fire once, a disconnected
// session gets CONNECTING and its watch events after it reconnects, an
// expired one gets EXPIRED. The test drives the faults: disconnect,
// reconnect, expire, delete a znode, lose a create's reply, and hold a
// session's deliveries to release them in reverse order.
//
// Every answer and event is posted to the io_context, never run inline.
#pragma once

#include <algorithm>
#include <cstdio>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "ha/zk_session.h"

namespace allot::testing {

class FakeZooKeeper {
 public:
  explicit FakeZooKeeper(asio::io_context& io) : io_(io) {}

  ZkSessionFactory factory() {
    return [this] { return std::unique_ptr<ZkSession>(new Session(*this)); };
  }

  // Faults, by session id (1, 2, ... in creation order).
  void disconnect(int64_t id) {
    if (auto* s = find(id); s && s->connected_) {
      s->connected_ = false;
      s->deliver(sessionEvent(ZkState::kConnecting));
    }
  }
  void reconnect(int64_t id) {
    auto* s = find(id);
    if (!s || s->connected_ || s->expired_) return;
    s->connected_ = true;
    s->deliver(sessionEvent(ZkState::kConnected));
    for (auto& e : s->missed_) s->deliver(e);
    s->missed_.clear();
  }
  void expire(int64_t id) {
    auto* s = find(id);
    if (!s || s->expired_) return;
    s->expired_ = true;
    s->connected_ = false;
    dropEphemerals(id);
    s->deliver(sessionEvent(ZkState::kExpired));
  }
  // Replaces a znode's data as another client would (version + 1; a data
  // watch fires). No-op when absent.
  void setData(const std::string& path, const std::string& data) {
    auto it = nodes_.find(path);
    if (it == nodes_.end()) return;
    it->second.data = data;
    ++it->second.version;
    fire(dataWatches_, path, ZkEvent::Kind::kDataChanged);
  }
  std::string data(const std::string& path) const {
    auto it = nodes_.find(path);
    return it == nodes_.end() ? "" : it->second.data;
  }
  void removeNode(const std::string& path) {
    if (nodes_.erase(path)) fireDeleted(path);
  }
  // The next create by session `id` is applied but its reply is lost: the
  // session disconnects and the caller sees kConnectionLoss.
  void loseNextCreateReply(int64_t id) { loseCreateReply_.insert(id); }
  // Holds every answer and event of session `id` until release().
  void hold(int64_t id) { if (auto* s = find(id)) s->holding_ = true; }
  void releaseReversed(int64_t id) {
    auto* s = find(id);
    if (!s) return;
    s->holding_ = false;
    auto held = std::move(s->held_);
    std::reverse(held.begin(), held.end());
    for (auto& fn : held) s->post(std::move(fn));
  }

  // Delivers the oldest held answer or event of session `id` (it stays
  // holding): steps through a session's calls one round trip at a time.
  // False when nothing is held.
  bool releaseNext(int64_t id) {
    auto* s = find(id);
    if (!s || s->held_.empty()) return false;
    auto fn = std::move(s->held_.front());
    s->held_.erase(s->held_.begin());
    asio::post(io_, [alive = s->alive_, fn = std::move(fn)] { if (*alive) fn(); });
    return true;
  }
  size_t heldCount(int64_t id) {
    auto* s = find(id);
    return s ? s->held_.size() : 0;
  }

  // Inspection.
  bool exists(const std::string& path) const { return nodes_.count(path) > 0; }
  std::vector<std::string> children(const std::string& path) const {
    std::vector<std::string> out;
    for (const auto& [p, node] : nodes_) {
      if (p.size() > path.size() && p.compare(0, path.size(), path) == 0 && p[path.size()] == '/' &&
          p.find('/', path.size() + 1) == std::string::npos)
        out.push_back(p.substr(path.size() + 1));
    }
    return out;
  }
  // Sessions holding an exists watch on `path`.
  std::set<int64_t> dataWatchers(const std::string& path) const {
    auto it = dataWatches_.find(path);
    return it == dataWatches_.end() ? std::set<int64_t>{} : it->second;
  }
  int64_t sessionsCreated() const { return nextSession_ - 1; }

 private:
  struct Node {
    std::string data;
    int64_t czxid = 0;
    int64_t owner = 0;
    int64_t nextSequence = 0;
    int32_t version = 0;
  };

  class Session final : public ZkSession {
   public:
    explicit Session(FakeZooKeeper& zk) : zk_(zk), id_(zk.nextSession_++) { zk_.sessions_[id_] = this; }
    ~Session() override {
      *alive_ = false;
      zk_.sessions_.erase(id_);
      if (!expired_) zk_.dropEphemerals(id_);
    }
    void start(EventFn onEvent) override {
      onEvent_ = std::move(onEvent);
      connected_ = true;
      deliver(sessionEvent(ZkState::kConnected));
    }
    void create(const std::string& path, const std::string& data, bool ephemeralSequential,
                CreateFn done) override {
      if (!connected_) return answer([done] { done(ZkRc::kConnectionLoss, "", ZkStat{}); });
      auto [rc, created, stat] = zk_.doCreate(id_, path, data, ephemeralSequential);
      if (rc == ZkRc::kOk && zk_.loseCreateReply_.erase(id_)) {
        answer([done] { done(ZkRc::kConnectionLoss, "", ZkStat{}); });
        zk_.disconnect(id_);
        return;
      }
      answer([done, rc, created, stat] { done(rc, created, stat); });
    }
    void children(const std::string& path, bool watch, ChildrenFn done) override {
      if (!connected_) return answer([done] { done(ZkRc::kConnectionLoss, {}); });
      if (!zk_.nodes_.count(path)) return answer([done] { done(ZkRc::kNoNode, {}); });
      if (watch) zk_.childWatches_[path].insert(id_);
      answer([done, names = zk_.children(path)] { done(ZkRc::kOk, names); });
    }
    void exists(const std::string& path, bool watch, StatFn done) override {
      if (!connected_) return answer([done] { done(ZkRc::kConnectionLoss, ZkStat{}); });
      if (watch) zk_.dataWatches_[path].insert(id_);
      auto it = zk_.nodes_.find(path);
      if (it == zk_.nodes_.end()) return answer([done] { done(ZkRc::kNoNode, ZkStat{}); });
      ZkStat stat{it->second.czxid, it->second.owner, it->second.version};
      answer([done, stat] { done(ZkRc::kOk, stat); });
    }
    void get(const std::string& path, DataFn done) override {
      if (!connected_) return answer([done] { done(ZkRc::kConnectionLoss, "", ZkStat{}); });
      auto it = zk_.nodes_.find(path);
      if (it == zk_.nodes_.end()) return answer([done] { done(ZkRc::kNoNode, "", ZkStat{}); });
      ZkStat stat{it->second.czxid, it->second.owner, it->second.version};
      answer([done, data = it->second.data, stat] { done(ZkRc::kOk, data, stat); });
    }
    void set(const std::string& path, const std::string& data, int32_t version,
             StatFn done) override {
      if (!connected_) return answer([done] { done(ZkRc::kConnectionLoss, ZkStat{}); });
      auto it = zk_.nodes_.find(path);
      if (it == zk_.nodes_.end()) return answer([done] { done(ZkRc::kNoNode, ZkStat{}); });
      if (version != -1 && version != it->second.version) {
        return answer([done] { done(ZkRc::kBadVersion, ZkStat{}); });
      }
      zk_.setData(path, data);
      ZkStat stat{it->second.czxid, it->second.owner, it->second.version};
      answer([done, stat] { done(ZkRc::kOk, stat); });
    }
    void remove(const std::string& path, DoneFn done) override {
      if (!connected_) return answer([done] { done(ZkRc::kConnectionLoss); });
      bool had = zk_.nodes_.count(path) > 0;
      zk_.removeNode(path);
      answer([done, had] { done(had ? ZkRc::kOk : ZkRc::kNoNode); });
    }
    void restrict(const std::string& path, DoneFn done) override {
      if (!connected_) return answer([done] { done(ZkRc::kConnectionLoss); });
      bool had = zk_.nodes_.count(path) > 0;
      answer([done, had] { done(had ? ZkRc::kOk : ZkRc::kNoNode); });
    }
    std::string describe() const override { return "fake session " + std::to_string(id_); }

    void answer(std::function<void()> fn) { post(std::move(fn)); }
    void deliver(const ZkEvent& event) {
      post([this, event] { if (onEvent_) onEvent_(event); });
    }
    void post(std::function<void()> fn) {
      if (holding_) return held_.push_back(std::move(fn));
      asio::post(zk_.io_, [alive = alive_, fn = std::move(fn)] { if (*alive) fn(); });
    }

    FakeZooKeeper& zk_;
    int64_t id_;
    EventFn onEvent_;
    bool connected_ = false;
    bool expired_ = false;
    bool holding_ = false;
    std::vector<std::function<void()>> held_;
    std::vector<ZkEvent> missed_;
    std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  };

  static ZkEvent sessionEvent(ZkState state) {
    ZkEvent e;
    e.kind = ZkEvent::Kind::kSession;
    e.state = state;
    e.negotiatedTimeout = std::chrono::milliseconds(900);
    return e;
  }

  Session* find(int64_t id) {
    auto it = sessions_.find(id);
    return it == sessions_.end() ? nullptr : it->second;
  }

  std::tuple<ZkRc, std::string, ZkStat> doCreate(int64_t session, const std::string& path,
                                                 const std::string& data, bool ephSeq) {
    std::string parent = path.substr(0, path.rfind('/'));
    if (!parent.empty() && !nodes_.count(parent)) return {ZkRc::kNoNode, "", {}};
    std::string created = path;
    if (ephSeq) {
      char digits[16];
      std::snprintf(digits, sizeof digits, "%010lld",
                    static_cast<long long>(nodes_[parent].nextSequence++));
      created += digits;
    }
    if (nodes_.count(created)) return {ZkRc::kNodeExists, "", {}};
    Node node{data, ++zxid_, ephSeq ? session : 0, 0, 0};
    nodes_[created] = node;
    fire(dataWatches_, created, ZkEvent::Kind::kCreated);
    fire(childWatches_, parent.empty() ? "/" : parent, ZkEvent::Kind::kChildrenChanged);
    return {ZkRc::kOk, created, ZkStat{node.czxid, node.owner}};
  }

  void dropEphemerals(int64_t session) {
    std::vector<std::string> doomed;
    for (const auto& [path, node] : nodes_) {
      if (node.owner == session) doomed.push_back(path);
    }
    for (const auto& path : doomed) removeNode(path);
  }

  void fireDeleted(const std::string& path) {
    fire(dataWatches_, path, ZkEvent::Kind::kDeleted);
    fire(childWatches_, path.substr(0, path.rfind('/')), ZkEvent::Kind::kChildrenChanged);
  }

  void fire(std::map<std::string, std::set<int64_t>>& watches, const std::string& path,
            ZkEvent::Kind kind) {
    auto it = watches.find(path);
    if (it == watches.end()) return;
    std::set<int64_t> ids = std::move(it->second);
    watches.erase(it);
    ZkEvent e;
    e.kind = kind;
    e.path = path;
    for (int64_t id : ids) {
      Session* s = find(id);
      if (!s || s->expired_) continue;
      if (s->connected_) s->deliver(e);
      else s->missed_.push_back(e);
    }
  }

  asio::io_context& io_;
  std::map<std::string, Node> nodes_;
  std::map<std::string, std::set<int64_t>> dataWatches_;
  std::map<std::string, std::set<int64_t>> childWatches_;
  std::map<int64_t, Session*> sessions_;
  std::set<int64_t> loseCreateReply_;
  int64_t nextSession_ = 1;
  int64_t zxid_ = 100;
};

}  // namespace allot::testing
