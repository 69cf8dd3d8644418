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

// Restart backoff (Supervisor::ended): the first delay, the longest, and how long a replica
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

// One supervisor per OUT: a second would delete the first's live store and replicas' logs. Held
// (an flock on OUT/supervisor.lock, which names the holder's pid) while this object lives.
class OutLock {
 public:
  explicit OutLock(const std::string& out_dir) : path_((fs::path(out_dir) / "supervisor.lock").string()) {
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    LC_CHECK(fd_ >= 0, "elastic: cannot open ", path_, ": ", std::strerror(errno));
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      std::string holder;
      std::ifstream(path_) >> holder;
      ::close(fd_);
      LC_INPUT_ERROR("--out ", out_dir, ": another trainer elastic is running there",
                     holder.empty() ? "" : " (pid " + holder + ")", "; give this run another --out");
    }
    if (::ftruncate(fd_, 0) == 0) {
      const std::string me = std::to_string(::getpid()) + "\n";
      [[maybe_unused]] const auto n = ::write(fd_, me.data(), me.size());  // only for the message above
    }
  }
  ~OutLock() { ::close(fd_); }
  OutLock(const OutLock&) = delete;
  OutLock& operator=(const OutLock&) = delete;

 private:
  std::string path_;
  int fd_ = -1;
};

// The replicas' store: OUT/store (fresh) unless given, its keys in a namespace of this invocation.
std::string store_of(const SupervisorOptions& o) {
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
  return store;
}

fs::path replica_dir(const SupervisorOptions& o, int i) {
  return fs::path(o.out_dir) / ("replica-" + std::to_string(i));
}

// What the replicas' sync logs held before this invocation: a resumed run counts only its own.
struct LoggedBefore {
  std::vector<std::size_t> lines;  // per replica
  std::int64_t steps = 0;          // the last step replica 0 synced at
};

LoggedBefore logged_before(const SupervisorOptions& o) {
  LoggedBefore before{std::vector<std::size_t>(static_cast<std::size_t>(o.replicas), 0), 0};
  for (int i = 0; i < o.replicas; ++i) {
    const fs::path log = replica_dir(o, i) / "elastic.jsonl";
    if (!o.resume) {
      fs::remove(log);
      continue;
    }
    std::ifstream in(log);
    for (std::string line; std::getline(in, line);) {
      if (line.empty()) continue;
      ++before.lines[static_cast<std::size_t>(i)];
      const auto j = nlohmann::json::parse(line, nullptr, false);
      if (i == 0 && !j.is_discarded()) before.steps = std::max(before.steps, j.value("step", std::int64_t{0}));
    }
  }
  return before;
}

// What a replica's process runs: its arguments and environment.
struct ChildCommand {
  std::vector<std::string> args, env;
};

ChildCommand child_command(const SupervisorOptions& o, int i, const std::string& dir, const std::string& store) {
  ChildCommand c;
  // A script is told who it is in its environment: what the supervisor's says of that is not passed on.
  for (char** e = environ; *e; ++e)
    if (o.command.empty() || std::strncmp(*e, "LACONIC_ELASTIC_SECRET=", 23) == 0 ||
        (std::strncmp(*e, "LACONIC_ELASTIC_", 16) != 0 && std::strncmp(*e, "LACONIC_OUT=", 12) != 0 &&
         std::strncmp(*e, "LACONIC_RESUME=", 15) != 0))
      c.env.emplace_back(*e);
  if (o.command.empty()) {
    c.args = {o.program};
    c.args.insert(c.args.end(), o.args.begin(), o.args.end());
    for (const std::string& a : {std::string("--out"), dir, std::string("--replica"), std::to_string(i),
                                 std::string("--replicas"), std::to_string(o.replicas), std::string("--elastic-store"), store})
      c.args.push_back(a);
    return c;
  }
  // A script (laconic.torch) learns which replica it is from its environment.
  c.args = o.command;
  for (const std::string& v : {"LACONIC_ELASTIC_REPLICA=" + std::to_string(i),
                               "LACONIC_ELASTIC_REPLICAS=" + std::to_string(o.replicas),
                               "LACONIC_ELASTIC_STORE=" + store, "LACONIC_OUT=" + fs::absolute(dir).string(),
                               "LACONIC_ELASTIC_RECIPE=" + o.recipe, std::string("LACONIC_RESUME=") + (o.resume ? "auto" : "")})
    c.env.push_back(v);
  return c;
}

