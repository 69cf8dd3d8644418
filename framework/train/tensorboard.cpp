#include "framework/train/tensorboard.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <thread>

#include "core/check.h"

extern char** environ;

namespace laconic {

namespace {

namespace fs = std::filesystem;

// The build tree's package beside this program (build/trainer, build/python/laconic), if there.
std::string package_dir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  const fs::path dir = exe.parent_path() / "python";
  return fs::exists(dir / "laconic" / "tensorboard.py", ec) ? dir.string() : "";
}

// This process's environment with the package first on PYTHONPATH.
std::vector<std::string> child_env() {
  std::vector<std::string> env;
  const std::string package = package_dir();
  bool had = false;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string v = *e;
    if (v.rfind("PYTHONPATH=", 0) == 0 && !package.empty()) {
      v = "PYTHONPATH=" + package + ":" + v.substr(11);
      had = true;
    }
    env.push_back(std::move(v));
  }
  if (!had && !package.empty()) env.push_back("PYTHONPATH=" + package);
  return env;
}

std::vector<char*> pointers(std::vector<std::string>& v) {
  std::vector<char*> out;
  for (auto& s : v) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// Starts `argv` with stdin from `in` (-1: /dev/null) and, quiet, stdout and stderr to /dev/null;
// `close_fd` closed in the child. Returns the pid, or -1 with errno's text in `err`.
pid_t spawn(std::vector<std::string> argv, int in, int close_fd, bool quiet, std::string& err) {
  std::vector<std::string> env = child_env();
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  if (in >= 0) {
    posix_spawn_file_actions_adddup2(&fa, in, 0);
  } else {
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  }
  if (close_fd >= 0) posix_spawn_file_actions_addclose(&fa, close_fd);
  if (quiet) {
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  }
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, argv[0].c_str(), &fa, nullptr, pointers(argv).data(), pointers(env).data());
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    err = std::strerror(rc);
    return -1;
  }
  return pid;
}

// The child's wait status, killing it after `seconds` (then the status of that kill).
int wait_for(pid_t pid, double seconds) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  int status = 0;
  for (;;) {
    const pid_t got = ::waitpid(pid, &status, WNOHANG);
    if (got == pid || (got < 0 && errno != EINTR)) return status;
    if (std::chrono::steady_clock::now() > end) {
      ::kill(pid, SIGKILL);
      while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      return status;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

std::string describe(int status) {
  if (WIFEXITED(status)) return "exit code " + std::to_string(WEXITSTATUS(status));
  return "signal " + std::to_string(WTERMSIG(status));
}

}  // namespace

std::string tensorboard_python(const std::string& what) {
  std::vector<std::string> candidates;
  if (const char* p = std::getenv("LACONIC_TENSORBOARD_PYTHON"); p && *p) {
    candidates.emplace_back(p);  // the user's choice, alone
  } else {
    if (const char* v = std::getenv("LACONIC_VENV"); v && *v) candidates.push_back(std::string(v) + "/bin/python");
    candidates.emplace_back("/opt/laconic-venv/bin/python");
    if (const char* h = std::getenv("HOME"); h && *h) candidates.push_back(std::string(h) + "/.local/share/laconic/venv/bin/python");
  }
  std::string tried;
  for (const std::string& python : candidates) {
    if (::access(python.c_str(), X_OK) != 0) continue;
    std::string err;
    const pid_t pid = spawn({python, "-c", "import tensorboard, laconic.tensorboard"}, -1, -1, true, err);
    if (pid > 0 && wait_for(pid, 120) == 0) return python;
    tried += (tried.empty() ? "" : ", ") + python;
  }
  LC_INPUT_ERROR(what, ": expected a Python with the tensorboard package and Laconic's package (its events are "
                 "written by tensorboard's own writer); ", tried.empty() ? "found none" : "none of " + tried + " imports both",
                 " (scripts/install-deps --pypi makes one; build the package with make build, or set "
                 "LACONIC_TENSORBOARD_PYTHON)");
}

std::string run_tensorboard(const std::string& python, const std::vector<std::string>& args) {
  std::vector<std::string> argv{python, "-m", "laconic.tensorboard"};
  argv.insert(argv.end(), args.begin(), args.end());
  std::string err;
  const pid_t pid = spawn(argv, -1, -1, false, err);
  if (pid < 0) return "cannot run " + python + ": " + err;
  const int status = wait_for(pid, 600);
  return status == 0 ? "" : "python -m laconic.tensorboard ended with " + describe(status);
}

TensorboardStream::TensorboardStream(std::string python, std::string logdir)
    : python_(std::move(python)), logdir_(std::move(logdir)) {}

void TensorboardStream::start() {
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
    failed_ = true;
    std::cerr << "laconic: warning: train.tensorboard: no socket pair (" << std::strerror(errno) << "); no events\n";
    return;
  }
  std::string err;
  pid_ = spawn({python_, "-m", "laconic.tensorboard", "--stdin", "--logdir", logdir_}, pair[1], pair[0], false, err);
  ::close(pair[1]);
  fd_ = pair[0];
  if (pid_ < 0) {
    failed_ = true;
    std::cerr << "laconic: warning: train.tensorboard: cannot run " << python_ << " (" << err << "); no events\n";
  }
}

void TensorboardStream::write(const std::string& line) {
  if (failed_) return;
  if (fd_ < 0) start();
  const std::string text = line + "\n";
  for (std::size_t done = 0; !failed_ && done < text.size();) {
    const ssize_t n = ::send(fd_, text.data() + done, text.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      failed_ = true;
      std::cerr << "laconic: warning: train.tensorboard: the event writer stopped (" << std::strerror(errno)
                << "); no more events in " << logdir_ << "\n";
    } else {
      done += static_cast<std::size_t>(n);
    }
  }
}

TensorboardStream::~TensorboardStream() {
  if (fd_ >= 0) ::close(fd_);  // the writer's end of input
  if (pid_ > 0) {
    const int status = wait_for(pid_, 60);
    if (status != 0 && !failed_)
      std::cerr << "laconic: warning: train.tensorboard: the event writer ended with " << describe(status) << "\n";
  }
}

}  // namespace laconic
