// Errors and checks used across Laconic.
//
// Two kinds of failure:
//  - laconic::Error: a broken invariant or a failed system call; carries file:line.
//  - laconic::InputError: a user mistake (recipe, CLI flag, data file). The message is one line
//    that names the file, line, key and what was expected; the CLI exits with code 2 on it.
// Library code throws; it never calls exit().
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

namespace laconic {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class InputError : public Error {
 public:
  using Error::Error;
};

// Text from a file or a peer, fit for a one-line message: printable ASCII as is, a backslash,
// newline, tab and carriage return as \\, \n, \t, \r, every other byte as \xNN; the first `max`
// bytes ("..." after). One line stays one line, and the name can still be read.
std::string printable(std::string_view s, std::size_t max = 80);

// The run has nothing left to do (it finished before; a replica found the run over): the CLI says
// why in one line and exits 0, writing nothing.
struct RunFinished : std::runtime_error {
  using std::runtime_error::runtime_error;
};

namespace detail {
template <typename... Args>
std::string concat(Args&&... args) {
  std::ostringstream os;
  (os << ... << std::forward<Args>(args));
  return os.str();
}
[[noreturn]] void throw_check(const char* file, int line, const char* cond, const std::string& msg);
}  // namespace detail

}  // namespace laconic

// LC_CHECK(cond, values...): throws laconic::Error("file:line: check `cond` failed: values...").
#define LC_CHECK(cond, ...)                                                                \
  do {                                                                                     \
    if (!(cond)) [[unlikely]]                                                              \
      ::laconic::detail::throw_check(__FILE__, __LINE__, #cond,                            \
                                     ::laconic::detail::concat("" __VA_OPT__(, ) __VA_ARGS__)); \
  } while (0)

// LC_INPUT_ERROR(values...): throws laconic::InputError with the concatenated message (no file:line
// of ours: the message itself names the user's file).
#define LC_INPUT_ERROR(...) throw ::laconic::InputError(::laconic::detail::concat(__VA_ARGS__))