// Starts c with its output appended to `log`, in a process group of its own; its pid. `search_path`:
// args[0] is a command looked up on PATH, else the program's path.
pid_t spawn(ChildCommand& c, const std::string& log, bool search_path) {
  // Everything the child needs is made before fork(): after it, only async-signal-safe calls.
  std::vector<char*> argv, envp;
  for (auto& a : c.args) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& e : c.env) envp.push_back(e.data());
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
    if (search_path) ::execvpe(argv[0], argv.data(), envp.data());
    else ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  ::close(fd);
  ::setpgid(pid, pid);  // also from here: whichever runs first, the group exists before any signal
  return pid;
}

// SIGTERM, SIGINT and SIGUSR1 are caught (to be forwarded) while the replicas run.
class CaughtSignals {
 public:
  void catch_them() {
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    ::sigemptyset(&sa.sa_mask);
    ::sigaction(SIGTERM, &sa, &old_term_);
    ::sigaction(SIGINT, &sa, &old_int_);
    ::sigaction(SIGUSR1, &sa, &old_usr1_);
    g_signal = 0;
  }
  void restore() const {
    ::sigaction(SIGTERM, &old_term_, nullptr);
    ::sigaction(SIGINT, &old_int_, nullptr);
    ::sigaction(SIGUSR1, &old_usr1_, nullptr);
  }

 private:
  struct sigaction old_term_ {}, old_int_ {}, old_usr1_ {};
};

struct Replica {
  pid_t pid = -1;
  int starts = 0;
  bool done = false;
  int status = 0;
  double started_s = 0;   // when its process started (wall)
  double restart_s = -1;  // when it is to be restarted (wall), -1: not waiting
  int quick = 0;          // restarts in a row whose process lived less than kStableS
};

bool finished_ok(int status) { return WIFEXITED(status) && WEXITSTATUS(status) == 0; }
bool bad_input(int status) { return WIFEXITED(status) && WEXITSTATUS(status) == 2; }  // restarting cannot help

// One invocation of `trainer elastic`: starts the replicas, restarts and signals them, then reports.
class Supervisor {
 public:
  Supervisor(const SupervisorOptions& o, std::string store, LoggedBefore before)
      : o_(o), store_(std::move(store)), before_(std::move(before)),
        rs_(static_cast<std::size_t>(o.replicas)) {}

  SupervisorResult run() {
    CaughtSignals signals;
    signals.catch_them();
    say("starting " + std::to_string(o_.replicas) + " replicas in " + o_.out_dir + " (store " + store_ + ", up to " +
        std::to_string(o_.max_restarts) + " restarts)");
    for (int i = 0; i < o_.replicas; ++i) start(i);
    supervise();
    signals.restore();
    res_.wall_s = wall_.seconds();
    report();
    return res_;
  }

 private:
  void say(const std::string& line) const {
    if (o_.log) *o_.log << "elastic: " << line << std::endl;
  }
  void event(int i, const std::string& what) {
    events_.push_back({{"wall_s", wall_.seconds()}, {"replica", i}, {"event", what}});
  }
  Replica& replica(int i) { return rs_[static_cast<std::size_t>(i)]; }
  const Replica& replica(int i) const { return rs_[static_cast<std::size_t>(i)]; }

  void start(int i) {
    const std::string dir = replica_dir(o_, i).string();
    fs::create_directories(dir);
    ChildCommand c = child_command(o_, i, dir, store_);
    const pid_t pid = spawn(c, dir + "/log.txt", !o_.command.empty());
    Replica& r = replica(i);
    r.pid = pid;
    ++r.starts;
    r.started_s = wall_.seconds();
    r.restart_s = -1;
    std::ofstream(dir + "/pid") << pid << "\n";
    event(i, r.starts == 1 ? "started" : "restarted");
  }

