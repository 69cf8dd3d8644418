#include "framework/elastic/supervisor.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/check.h"
#include "core/timer.h"
#include "collectives/gloo/key_store.h"

namespace laconic {

namespace fs = std::filesystem;
using nlohmann::ordered_json;

namespace {

// Restart backoff (see the restart below): the first delay, the longest, and how long a replica
// must run for its next restart to start from the first delay again.
constexpr double kBackoffFirstS = 0.5, kBackoffMaxS = 30, kStableS = 60;

std::atomic<int> g_signal{0};  // the signal to forward (set by the handler, read by the loop)
extern "C" void on_signal(int sig) { g_signal.store(sig); }

// How a process ended, in words, and whether it succeeded.
std::string signal_abbrev(int sig) {
  const char* name = sigabbrev_np(sig);  // null for real-time signals
  return name ? std::string("SIG") + name : "signal " + std::to_string(sig);
}

std::string how(int status) {
  if (WIFEXITED(status)) {
    const int code = WEXITSTATUS(status);
    if (code == 76) return "was dropped from the run (exit 76)";
    return "exited " + std::to_string(code);
  }
  if (WIFSIGNALED(status)) return "was killed by " + signal_abbrev(WTERMSIG(status));
  return "ended";
}

}  // namespace

SupervisorResult run_supervisor(const SupervisorOptions& o) {
  LC_CHECK(o.replicas >= 1, "elastic: --replicas ", o.replicas);
  LC_CHECK(o.max_restarts >= 0, "elastic: --max-restarts ", o.max_restarts);
  fs::create_directories(o.out_dir);
  // One supervisor per OUT: a second would delete the first's live store and replicas' logs.
  const std::string lock_path = (fs::path(o.out_dir) / "supervisor.lock").string();
  const int lock = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  LC_CHECK(lock >= 0, "elastic: cannot open ", lock_path, ": ", std::strerror(errno));
  const std::shared_ptr<void> unlock(nullptr, [lock](void*) { ::close(lock); });
  if (::flock(lock, LOCK_EX | LOCK_NB) != 0) {
    std::string holder;
    std::ifstream(lock_path) >> holder;
    LC_INPUT_ERROR("--out ", o.out_dir, ": another trainer elastic is running there",
                   holder.empty() ? "" : " (pid " + holder + ")", "; give this run another --out");
  }
  if (::ftruncate(lock, 0) == 0) {
    const std::string me = std::to_string(::getpid()) + "\n";
    [[maybe_unused]] const auto n = ::write(lock, me.data(), me.size());  // only for the message above
  }
  std::string store = o.store;
  if (store.empty()) {
    const fs::path dir = fs::path(o.out_dir) / "store";
    fs::remove_all(dir);  // a store left by an earlier run would look like a run in progress
    fs::create_directories(dir);
    store = "file:" + fs::absolute(dir).string();
  }
  // Every invocation's keys in a namespace of their own, so that a shared store (redis) holds
  // nothing of an earlier run (or an earlier invocation of this one) for these replicas to find;
  // 128 random bits, so that no one can write a run's keys before it starts.
  if (StoreSpec::parse(store).ns.empty()) {
    std::random_device random;  // the kernel's getrandom
    char hex[33];
    std::snprintf(hex, sizeof hex, "%08x%08x%08x%08x", random(), random(), random(), random());
    store += std::string("#run-") + hex;
  }
  auto say = [&](const std::string& line) {
    if (o.log) *o.log << "elastic: " << line << std::endl;
  };
  // What the replicas' sync logs held before this invocation: a resumed run counts only its own.
  std::vector<std::size_t> logged_before(static_cast<std::size_t>(o.replicas), 0);
  std::int64_t steps_before = 0;
  for (int i = 0; i < o.replicas; ++i) {
    const fs::path log = fs::path(o.out_dir) / ("replica-" + std::to_string(i)) / "elastic.jsonl";
    if (!o.resume) {
      fs::remove(log);
      continue;
    }
    std::ifstream in(log);
    for (std::string line; std::getline(in, line);) {
      if (line.empty()) continue;
      ++logged_before[static_cast<std::size_t>(i)];
      const auto j = nlohmann::json::parse(line, nullptr, false);
      if (i == 0 && !j.is_discarded()) steps_before = std::max(steps_before, j.value("step", std::int64_t{0}));
    }
  }
  Stopwatch wall;
  const fs::file_time_type started_at = fs::file_time_type::clock::now();
  struct Replica {
    pid_t pid = -1;
    int starts = 0;
    bool done = false;
    int status = 0;
    double started_s = 0;   // when its process started (wall)
    double restart_s = -1;  // when it is to be restarted (wall), -1: not waiting
    int quick = 0;          // restarts in a row whose process lived less than kStableS
  };
  std::vector<Replica> rs(static_cast<std::size_t>(o.replicas));
  ordered_json events = ordered_json::array();
  auto event = [&](int i, const std::string& what) {
    events.push_back({{"wall_s", wall.seconds()}, {"replica", i}, {"event", what}});
  };
  auto start = [&](int i) {
    const std::string dir = (fs::path(o.out_dir) / ("replica-" + std::to_string(i))).string();
    fs::create_directories(dir);
    std::vector<std::string> args, env;
    for (char** e = environ; *e; ++e)
      if (o.command.empty() || std::strncmp(*e, "LACONIC_ELASTIC_SECRET=", 23) == 0 ||
          (std::strncmp(*e, "LACONIC_ELASTIC_", 16) != 0 && std::strncmp(*e, "LACONIC_OUT=", 12) != 0 &&
           std::strncmp(*e, "LACONIC_RESUME=", 15) != 0))
        env.emplace_back(*e);
    if (o.command.empty()) {
      args = {o.program};
      args.insert(args.end(), o.args.begin(), o.args.end());
      for (const std::string& a : {std::string("--out"), dir, std::string("--replica"), std::to_string(i),
                                   std::string("--replicas"), std::to_string(o.replicas), std::string("--elastic-store"), store})
        args.push_back(a);
    } else {
      // A script (laconic.torch) learns which replica it is from its environment.
      args = o.command;
      for (const std::string& v : {"LACONIC_ELASTIC_REPLICA=" + std::to_string(i),
                                   "LACONIC_ELASTIC_REPLICAS=" + std::to_string(o.replicas),
                                   "LACONIC_ELASTIC_STORE=" + store, "LACONIC_OUT=" + fs::absolute(dir).string(),
                                   "LACONIC_ELASTIC_RECIPE=" + o.recipe, std::string("LACONIC_RESUME=") + (o.resume ? "auto" : "")})
        env.push_back(v);
    }
    const std::string log = dir + "/log.txt";
    // Everything the child needs is made before fork(): after it, only async-signal-safe calls.
    std::vector<char*> argv, envp;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    LC_CHECK(fd >= 0, "elastic: cannot open ", log, ": ", std::strerror(errno));
    const pid_t parent = ::getpid();
    const pid_t pid = ::fork();
    if (pid < 0) {
      ::close(fd);
      throw Error(detail::concat("elastic: fork: ", std::strerror(errno)));
    }
    if (pid == 0) {
      // A process group of its own: Ctrl-C at the terminal reaches the supervisor alone, which
      // forwards it once (a replica signalled twice would stop at once, without its checkpoint).
      ::setpgid(0, 0);
      ::prctl(PR_SET_PDEATHSIG, SIGTERM);  // a supervisor that dies stops its replicas (with checkpoints)
      if (::getppid() != parent) ::_exit(143);  // it died before the line above
      ::dup2(fd, 1);  // dup2's copies are not close-on-exec; fd itself is
      ::dup2(fd, 2);
      if (o.command.empty())
        ::execve(o.program.c_str(), argv.data(), envp.data());
      else
        ::execvpe(argv[0], argv.data(), envp.data());  // a command is looked up on PATH
      ::_exit(127);
    }
    ::close(fd);
    ::setpgid(pid, pid);  // also from here: whichever runs first, the group exists before any signal
    Replica& r = rs[static_cast<std::size_t>(i)];
    r.pid = pid;
    ++r.starts;
    r.started_s = wall.seconds();
    r.restart_s = -1;
    std::ofstream(dir + "/pid") << pid << "\n";
    event(i, r.starts == 1 ? "started" : "restarted");
  };

  struct sigaction sa {}, old_term {}, old_int {}, old_usr1 {};
  sa.sa_handler = on_signal;
  ::sigemptyset(&sa.sa_mask);
  ::sigaction(SIGTERM, &sa, &old_term);
  ::sigaction(SIGINT, &sa, &old_int);
  ::sigaction(SIGUSR1, &sa, &old_usr1);
  g_signal = 0;

  say("starting " + std::to_string(o.replicas) + " replicas in " + o.out_dir + " (store " + store + ", up to " +
      std::to_string(o.max_restarts) + " restarts)");
  for (int i = 0; i < o.replicas; ++i) start(i);
  SupervisorResult res;
  int forwarded = 0;
  for (;;) {
    if (const int sig = g_signal.exchange(0)) {
      say("forwarding " + signal_abbrev(sig) + " to the replicas");
      for (Replica& r : rs)
        if (r.restart_s >= 0) {  // not running: it stays down
          r.restart_s = -1;
          r.done = true;
        } else if (!r.done && r.pid > 0) {
          ::kill(r.pid, sig);
        }
      forwarded = sig;
    }
    for (int i = 0; i < o.replicas; ++i)
      if (rs[static_cast<std::size_t>(i)].restart_s >= 0 && wall.seconds() >= rs[static_cast<std::size_t>(i)].restart_s)
        start(i);
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid <= 0) {
      if (std::all_of(rs.begin(), rs.end(), [](const Replica& r) { return r.done; })) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;
    }
    const auto it = std::find_if(rs.begin(), rs.end(), [&](const Replica& r) { return r.pid == pid && !r.done; });
    if (it == rs.end()) continue;
    const int i = static_cast<int>(it - rs.begin());
    const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    event(i, ok ? "finished" : how(status));
    const bool bad_input = WIFEXITED(status) && WEXITSTATUS(status) == 2;  // restarting cannot help
    if (ok || forwarded || bad_input) {
      it->done = true;
      it->status = status;
      say("replica " + std::to_string(i) + " " + (ok ? "finished" : how(status)));
      continue;
    }
    if (res.restarts < o.max_restarts) {
      ++res.restarts;
      // Backoff: a replica that keeps dying young (its store down, its peers gone) waits twice as
      // long each time, up to kBackoffMaxS; one that ran kStableS restarts after kBackoffFirstS.
      it->quick = wall.seconds() - it->started_s < kStableS ? it->quick + 1 : 1;
      const double delay = std::min(kBackoffFirstS * std::pow(2.0, it->quick - 1), kBackoffMaxS);
      it->restart_s = wall.seconds() + delay;
      it->status = status;  // what it is reported as if a signal stops the run before the restart
      char when[32];
      std::snprintf(when, sizeof when, "%.1f", delay);
      say("replica " + std::to_string(i) + " " + how(status) + " after " + std::to_string(wall.seconds()) +
          " s; restarting it in " + when + " s (restart " + std::to_string(res.restarts) + " of " +
          std::to_string(o.max_restarts) + ")");
    } else {
      it->done = true;
      it->status = status;
      say("replica " + std::to_string(i) + " " + how(status) + "; no restarts left (--max-restarts " +
          std::to_string(o.max_restarts) + ")");
    }
  }
  ::sigaction(SIGTERM, &old_term, nullptr);
  ::sigaction(SIGINT, &old_int, nullptr);
  ::sigaction(SIGUSR1, &old_usr1, nullptr);
  res.wall_s = wall.seconds();

