// Secrets and random tokens: bytes from the kernel's getrandom() and the
// comparison of a secret a peer presents with the one it was given.
//
// Thread: any (no shared state).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace allot {

// Fills `n` bytes from getrandom() (blocking only until the kernel's pool
// is initialized at boot; EINTR retried). getrandom fails otherwise only
// for bad arguments: a CHECK.
void fillRandom(uint8_t* bytes, size_t n);

// `bytes` random bytes as 2 * bytes lower-case hex digits (16 bytes: a
// 128-bit secret or id).
std::string randomHex(size_t bytes);

// Whether a presented secret equals the expected one, in a time that does
// not depend on where they differ (only on their length).
bool sameSecret(std::string_view expected, std::string_view given);

}  // namespace allot
