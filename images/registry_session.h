// The state of one pull against one registry, shared by registry_client.cpp
// and registry_auth.cpp (not part of the library's interface).
#pragma once

#include <string>

#include "images/registry_client.h"

namespace allot::images {

struct RegistryClient::Session {
  Url base;                   // scheme, host and port of the registry
  std::string registry;       // as the reference names it (credentials key)
  std::string repository;
  std::string authorization;  // "Bearer ..." or "Basic ..." once a challenge was met
};

}  // namespace allot::images
