#include "agent/executor_spec.h"

#include <cstdlib>

namespace allot {
namespace {

// systemd's notification and watchdog variables belong to the agent's unit,
// never to a task (a task could otherwise report for the agent).
bool isDaemonOnlyVariable(const std::string& name) {
  return name == "NOTIFY_SOCKET" || name.rfind("WATCHDOG_", 0) == 0 || name == "LISTEN_FDS" ||
         name == "LISTEN_PID" || name == "LISTEN_FDNAMES";
}

std::string taskUserText(const RunAsUser& user) {
  std::string out = std::to_string(user.uid) + ":" + std::to_string(user.gid) + ":";
  for (size_t i = 0; i < user.groups.size(); ++i) out += (i ? "," : "") + std::to_string(user.groups[i]);
  return out;
}

}  // namespace

bool isBuiltinExecutor(const wire::ExecutorInfo& e) {
  return e.command().shell().empty() && e.command().argv().empty();
}

// The executor a task runs in: its own ExecutorInfo, or the framework's
// built-in command executor (one per run-as user).
wire::ExecutorInfo executorFor(const wire::FrameworkInfo& framework, const wire::TaskInfo& task,
                               const std::string& defaultUser) {
  wire::ExecutorInfo executor;
  if (task.has_executor()) executor = task.executor();
  if (executor.executor_id().empty()) {
    executor.set_executor_id(task.has_executor() ? task.task_id() : kCommandExecutorId);
  }
  executor.set_framework_id(framework.id());
  if (task.has_executor()) return executor;
  executor.set_name("allot-executor");
  if (!task.container().image().empty()) {
    // A command task of an image gets a command executor of its own: the
    // root is its task's ('@' is in no user name, so no clash below).
    executor.set_executor_id(std::string(kCommandExecutorId) + "@" + task.task_id());
    *executor.mutable_container() = task.container();
  }
  if (!task.command().user().empty()) {
    // A command task of its own user gets its own command executor.
    const std::string& frameworkUser = framework.user().empty() ? defaultUser : framework.user();
    if (task.command().user() != frameworkUser && task.container().image().empty()) {
      executor.set_executor_id(std::string(kCommandExecutorId) + "." + task.command().user());
    }
    executor.mutable_command()->set_user(task.command().user());
  }
  return executor;
}

// What the executor process is started with (proto/FORMAT.md): its
// command, environment, user, sandbox and output files; the isolators add
// their part to `setup` in prepare().
Result<wire::TaskInfo> withImageConfig(wire::TaskInfo task, const ContainerImage& image) {
  wire::CommandInfo* cmd = task.mutable_command();
  if (cmd->shell().empty() && cmd->argv().empty()) {
    const std::vector<std::string>& args = image.entrypoint.empty() ? image.cmd : image.entrypoint;
    if (args.empty()) return Error{"the task has no command and its image neither Entrypoint nor Cmd"};
    for (const std::string& a : args) cmd->add_argv(a);
    if (!image.entrypoint.empty())
      for (const std::string& a : image.cmd) cmd->add_argv(a);
  }
  auto* env = cmd->mutable_environment();
  for (const std::string& kv : image.env) {
    size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    env->insert({kv.substr(0, eq), kv.substr(eq + 1)});  // the task's own value wins
  }
  return task;
}

void moveSeccompToTasks(LaunchSpec& spec) {
  if (spec.setup.seccompBpf.empty()) return;
  static const char kHex[] = "0123456789abcdef";
  std::string hex = "ALLOT_TASK_SECCOMP=";
  for (char c : spec.setup.seccompBpf) {
    auto b = static_cast<unsigned char>(c);
    hex += kHex[b >> 4];
    hex += kHex[b & 15];
  }
  spec.env.push_back(std::move(hex));
  spec.setup.seccompBpf.clear();
}

LaunchSpec executorLaunchSpec(const Container& c, const ExecutorSite& site) {
  LaunchSpec spec;
  const wire::CommandInfo& cmd = c.executor.command();
  if (isBuiltinExecutor(c.executor)) {
    spec.argv = {site.executorPath};
  } else if (!cmd.shell().empty()) {
    spec.argv = {"/bin/sh", "-c", cmd.shell()};
  } else {
    spec.argv.assign(cmd.argv().begin(), cmd.argv().end());
  }
  spec.env = {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
              "ALLOT_AGENT_ENDPOINT=unix:" + site.socketPath,
              "ALLOT_AGENT_ID=" + site.agentId,
              "ALLOT_FRAMEWORK_ID=" + c.framework.id(),
              "ALLOT_EXECUTOR_ID=" + c.executor.executor_id(),
              "ALLOT_SANDBOX_DIR=" + c.sandbox,
              "ALLOT_EXECUTOR_SECRET=" + c.secret,
              "ALLOT_TASK_LOG_MAX_BYTES=" + std::to_string(site.taskLogMaxBytes),
              "ALLOT_TASK_LOG_FILES=" + std::to_string(site.taskLogFiles),
              "ALLOT_RECOVERY_TIMEOUT_S=" +
                  std::to_string(std::chrono::duration<double>(site.recoveryTimeout).count())};
  if (const char* level = std::getenv("ALLOT_LOG_LEVEL")) spec.env.push_back(std::string("ALLOT_LOG_LEVEL=") + level);
  for (const auto& [k, v] : cmd.environment()) {
    if (!isDaemonOnlyVariable(k)) spec.env.push_back(k + "=" + v);
  }
  if (c.user && c.image && isBuiltinExecutor(c.executor)) {
    // The executor stays root to build each task's root (cli/task_root.h);
    // its tasks switch to the user once inside.
    spec.env.push_back("USER=" + c.user->name);
    spec.env.push_back("LOGNAME=" + c.user->name);
    spec.env.push_back(std::string("ALLOT_TASK_USER=") + taskUserText(*c.user));
  } else if (c.user) {
    spec.env.push_back("USER=" + c.user->name);
    spec.env.push_back("LOGNAME=" + c.user->name);
    spec.setup.uid = static_cast<int>(c.user->uid);
    spec.setup.gid = static_cast<int>(c.user->gid);
    spec.setup.groups = c.user->groups;
    spec.setup.dropCapabilities = !c.user->isRoot();
    spec.setup.confineRoot = c.user->isRoot();
    if (c.user->isRoot()) {
      spec.setup.privateTmpDir = c.sandbox + "/tmp";
      spec.setup.keepVisibleDir = site.workDir;
    }
  }
  spec.setup.noNewPrivs = true;
  spec.workDir = c.sandbox;
  spec.stdoutPath = c.sandbox + "/stdout";
  spec.stderrPath = c.sandbox + "/stderr";
  return spec;
}

}  // namespace allot
