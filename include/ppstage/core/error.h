// ppstage::Error and the two levels of checks used everywhere in ppstage.
//
//   PPSTAGE_CHECK(cond, msg...)            a user error: bad config, bad model, bad input.
//                                          Throws ppstage::Error with the message parts
//                                          concatenated; name what was wrong, the value
//                                          seen and what is allowed.
//   PPSTAGE_FAIL(msg...)                   the same without a condition, where the code
//                                          cannot go on: it never returns, so no dummy
//                                          value follows it.
//   PPSTAGE_INTERNAL_ASSERT(cond, msg...)  an invariant of our own code; failing it is a
//                                          ppstage bug. Throws ppstage::InternalError.
//   PPSTAGE_INTERNAL_FAIL(msg...)          an unreachable place; never returns.
//
// Library code only throws; the CLI's main() decides the process's fate. Header-only, so
// schedule plugins (schedule_api.h) use the checks without linking ppstage.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace ppstage {

// A user-facing error: the message is printed as one line `ppstage: error: ...`.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A broken invariant inside ppstage (a bug, never the user's fault).
class InternalError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

namespace detail {

template <typename... Parts>
std::string concat(Parts&&... parts) {
  std::ostringstream out;
  (out << ... << std::forward<Parts>(parts));
  return out.str();
}

[[noreturn]] inline void throwError(const std::string& message) { throw Error(message); }

// `condition` is null for PPSTAGE_INTERNAL_FAIL: the place itself is the bug.
[[noreturn]] inline void throwInternalError(const char* file, int line, const char* condition,
                                            const std::string& message) {
  std::string what = concat("internal error (a ppstage bug) at ", file, ":", line);
  if (condition != nullptr) what += concat(": ", condition, " failed");
  if (!message.empty()) what += ": " + message;
  throw InternalError(what);
}

}  // namespace detail
}  // namespace ppstage

#define PPSTAGE_FAIL(...) ::ppstage::detail::throwError(::ppstage::detail::concat(__VA_ARGS__))

#define PPSTAGE_CHECK(cond, ...) \
  do {                           \
    if (!(cond)) {               \
      PPSTAGE_FAIL(__VA_ARGS__); \
    }                            \
  } while (false)

#define PPSTAGE_INTERNAL_ASSERT(cond, ...)                                           \
  do {                                                                               \
    if (!(cond)) {                                                                   \
      ::ppstage::detail::throwInternalError(__FILE__, __LINE__, #cond,               \
                                            ::ppstage::detail::concat(__VA_ARGS__)); \
    }                                                                                \
  } while (false)

#define PPSTAGE_INTERNAL_FAIL(...)                                   \
  ::ppstage::detail::throwInternalError(__FILE__, __LINE__, nullptr, \
                                        ::ppstage::detail::concat(__VA_ARGS__))
