// Ids and secrets the master hands out: 128 random bits from the kernel
// (getrandom), so no peer can guess another's framework, agent, offer or
// task-bearing id, nor the secret that lets a client take its id back.
//
// Thread: one instance per master, on the master's thread.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace allot {

class RandomIds {
 public:
  // "<kind>-<32 hex digits>", e.g. "F-9c0e...": the kind letter keeps logs
  // readable (A agent, F framework, O offer).
  std::string id(char kind);
  // 32 hex digits, for framework_secret / agent_secret.
  std::string secret();

 private:
  void appendHex(std::string* out);

  // getrandom() in blocks: one syscall per 256 ids, not one per id.
  std::array<uint8_t, 4096> pool_{};
  size_t used_ = pool_.size();
};

}  // namespace allot
