// The launch of ExecutorManager's containers. What may block (the user
// database through NSS, the sandbox directory and its files on a journaling
// file system) runs on the sandbox thread; the launch goes on on the loop
// from the posted result: the isolators' prepare(), the launcher's start(),
// isolate() and watch(). A container that was killed (or whose framework
// was removed, or whose tasks were all killed) while its files were made
// never starts a process: its finalize is already on its way. Nor does one
// killed while its clone is under way lose its process: onStarted kills it.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "agent/checkpoint.h"
#include "agent/executor_manager.h"
#include "agent/gc.h"
#include "agent/image_user.h"
#include "agent/run_as.h"
#include "base/log.h"
#include "base/unique_fd.h"

namespace allot {

// What the sandbox thread hands back to the loop.
struct ExecutorManager::Prepared {
  Status status;
  wire::Reason reason = wire::REASON_EXEC_FAILED;  // when !status
  std::optional<RunAsUser> user;                  // none: the agent's own user
};

std::string secondsText(Duration d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g s", std::chrono::duration<double>(d).count());
  return buf;
}

namespace {

// Everything the sandbox thread needs, copied off the container.
struct LaunchFiles {
  std::string sandbox;
  std::string executorUser;
  std::string frameworkUser;
  std::string defaultUser;  // empty: no user switch
  bool rootAllowed = false;
  std::string imageUser;                // the image's User, if any
  std::vector<std::string> layerRoots;  // the image's layers, top-most first
};

// A user the executor or framework names comes first, then the image's
// User (from the image's own files), then --default-user. Root, unless it
// is the operator's --default-user, needs the master's ACLs.
Result<RunAsUser> runAsUser(const LaunchFiles& f) {
  std::string name = runAsName(f.executorUser, "", f.frameworkUser, "");
  bool fromImage = name.empty() && !f.imageUser.empty();
  Result<RunAsUser> user = fromImage ? resolveImageUser(f.imageUser, f.layerRoots)
                                     : resolveUser(name.empty() ? f.defaultUser : name);
  if (!user) return Error{user.error().describe()};
  if (user->isRoot() && !name.empty() && name != f.defaultUser && !f.rootAllowed) {
    return Error{"run-as user '" + name + "' is root, which the master's ACLs did not allow", EACCES};
  }
  if (user->isRoot() && fromImage && !f.rootAllowed) {
    return Error{"the image's user '" + f.imageUser + "' is root, which the master's ACLs did not allow", EACCES};
  }
  return user;
}

// The sandbox and its stdout/stderr belong to the run-as user and are not
// readable by other users (0750 / 0640; the files are made here so the
// child's root-side open() does not create them as root).
Status makeSandbox(const std::string& dir, const std::optional<RunAsUser>& user) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Error{"cannot create sandbox " + dir + ": " + ec.message()};
  if (::chmod(dir.c_str(), 0750) != 0) return Error::fromErrno("chmod 0750 " + dir);
  if (!user) return okStatus();
  if (::chown(dir.c_str(), user->uid, user->gid) != 0) {
    return Error::fromErrno("chown " + dir + " to " + user->name);
  }
  for (const char* name : {"/stdout", "/stderr"}) {
    std::string path = dir + name;
    UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0640));
    if (fd.get() < 0) return Error::fromErrno("create " + path);
    if (::fchown(fd.get(), user->uid, user->gid) != 0) return Error::fromErrno("chown " + path);
  }
  return okStatus();
}

}  // namespace

// A new container for `executor` with its first task; it starts preparing.
void ExecutorManager::startExecutor(const wire::FrameworkInfo& framework, const wire::ExecutorInfo& executor,
                                    wire::TaskInfo task, bool rootAllowed) {
  Container& fresh = create(framework, executor);
  fresh.rootAllowed = rootAllowed;
  fresh.addTask(std::move(task));
  launch(fresh);
}

