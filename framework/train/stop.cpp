#include "framework/train/stop.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <csignal>
#include <cstring>

#include "core/check.h"

namespace laconic {
namespace {

constexpr int kSignals[] = {SIGTERM, SIGINT, SIGUSR1};
// Signal handlers are process-wide, so is what they record.
std::atomic<int> g_received{0};
std::atomic<bool> g_installed{false};
struct sigaction g_previous[std::size(kSignals)];

void on_signal(int sig) {
  int none = 0;
  if (!g_received.compare_exchange_strong(none, sig)) {  // the second: the default action, now
    std::signal(sig, SIG_DFL);
    std::raise(sig);
    return;
  }
  const char* name = sig == SIGTERM ? "SIGTERM" : sig == SIGINT ? "SIGINT" : "SIGUSR1";
  const char* rest = ": finishing the ranks' agreed step, then a checkpoint (signal again to stop at once)\n";
  // write() is async-signal-safe; std::cerr is not.
  [[maybe_unused]] ssize_t n = ::write(STDERR_FILENO, "laconic: ", 9);
  n = ::write(STDERR_FILENO, name, std::strlen(name));
  n = ::write(STDERR_FILENO, rest, std::strlen(rest));
}

}  // namespace

SignalStop::SignalStop() {
  LC_CHECK(!g_installed.exchange(true), "SignalStop: already installed in this process");
  g_received = 0;
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (std::size_t i = 0; i < std::size(kSignals); ++i) sigaction(kSignals[i], &sa, &g_previous[i]);
}

SignalStop::~SignalStop() {
  for (std::size_t i = 0; i < std::size(kSignals); ++i) sigaction(kSignals[i], &g_previous[i], nullptr);
  g_installed = false;
}

int SignalStop::received() { return g_received.load(); }

std::string signal_name(int sig) {
  switch (sig) {
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGUSR1: return "SIGUSR1";
    default: return "signal " + std::to_string(sig);
  }
}

std::int64_t StopAgreement::interval(double agree_s, double step_s, double wall_step_s, double elapsed_s,
                                     double limit_s, std::int64_t lookahead) {
  if (!(agree_s >= kCheapS) || !(step_s > 0)) return 1;
  double k = std::ceil(agree_s / (kShare * step_s));
  k = std::min(k, std::floor(kMaxGapS / step_s));
  // The next agreement must still see the limit `lookahead` mean steps ahead (wall time).
  if (limit_s > 0 && wall_step_s > 0)
    k = std::min(k, std::floor((limit_s - elapsed_s) / wall_step_s) - static_cast<double>(lookahead));
  return k >= 1 ? static_cast<std::int64_t>(std::min(k, 1e9)) : 1;
}

Stop Stop::from_code(int code) {
  if (code == 0) return {};
  if (code == kTimeLimit) return {StopReason::time_limit, 0};
  return {StopReason::signal, code};
}

}  // namespace laconic
