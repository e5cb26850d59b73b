// probe_framework: the paper's probe (section 6.5). Registers, waits for an
// offer, runs one task of --task-seconds on it and prints the overhead:
// time from start to the task's FINISHED minus the task's own duration,
// with when it was registered and first offered something.
// With --tls-* the link is mutual TLS, and the overhead includes the
// handshake (the probe starts its clock before connecting).
#include <cstdio>
#include <iostream>

#include "base/asio.h"
#include "proto/task_state.h"
#include "base/flags.h"
#include "base/log.h"
#include "proto/resources.h"
#include "proto/tls.h"
#include "sdk/scheduler.h"

namespace {

using namespace allot;
using Steady = std::chrono::steady_clock;

class Probe final : public Scheduler {
 public:
  Probe(asio::io_context& io, Resources task, double seconds)
      : io_(io), task_(std::move(task)), seconds_(seconds), start_(Steady::now()) {}

  void registered(SchedulerDriver&, const std::string&, const std::string&) override {
    registeredAt_ = Steady::now();
  }

  void resourceOffers(SchedulerDriver& d, const std::vector<wire::Offer>& offers) override {
    if (firstOfferAt_ == Steady::time_point{}) firstOfferAt_ = Steady::now();
    for (const auto& o : offers) {
      auto have = Resources::fromWire(o.resources());
      if (launched_ || !have || !have->contains(task_)) {
        (void)d.declineOffer(o.offer_id());
        continue;
      }
      launched_ = true;
      offerAt_ = Steady::now();
      wire::TaskInfo t;
      t.set_task_id("probe");
      t.mutable_command()->set_shell("emulated");
      task_.toWire(t.mutable_resources());
      t.set_data(std::to_string(seconds_));
      (void)d.acceptOffer({o.offer_id()}, {t});
      (void)d.setNeedsOffers(false);
    }
  }

  void statusUpdate(SchedulerDriver& d, const wire::TaskStatus& s) override {
    (void)d.acknowledge(s);
    if (s.state() == wire::TASK_RUNNING) runningAt_ = Steady::now();
    if (isTerminal(s.state())) {
      auto ms = [](Steady::duration d) { return std::chrono::duration<double, std::milli>(d).count(); };
      double total = ms(Steady::now() - start_);
      std::printf("probe: state=%s overhead_ms=%.1f wait_for_offer_ms=%.1f offer_to_running_ms=%.1f registered_ms=%.1f first_offer_ms=%.1f\n",
                  wire::TaskState_Name(s.state()).c_str(), total - seconds_ * 1000,
                  ms(offerAt_ - start_), ms(runningAt_ - offerAt_), ms(registeredAt_ - start_), ms(firstOfferAt_ - start_));
      std::fflush(stdout);
      ok_ = s.state() == wire::TASK_FINISHED;
      d.stop(false);
      asio::post(io_, [this] { io_.stop(); });
    }
  }

  bool ok() const { return ok_; }

 private:
  asio::io_context& io_;
  Resources task_;
  double seconds_;
  Steady::time_point start_, offerAt_, runningAt_, registeredAt_, firstOfferAt_;
  bool launched_ = false;
  bool ok_ = false;
};

}  // namespace

int main(int argc, char** argv) {
  setLogProgram("probe_framework");
  std::string master = "127.0.0.1:5050", resources = "cpus:1;mem:1024";
  double seconds = 10, timeoutS = 120;
  Flags flags("probe_framework", "Runs one task and reports the scheduling overhead.");
  flags.addString("master", &master, "HOST:PORT of the master");
  flags.addString("task-resources", &resources, "resources of the probe task");
  flags.addDouble("task-seconds", &seconds, "duration of the probe task");
  flags.addDouble("timeout", &timeoutS, "give up after this many seconds");
  TlsFiles tls;
  addTlsFlags(flags, &tls);  // a `framework` certificate (scripts/allot-certs)
  if (int rc = handleFlags(flags, argc, argv); rc >= 0) return rc;
  auto task = Resources::parse(resources);
  if (!task) {
    std::cerr << "probe_framework: --task-resources: " << task.error().describe() << "\n";
    return 2;
  }
  asio::io_context io(1);
  Probe probe(io, *task, seconds);
  wire::FrameworkInfo info;
  info.set_name("probe");
  SchedulerDriver driver(io, probe, info, SchedulerOptions{.master = master, .tls = tls});
  if (auto st = driver.start(); !st) {
    std::cerr << "probe_framework: " << st.error().describe() << "\n";
    return 2;
  }
  asio::steady_timer timeout(io, secondsToDuration(timeoutS));
  timeout.async_wait([&](const boost::system::error_code& ec) {
    if (ec) return;
    std::fprintf(stderr, "probe_framework: no result within %.0f s\n", timeoutS);
    io.stop();
  });
  io.run();
  return probe.ok() ? 0 : 1;
}