// preparing: the run-as user and the sandbox are made on the sandbox
// thread; onPrepared goes on from there, on the loop.
void ExecutorManager::launch(Container& c) {
  if (!c.executor.container().image().empty() && !c.image) return pullImage(c);
  LaunchFiles files{c.sandbox, c.executor.command().user(), c.framework.user(), options_.defaultUser,
                    c.rootAllowed};
  if (c.image) {
    files.imageUser = c.image->user;
    for (auto it = c.image->layers.rbegin(); it != c.image->layers.rend(); ++it)
      files.layerRoots.push_back(c.image->layersDir + "/" + *it + "/rootfs");
  }
  std::function<Prepared()> work = [files] {
    Prepared p;
    if (!files.defaultUser.empty()) {
      auto user = runAsUser(files);
      if (!user) {
        bool refused = user.error().errnum == EACCES;
        return Prepared{Error{user.error().message}, refused ? wire::REASON_NOT_AUTHORIZED : wire::REASON_EXEC_FAILED};
      }
      p.user = std::move(*user);
    }
    p.status = makeSandbox(files.sandbox, p.user);
    return p;
  };
  std::weak_ptr<int> alive = alive_;
  Status queued = sandboxPool_.submit<Prepared>(work, [this, alive, name = c.name, gen = c.generation](Prepared p) {
    if (alive.expired()) return;
    auto timer = timed(AgentSection::kLaunch);
    if (Container* c = byName(name, gen)) onPrepared(*c, std::move(p));
  });
  if (!queued) {
    failContainer(c, wire::TASK_FAILED, wire::REASON_EXEC_FAILED,
                  "sandbox " + c.sandbox + " not made: " + queued.error().describe());
  }
}

// preparing: the image is pulled off the loop (ImagePuller: pulls of one
// image, and of one layer, are done once); its tasks say so meanwhile.
void ExecutorManager::pullImage(Container& c) {
  const std::string& image = c.executor.container().image();
  for (const auto& [taskId, t] : c.tasks()) {
    emit(&c, agentStatus(c.framework.id(), c.executor.executor_id(), taskId, wire::TASK_STARTING, wire::REASON_NONE,
                         "pulling " + image));
  }
  std::weak_ptr<int> alive = alive_;
  options_.pullImage(image, [this, alive, name = c.name, gen = c.generation](Result<ContainerImage> pulled) {
    if (alive.expired()) return;
    auto timer = timed(AgentSection::kLaunch);
    if (Container* c = byName(name, gen)) onPulled(*c, std::move(pulled));
  });
}

// A kill meanwhile already ends the container (nothing was made); a
// failed pull ends it with the puller's reason, a task without a command
// in an image without one with REASON_EXEC_FAILED.
void ExecutorManager::onPulled(Container& c, Result<ContainerImage> image) {
  if (c.life().state() != ContainerState::kPreparing || c.life().killRequested()) return;
  const std::string& reference = c.executor.container().image();
  if (!image) {
    LOG_WARNING("container " << c.name << ": pulling " << reference << ": " << image.error().describe());
    return failContainer(c, wire::TASK_FAILED, wire::REASON_IMAGE_PULL_FAILED,
                         "pulling image " + reference + ": " + image.error().describe());
  }
  if (isBuiltinExecutor(c.executor)) {
    for (const auto& [taskId, t] : c.tasks()) {
      if (Result<wire::TaskInfo> run = withImageConfig(t.info, *image); !run) {
        return failContainer(c, wire::TASK_FAILED, wire::REASON_EXEC_FAILED, "image " + reference + ": " +
                                                                                 run.error().describe());
      }
    }
  }
  c.image = std::move(*image);
  launch(c);
}

void ExecutorManager::onPrepared(Container& c, Prepared prepared) {
  // Killed, or its framework removed, while its files were made: the
  // kill's finalize is on its way and ends the tasks; nothing starts.
  if (c.life().state() != ContainerState::kPreparing || c.life().killRequested()) return;
  if (!prepared.status) {
    return failContainer(c, wire::TASK_FAILED, prepared.reason, prepared.status.error().describe());
  }
  c.user = std::move(prepared.user);
  readyToStart_.emplace_back(c.name, c.generation);
  postStarts();
}