  // The membership of every committed sync (each member logged it; rounds agree), each replica's
  // contributions, and its final parameters' checksum.
  std::map<std::int64_t, ordered_json> timeline;
  ordered_json replicas = ordered_json::array();
  bool all_ok = true;
  for (int i = 0; i < o.replicas; ++i) {
    const Replica& r = rs[static_cast<std::size_t>(i)];
    const fs::path dir = fs::path(o.out_dir) / ("replica-" + std::to_string(i));
    double useful = 0;
    std::ifstream in(dir / "elastic.jsonl");
    std::size_t skip = logged_before[static_cast<std::size_t>(i)];
    for (std::string line; std::getline(in, line);) {
      if (line.empty()) continue;
      if (skip > 0) {
        --skip;
        continue;
      }
      const auto j = nlohmann::json::parse(line, nullptr, false);
      if (j.is_discarded()) continue;
      useful += j.value("contributed_steps", 0.0);
      const std::int64_t round = j.value("round", std::int64_t{-1});
      if (!timeline.count(round))
        timeline[round] = {{"round", round},        {"step", j.value("step", std::int64_t{0})},
                           {"quorum", j["members"]}, {"joined", j["joined"]},
                           {"left", j["left"]},      {"attempts", j.value("attempts", 1)}};
    }
    res.useful_steps += useful;
    ordered_json rj = {{"replica", i}, {"starts", r.starts}, {"exit", how(r.status)}, {"useful_steps", useful}};
    std::ifstream sum(dir / "summary.json");
    // Whether this replica's last process wrote its summary after the supervisor's signal: it
    // stopped after a step and checkpointed it (a replica killed outright leaves an older one).
    bool checkpointed = false;
    if (sum) {
      const auto s = nlohmann::json::parse(sum, nullptr, false);
      if (!s.is_discarded()) {
        const std::string ckpt = s.value("checkpoint", std::string());
        checkpointed = forwarded && s.value("stopped", std::string()) == "signal" && !ckpt.empty() &&
                       fs::last_write_time(dir / "summary.json") >= started_at && fs::exists(ckpt);
        if (forwarded)
          say("replica " + std::to_string(i) + " " + how(r.status) +
              (checkpointed ? " after step " + std::to_string(s.value("steps", std::int64_t{0})) + ", checkpoint " + ckpt
                            : ": no checkpoint of its last step"));
        rj["theta_global_checksum"] = s.value("theta_global_checksum", std::string());
        if (s.contains("eval_loss") && s["eval_loss"].is_number()) rj["eval_loss"] = s["eval_loss"].get<double>();
        rj["steps"] = s.value("steps", std::int64_t{0});
      }
    } else if (forwarded) {
      say("replica " + std::to_string(i) + " " + how(r.status) + ": no checkpoint of its last step");
    }
    res.checkpointed += checkpointed ? 1 : 0;
    replicas.push_back(rj);
    all_ok = all_ok && WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0;
  }
  res.goodput = res.wall_s > 0 ? static_cast<double>(res.useful_steps) / (res.wall_s * o.replicas) : 0;
  const std::int64_t left = o.steps - steps_before;  // the steps this invocation had to run
  res.useful_share = left > 0 ? static_cast<double>(res.useful_steps) / (static_cast<double>(left) * o.replicas) : 0;
  const bool any_bad_input = std::any_of(rs.begin(), rs.end(), [](const Replica& r) {
    return WIFEXITED(r.status) && WEXITSTATUS(r.status) == 2;
  });
  res.exit_code = all_ok ? 0 : forwarded ? 128 + forwarded : any_bad_input ? 2 : 1;
  ordered_json out;
  out["replicas"] = o.replicas;
  out["max_restarts"] = o.max_restarts;
  out["restarts"] = res.restarts;
  out["wall_s"] = res.wall_s;
  out["steps"] = o.steps;
  out["resumed_at"] = steps_before;
  out["useful_steps"] = res.useful_steps;
  out["goodput_steps_per_replica_s"] = res.goodput;
  out["useful_share"] = res.useful_share;
  out["store"] = store;
  out["exit_code"] = res.exit_code;
  out["processes"] = replicas;
  out["events"] = events;
  ordered_json tl = ordered_json::array();
  for (auto& [round, j] : timeline) tl.push_back(j);
  out["timeline"] = tl;
  {
    const fs::path path = fs::path(o.out_dir) / "elastic.json", tmp = fs::path(o.out_dir) / "elastic.json.tmp";
    std::ofstream(tmp) << out.dump(2) << "\n";
    fs::rename(tmp, path);
  }
  // The timeline, where membership changed, and the figures.
  for (const auto& j : tl)
    if (!j["joined"].empty() || !j["left"].empty() || j["attempts"].get<int>() > 1)
      say("sync at step " + std::to_string(j["step"].get<std::int64_t>()) + ": quorum " + j["quorum"].dump() +
          (j["left"].empty() ? "" : ", left " + j["left"].dump()) +
          (j["joined"].empty() ? "" : ", joined " + j["joined"].dump()));
  char line[256];
  std::snprintf(line, sizeof line,
                "done in %.1f s: %d restart(s); %.0f useful inner steps of %lld (%.1f%%), goodput %.2f steps per "
                "replica-second; %s/elastic.json",
                res.wall_s, res.restarts, res.useful_steps,
                static_cast<long long>(left * o.replicas), 100 * res.useful_share, res.goodput, o.out_dir.c_str());
  say(line);
  return res;
}

}  // namespace laconic
