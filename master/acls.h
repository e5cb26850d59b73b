// Acls: who may do what at the master (docs/acls.md).
//
// A peer's principal comes from its link: the certificate's CN with mutual
// TLS, empty on a plaintext link. Rules name principals or `*` (any,
// including the empty one). The first rule of an action that names the
// principal decides; with an ACL file, an action no rule allows is refused.
// Without one (Acls::permissive()): everyone may register frameworks and
// agents, frameworks may run tasks as any user except root, and nobody may
// operate (act on other frameworks' tasks).
//
// Thread: immutable after load; any thread.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "proto/resources.h"

namespace allot {

// How many frameworks (and agents) one principal may hold at once when its
// rule does not say (`frameworks_max=`, `agents_max=`): frameworks stay
// well under the master's limits::kFrameworksMax, so one principal cannot
// fill the master; agents usually share one principal (one certificate
// name for the fleet), so they are bounded only by the master's limit.
constexpr size_t kFrameworksPerPrincipalDefault = 10000;
constexpr size_t kAgentsPerPrincipalDefault = 200000;

// What the first matching register_framework rule grants.
struct FrameworkGrant {
  bool anyUser = false;            // `*`: any user but root
  std::vector<std::string> users;  // run-as users allowed by name
  bool allowRoot = false;          // root (or uid 0) only when named
  bool anyRole = true;
  std::vector<std::string> roles;
  double weightMax = 1e6;
  Resources guarantee;             // `guarantee=`: most its frameworks may hold as a floor
  size_t frameworksMax = kFrameworksPerPrincipalDefault;  // held at once by the principal

  // `user` empty means the agent's --default-user: always allowed.
  bool allowsUser(std::string_view user) const;
  bool allowsRole(std::string_view role) const;
};

class Acls {
 public:
  // No --acls: the defaults above.
  static Acls permissive();
  // Parses the text of an ACL file; `source` names it in errors
  // ("FILE:LINE:COLUMN: ...").
  static Result<Acls> parse(std::string_view text, const std::string& source);
  static Result<Acls> load(const std::string& path);

  // nullopt: this principal may not register frameworks.
  std::optional<FrameworkGrant> registerFramework(std::string_view principal) const;
  bool registerAgent(std::string_view principal) const;
  // How many agents the principal may hold at once (0: may not register).
  size_t agentsMax(std::string_view principal) const;
  // Act on tasks and frameworks that are not the principal's own (kill
  // others' tasks, teardown): the check the HTTP/allotctl operator
  // endpoints call.
  bool operate(std::string_view principal) const;
  // The principals of the operate rules ("*" included), for the agents.
  std::vector<std::string> operatePrincipals() const;

  bool fromFile() const { return fromFile_; }
  size_t ruleCount() const { return rules_.size(); }

 private:
  enum class Action { kRegisterFramework, kRegisterAgent, kOperate };
  struct Rule {
    Action action;
    std::string principal;  // "*" = any
    FrameworkGrant grant;   // register_framework only
    size_t agentsMax = kAgentsPerPrincipalDefault;  // register_agent only
  };
  const Rule* find(Action action, std::string_view principal) const;
  static Result<std::optional<Rule>> parseRule(std::string_view line);
  static Status parseOption(std::string_view key, std::string_view value, Rule* rule);

  bool fromFile_ = false;
  std::vector<Rule> rules_;
};

}  // namespace allot
