// Result<T>: the return type of every operation that can fail for reasons
// outside the program (syscalls, kernel files, peers, configuration).
//
// Shaped like std::expected so the code can move to it under C++23:
//   Result<int> r = parsePort(s);
//   if (!r) return r.error();          // an Error converts into any Result
//   use(*r);
// Programmer errors are CHECKed, never returned (see base/check.h).
#pragma once

#include <cerrno>
#include <string>
#include <utility>
#include <variant>

#include "base/check.h"

namespace allot {

// What failed, in words that name the file, value or peer, plus errno when a
// syscall was involved (0 otherwise).
struct Error {
  std::string message;
  int errnum = 0;

  // "message: strerror(errnum)" or just "message".
  std::string describe() const;

  // Builds an Error from the current errno.
  static Error fromErrno(std::string what) { return Error{std::move(what), errno}; }
};

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::in_place_index<0>, std::move(value)) {}
  Result(Error error) : v_(std::in_place_index<1>, std::move(error)) {}

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & { CHECK(ok()); return std::get<0>(v_); }
  const T& value() const& { CHECK(ok()); return std::get<0>(v_); }
  T&& value() && { CHECK(ok()); return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const Error& error() const { CHECK(!ok()); return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : error_(std::move(error)), ok_(false) {}

  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const { CHECK(!ok_); return error_; }

 private:
  Error error_;
  bool ok_ = true;
};

using Status = Result<void>;

inline Status okStatus() { return Status(); }

}  // namespace allot