// The executors whose sandboxes are ready start a few at a time: a burst of
// launches (100 RunTasks in one message batch, their sandboxes made
// meanwhile) started in one pass kept the loop from its timers and sockets
// for ~110 ms (100 x prepare + clone + isolate). Each pass starts executors
// for at most kStartSliceBudget (at least one), then the loop polls its
// sockets and timers before the next pass.
void ExecutorManager::postStarts() {
  if (startsPosted_ || readyToStart_.empty()) return;
  startsPosted_ = true;
  std::weak_ptr<int> alive = alive_;
  asio::post(io_, [this, alive] {
    if (alive.expired()) return;
    startsPosted_ = false;
    startReady();
    postStarts();
  });
}

void ExecutorManager::startReady() {
  auto until = std::chrono::steady_clock::now() + kStartSliceBudget;
  while (!readyToStart_.empty()) {
    auto [name, generation] = readyToStart_.front();
    readyToStart_.pop_front();
    Container* c = byName(name, generation);
    // Killed (or its framework removed) while it waited: its finalize is
    // on its way.
    if (!c || c->life().state() != ContainerState::kPreparing || c->life().killRequested()) continue;
    auto timer = timed(AgentSection::kLaunch);
    if (c->tasks().empty()) {
      endContainer(*c, "its tasks were killed before it started");
      continue;
    }
    startProcess(*c);
    if (std::chrono::steady_clock::now() >= until) return;
  }
}

LaunchSpec ExecutorManager::launchSpec(const Container& c) const {
  return executorLaunchSpec(c, ExecutorSite{.executorPath = options_.executorPath,
                                            .socketPath = socketPath(),
                                            .agentId = agentId_,
                                            .workDir = options_.workDir,
                                            .recoveryTimeout = options_.recoveryTimeout,
                                            .taskLogMaxBytes = options_.taskLogMaxBytes,
                                            .taskLogFiles = options_.taskLogFiles});
}

// preparing: prepare(), then the launcher's clone off the loop (onStarted
// goes on); a failed prepare() ends the container with its reason.
void ExecutorManager::startProcess(Container& c) {
  LaunchSpec spec = launchSpec(c);
  ContainerConfig config(c.limits(), c.sandbox);
  if (c.image) {
    config.imageLayers = c.image->layers;
    config.workingDir = c.image->workingDir;
    config.rootForTasksOnly = isBuiltinExecutor(c.executor);
    for (const wire::Volume& v : c.executor.container().volumes())
      config.volumes.push_back({v.source(), v.container_path(), v.read_only()});
  }
  for (size_t i = 0; i < isolators_.size(); ++i) {
    Status st;
    {
      auto timer = timed(IsolatorCall::kPrepare, i);
      st = isolators_[i]->prepare(c.id, config, &spec.setup);
    }
    if (!st) {
      return failContainer(c, wire::TASK_FAILED, wire::REASON_ISOLATION_FAILED,
                           std::string(isolators_[i]->name()) + ": " + st.error().describe());
    }
  }
  spec.env.insert(spec.env.end(), spec.setup.env.begin(), spec.setup.env.end());
  if (c.image && isBuiltinExecutor(c.executor)) moveSeccompToTasks(spec);
  std::weak_ptr<int> alive = alive_;
  // startOffLoop(): the clone runs on the launcher's thread (a fork-like
  // clone3 copies the agent's page tables, takes cgroup_mutex and the
  // tasklist lock: up to 6 ms on the loop under the hog's CPU hog); the
  // loop does not wait for the child's setup and exec either (v1 cgroup
  // joins wait for RCU grace periods); a failed step comes back as the
  // exit's setupError (onExit).
  auto onExited = [this, alive, name = c.name, gen = c.generation](const ExitInfo& e) {
    if (alive.expired()) return;
    auto timer = timed(AgentSection::kExecutorExit);
    onExit(name, gen, e);
  };
  auto onCloned = [this, alive, name = c.name, gen = c.generation, executable = spec.argv[0],
                   &launcher = launcher_](Result<pid_t> pid) {
    // The manager or its container went while the clone was under way:
    // nothing would supervise the process.
    Container* c = alive.expired() ? nullptr : byName(name, gen);
    if (!alive.expired()) --startsUnderWay_;
    if (!c) {
      if (pid) (void)launcher.signal(*pid, SIGKILL);
      if (!alive.expired()) listener_.startFinished();
      return;
    }
    auto timer = timed(AgentSection::kLaunch);
    onStarted(*c, executable, std::move(pid));
    // The new executor may have connected before its pid came back.
    listener_.startFinished();
  };
  // startReady starts only a container still preparing.
  c.take(ContainerEvent::kCloning);
  ++startsUnderWay_;
  auto timer = timed(AgentSection::kLauncherStart);
  launcher_.startOffLoop(spec, onExited, onCloned);
}