  // Until every replica is done: forwards signals, restarts the replicas due, reaps the ended.
  void supervise() {
    for (;;) {
      if (const int sig = g_signal.exchange(0)) forward(sig);
      for (int i = 0; i < o_.replicas; ++i)
        if (replica(i).restart_s >= 0 && wall_.seconds() >= replica(i).restart_s) start(i);
      int status = 0;
      const pid_t pid = ::waitpid(-1, &status, WNOHANG);
      if (pid <= 0) {
        if (std::all_of(rs_.begin(), rs_.end(), [](const Replica& r) { return r.done; })) return;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        continue;
      }
      const auto it = std::find_if(rs_.begin(), rs_.end(), [&](const Replica& r) { return r.pid == pid && !r.done; });
      if (it != rs_.end()) ended(static_cast<int>(it - rs_.begin()), status);
    }
  }

  void forward(int sig) {
    say("forwarding " + signal_abbrev(sig) + " to the replicas");
    for (Replica& r : rs_)
      if (r.restart_s >= 0) {  // not running: it stays down
        r.restart_s = -1;
        r.done = true;
      } else if (!r.done && r.pid > 0) {
        ::kill(r.pid, sig);
      }
    forwarded_ = sig;
  }

  // Replica i's process ended with `status`: it is done, or restarted after a backoff.
  void ended(int i, int status) {
    Replica& r = replica(i);
    const bool ok = finished_ok(status);
    event(i, ok ? "finished" : how(status));
    if (ok || forwarded_ || bad_input(status)) {
      r.done = true;
      r.status = status;
      say("replica " + std::to_string(i) + " " + (ok ? "finished" : how(status)));
      return;
    }
    if (res_.restarts >= o_.max_restarts) {
      r.done = true;
      r.status = status;
      say("replica " + std::to_string(i) + " " + how(status) + "; no restarts left (--max-restarts " +
          std::to_string(o_.max_restarts) + ")");
      return;
    }
    ++res_.restarts;
    // Backoff: a replica that keeps dying young (its store down, its peers gone) waits twice as
    // long each time, up to kBackoffMaxS; one that ran kStableS restarts after kBackoffFirstS.
    r.quick = wall_.seconds() - r.started_s < kStableS ? r.quick + 1 : 1;
    const double delay = std::min(kBackoffFirstS * std::pow(2.0, r.quick - 1), kBackoffMaxS);
    r.restart_s = wall_.seconds() + delay;
    r.status = status;  // what it is reported as if a signal stops the run before the restart
    char when[32];
    std::snprintf(when, sizeof when, "%.1f", delay);
    say("replica " + std::to_string(i) + " " + how(status) + " after " + std::to_string(wall_.seconds()) +
        " s; restarting it in " + when + " s (restart " + std::to_string(res_.restarts) + " of " +
        std::to_string(o_.max_restarts) + ")");
  }

  // ---- the report: OUT/elastic.json, the membership changes and the figures

