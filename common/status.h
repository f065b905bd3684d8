// Errors as values. A Status carries an HTTP-style code (0 = ok) and a short
// message meant for the caller or the log; Result<T> is a value or a Status.
// Both are plain values: no ownership, no threads, copy freely.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace eq {

class Status {
 public:
  Status() = default;
  Status(int code, std::string msg) : code_(code), msg_(std::move(msg)) {}

  static Status ok() { return Status(); }
  bool isOk() const { return code_ == 0; }
  int code() const { return code_; }
  const std::string& msg() const { return msg_; }

 private:
  int code_ = 0;
  std::string msg_;
};

// A value or an error. Access to the wrong alternative is a programming error
// (std::get throws std::bad_variant_access, which we let terminate).
template <typename T>
class Result {
 public:
  Result(T value) : v_(std::move(value)) {}         // NOLINT: implicit on purpose
  Result(Status status) : v_(std::move(status)) {}  // NOLINT: implicit on purpose

  bool isOk() const { return std::holds_alternative<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T& value() & { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  Status status() const { return isOk() ? Status() : std::get<Status>(v_); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace eq