// The launcher's answer, on the loop: starting -> isolating -> registering,
// or the container fails with REASON_EXEC_FAILED. Only this answer moves a
// container out of starting (a kill meanwhile waits for it: kAwaitStart),
// so the events below are taken. A kill that came while the clone was
// under way kills the new process now (its exit finalizes the container),
// or, with no process, the failure's finalize ends it.
void ExecutorManager::onStarted(Container& c, const std::string& executable, Result<pid_t> pid) {
  if (!pid) {
    std::string why = "executor " + executable + " could not start: " + pid.error().describe();
    LOG_ERROR("container " << c.name << ": " << why);
    c.recordFailure(wire::TASK_FAILED, wire::REASON_EXEC_FAILED, why);
    return postFinalize(c);
  }
  c.pid = *pid;
  c.take(ContainerEvent::kLaunched);
  if (auto start = launcher_.startTimeOf(c.pid)) c.startTime = *start;
  LOG_INFO("started executor " << c.executor.executor_id() << " of framework " << c.framework.id()
                               << " (pid " << c.pid << ") in " << c.sandbox);
  if (c.life().killRequested()) {
    endContainer(c, "killed while its executor was starting");
    return;
  }
  if (!isolate(c)) return;
  c.take(ContainerEvent::kIsolated);  // isolating since kLaunched above
  armTimer(c, Container::Timer::kRegister, options_.registerTimeout, [this](Container& c) {
    if (c.life().state() != ContainerState::kRegistering) return;
    failContainer(c, wire::TASK_FAILED, wire::REASON_EXECUTOR_EXITED,
                  "executor did not register within " + secondsText(options_.registerTimeout));
  });
  checkpoint(c);
}

bool ExecutorManager::isolate(Container& c) {
  for (size_t i = 0; i < isolators_.size(); ++i) {
    Status st;
    {
      auto timer = timed(IsolatorCall::kIsolate, i);
      st = isolators_[i]->isolate(c.id, c.pid);
      if (st) st = isolators_[i]->watch(c.id, limitWatcher(c));
    }
    if (!st) {
      failContainer(c, wire::TASK_FAILED, wire::REASON_ISOLATION_FAILED,
                    std::string(isolators_[i]->name()) + ": " + st.error().describe());
      return false;
    }
  }
  return true;
}

// A limit an isolator reports ends the container, with that limit as the
// reason (container.h's precedence).
std::function<void(const Limitation&)> ExecutorManager::limitWatcher(const Container& c) {
  std::weak_ptr<int> alive = alive_;
  return [this, alive, name = c.name, gen = c.generation](const Limitation& l) {
    if (alive.expired()) return;
    if (Container* c = byName(name, gen)) {
      c->recordLimitation(l);
      endContainer(*c, l.message);
    }
  };
}

// The list of sandboxes in use is taken now; the pass runs after every
// sandbox made before it, and any made later are not there yet when it
// runs (the sandbox thread is one thread).
void ExecutorManager::collectSandboxes(std::chrono::seconds maxAge) {
  auto inUse = std::make_shared<std::set<std::string>>();
  for (const auto& [name, c] : containers_) inUse->insert(c->sandbox);
  std::function<GcResult()> work = [dir = options_.workDir + "/sandboxes", maxAge, inUse] {
    return allot::collectSandboxes(dir, maxAge, [&](const std::string& p) { return inUse->count(p) > 0; });
  };
  Status queued = sandboxPool_.submit<GcResult>(work, [](GcResult r) {
    if (r.removed) LOG_INFO("removed " << r.removed << " old sandboxes");
    if (!r.errors.empty()) LOG_WARNING("sandbox gc: " << r.errors);
  });
  if (!queued) LOG_WARNING("sandbox gc skipped: " << queued.error().describe());
}

}  // namespace allot