  void report() {
    std::map<std::int64_t, ordered_json> timeline;
    ordered_json processes = ordered_json::array();
    for (int i = 0; i < o_.replicas; ++i) processes.push_back(process(i, timeline));
    ordered_json tl = ordered_json::array();
    for (auto& [round, j] : timeline) tl.push_back(j);
    const std::int64_t left = o_.steps - before_.steps;  // the steps this invocation had to run
    figures(left);
    write_json(processes, tl);
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
                  res_.wall_s, res_.restarts, res_.useful_steps,
                  static_cast<long long>(left * o_.replicas), 100 * res_.useful_share, res_.goodput, o_.out_dir.c_str());
    say(line);
  }

  // Replica i as elastic.json's "processes" list it; its committed syncs of this invocation go
  // into the timeline (each member logged them; rounds agree).
  ordered_json process(int i, std::map<std::int64_t, ordered_json>& timeline) {
    const Replica& r = replica(i);
    const double useful = read_sync_log(i, timeline);
    res_.useful_steps += useful;
    ordered_json rj = {{"replica", i}, {"starts", r.starts}, {"exit", how(r.status)}, {"useful_steps", useful}};
    res_.checkpointed += read_summary(i, rj) ? 1 : 0;
    return rj;
  }

  // Replica i's contributed steps over this invocation's syncs (elastic.jsonl).
  double read_sync_log(int i, std::map<std::int64_t, ordered_json>& timeline) const {
    double useful = 0;
    std::ifstream in(replica_dir(o_, i) / "elastic.jsonl");
    std::size_t skip = before_.lines[static_cast<std::size_t>(i)];
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
    return useful;
  }

  // Replica i's summary.json into rj (its final parameters' checksum, eval loss, steps); whether its
  // last process wrote it after the supervisor's signal: it stopped after a step and checkpointed
  // it (a replica killed outright leaves an older one).
  bool read_summary(int i, ordered_json& rj) const {
    const fs::path dir = replica_dir(o_, i);
    const std::string ended = "replica " + std::to_string(i) + " " + how(replica(i).status);
    std::ifstream sum(dir / "summary.json");
    if (!sum) {
      if (forwarded_) say(ended + ": no checkpoint of its last step");
      return false;
    }
    const auto s = nlohmann::json::parse(sum, nullptr, false);
    if (s.is_discarded()) return false;
    const std::string ckpt = s.value("checkpoint", std::string());
    const bool checkpointed = forwarded_ && s.value("stopped", std::string()) == "signal" && !ckpt.empty() &&
                              fs::last_write_time(dir / "summary.json") >= started_at_ && fs::exists(ckpt);
    if (forwarded_)
      say(ended + (checkpointed ? " after step " + std::to_string(s.value("steps", std::int64_t{0})) + ", checkpoint " + ckpt
                                : ": no checkpoint of its last step"));
    rj["theta_global_checksum"] = s.value("theta_global_checksum", std::string());
    if (s.contains("eval_loss") && s["eval_loss"].is_number()) rj["eval_loss"] = s["eval_loss"].get<double>();
    rj["steps"] = s.value("steps", std::int64_t{0});
    return checkpointed;
  }

  // The run's goodput, useful share and exit code.
  void figures(std::int64_t left) {
    const bool all_ok = std::all_of(rs_.begin(), rs_.end(), [](const Replica& r) { return finished_ok(r.status); });
    const bool any_bad_input = std::any_of(rs_.begin(), rs_.end(), [](const Replica& r) { return bad_input(r.status); });
    res_.goodput = res_.wall_s > 0 ? static_cast<double>(res_.useful_steps) / (res_.wall_s * o_.replicas) : 0;
    res_.useful_share =
        left > 0 ? static_cast<double>(res_.useful_steps) / (static_cast<double>(left) * o_.replicas) : 0;
    res_.exit_code = all_ok ? 0 : forwarded_ ? 128 + forwarded_ : any_bad_input ? 2 : 1;
  }

  void write_json(const ordered_json& processes, const ordered_json& timeline) const {
    ordered_json out;
    out["replicas"] = o_.replicas;
    out["max_restarts"] = o_.max_restarts;
    out["restarts"] = res_.restarts;
    out["wall_s"] = res_.wall_s;
    out["steps"] = o_.steps;
    out["resumed_at"] = before_.steps;
    out["useful_steps"] = res_.useful_steps;
    out["goodput_steps_per_replica_s"] = res_.goodput;
    out["useful_share"] = res_.useful_share;
    out["store"] = store_;
    out["exit_code"] = res_.exit_code;
    out["processes"] = processes;
    out["events"] = events_;
    out["timeline"] = timeline;
    const fs::path path = fs::path(o_.out_dir) / "elastic.json", tmp = fs::path(o_.out_dir) / "elastic.json.tmp";
    std::ofstream(tmp) << out.dump(2) << "\n";
    fs::rename(tmp, path);
  }

  const SupervisorOptions& o_;
  const std::string store_;
  const LoggedBefore before_;
  Stopwatch wall_;
  const fs::file_time_type started_at_ = fs::file_time_type::clock::now();
  std::vector<Replica> rs_;
  ordered_json events_ = ordered_json::array();
  SupervisorResult res_;
  int forwarded_ = 0;  // the signal forwarded to the replicas (0: none)
};

}  // namespace

SupervisorResult run_supervisor(const SupervisorOptions& o) {
  LC_CHECK(o.replicas >= 1, "elastic: --replicas ", o.replicas);
  LC_CHECK(o.max_restarts >= 0, "elastic: --max-restarts ", o.max_restarts);
  fs::create_directories(o.out_dir);
  const OutLock lock(o.out_dir);
  std::string store = store_of(o);
  LoggedBefore before = logged_before(o);
  return Supervisor(o, std::move(store), std::move(before)).run();
}

}  // namespace laconic
