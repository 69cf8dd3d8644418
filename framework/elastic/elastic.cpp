#include "framework/elastic/elastic.h"

#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>
#include <tuple>

#include "collectives/gloo/gloo_communicator.h"
#include "collectives/gloo/signed_store.h"
#include "core/check.h"
#include "core/timer.h"
#include "framework/elastic/state_transfer.h"

namespace laconic {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

using elastic::Hello;
using elastic::Quorum;

json to_json(const Hello& h) {
  return {{"replica", h.replica}, {"role", h.joiner ? "joiner" : "member"}, {"step", h.step},
          {"fragment", h.fragment}, {"checksum", h.checksum}, {"rule", h.rule}, {"examples", h.examples},
          {"size", h.size}, {"finite", h.finite}, {"norm", h.finite ? h.norm : 0.0}, {"held", h.held}};
}

Hello hello_from_json(const json& j) {
  Hello h;
  h.replica = j.at("replica").get<int>();
  h.joiner = j.at("role").get<std::string>() == "joiner";
  h.step = j.at("step").get<std::int64_t>();
  h.fragment = j.at("fragment").get<int>();
  h.checksum = j.at("checksum").get<std::string>();
  h.rule = j.at("rule").get<std::string>();
  h.examples = j.at("examples").get<std::int64_t>();
  h.size = j.at("size").get<std::int64_t>();
  h.finite = j.at("finite").get<bool>();
  h.norm = j.at("norm").get<double>();
  h.held = j.at("held").get<std::string>();
  return h;
}

json to_json(const Quorum& q) {
  return {{"members", q.members}, {"joiners", q.joiners}, {"dropped", q.dropped},
          {"examples", q.examples}, {"norms", q.norms}, {"rejected", q.rejected}, {"reasons", q.reasons},
          {"step", q.step}, {"decided_by", q.decided_by}, {"recovery", q.recovery}};
}

// A quorum as stored, checked: its lists agree and name replicas in [0, replicas).
Quorum quorum_from_json(const json& j, int replicas) {
  Quorum q;
  q.members = j.at("members").get<std::vector<int>>();
  q.joiners = j.at("joiners").get<std::vector<int>>();
  q.dropped = j.at("dropped").get<std::vector<int>>();
  q.examples = j.at("examples").get<std::vector<std::int64_t>>();
  q.norms = j.at("norms").get<std::vector<double>>();
  q.rejected = j.at("rejected").get<std::vector<int>>();
  q.reasons = j.at("reasons").get<std::vector<std::string>>();
  q.step = j.at("step").get<std::int64_t>();
  q.decided_by = j.at("decided_by").get<int>();
  q.recovery = j.at("recovery").get<bool>();
  auto in_range = [&](const std::vector<int>& v) {
    return std::all_of(v.begin(), v.end(), [&](int i) { return i >= 0 && i < replicas; });
  };
  LC_CHECK(q.examples.size() == q.members.size() && q.norms.size() == q.members.size() &&
           q.reasons.size() == q.rejected.size() && in_range(q.members) && in_range(q.joiners) &&
           std::is_sorted(q.members.begin(), q.members.end()),
           "a quorum's lists disagree or name replicas outside [0, ", replicas, ")");
  return q;
}

std::string checksum_of(std::span<const float> x) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(XXH64(x.data(), x.size_bytes(), 0)));
  return hex;
}

double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The rule as hellos carry it: "median", "trimmed_mean 0.250000", "mean max_norm_ratio 3.000000".
std::string rule_of(const AggregateOptions& a) {
  std::string s = name_of(a.rule);
  if (a.rule == Aggregate::trimmed_mean) s += " " + std::to_string(a.trim_fraction);
  if (a.max_norm_ratio > 0) s += " max_norm_ratio " + std::to_string(a.max_norm_ratio);
  return s;
}

void pause() { std::this_thread::sleep_for(std::chrono::milliseconds(5)); }

// The rounds a store keeps behind the newest committed one: a joiner receives its state over the
// keys of the round that admitted it, a few syncs at most after it.
constexpr std::int64_t kKeptRounds = 16;

std::string list(const std::vector<int>& v) {
  std::string s;
  for (int x : v) {
    if (!s.empty()) s += ',';
    s += std::to_string(x);
  }
  return "[" + s + "]";
}

// A checkpoint directory as bytes: its name, then each regular file's name and contents.
std::string pack_dir(const std::string& dir) {
  std::ostringstream out;
  auto put = [&](const std::string& s) {
    const std::uint64_t n = s.size();
    out.write(reinterpret_cast<const char*>(&n), sizeof n);
    out.write(s.data(), static_cast<std::streamsize>(s.size()));
  };
  put(fs::path(dir).filename().string());
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file()) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  put(std::to_string(files.size()));
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    std::ostringstream body;
    body << in.rdbuf();
    LC_CHECK(in.good() || in.eof(), "elastic: cannot read ", f.string());
    put(f.filename().string());
    put(body.str());
  }
  return out.str();
}

// Writes a packed directory under root (through root/NAME.tmp, renamed whole); returns its path.
std::string unpack_dir(const std::string& blob, const std::string& root) {
  std::size_t at = 0;
  auto get = [&] {
    std::uint64_t n = 0;
    LC_CHECK(at + sizeof n <= blob.size(), "elastic: the state received is truncated");
    std::memcpy(&n, blob.data() + at, sizeof n);
    at += sizeof n;
    LC_CHECK(at + n <= blob.size(), "elastic: the state received is truncated");
    std::string s = blob.substr(at, n);
    at += n;
    return s;
  };
  const std::string name = get();
  LC_CHECK(!name.empty() && name.find('/') == std::string::npos && name != "." && name != "..",
           "elastic: the state received names a bad folder '", name, "'");
  const fs::path dir = fs::path(root) / name, tmp = fs::path(root) / (name + ".join.tmp");
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  const std::size_t files = std::stoull(get());
  for (std::size_t i = 0; i < files; ++i) {
    const std::string file = get();
    LC_CHECK(!file.empty() && file.find('/') == std::string::npos, "elastic: the state received names a bad file");
    const std::string body = get();
    std::ofstream out(tmp / file, std::ios::binary | std::ios::trunc);
    out.write(body.data(), static_cast<std::streamsize>(body.size()));
    out.close();
    LC_CHECK(out.good(), "elastic: cannot write ", (tmp / file).string());
  }
  fs::remove_all(dir);
  fs::rename(tmp, dir);
  return dir.string();
}

// The replicas' store, signed when they share a secret.
std::unique_ptr<KeyStore> open_store(const ElasticOptions& o, std::ostream* log) {
  std::unique_ptr<KeyStore> store = KeyStore::open(o.store);
  return o.secret.empty() ? std::move(store) : sign_store(std::move(store), o.secret, log);
}

// What a donated state's HMAC binds it to: the run (its store's namespace) and the round.
std::string state_name(const ElasticOptions& o, std::int64_t round) {
  return o.store.ns + ".round." + std::to_string(round) + ".state";
}

}  // namespace

ElasticGroup::ElasticGroup(ElasticOptions opts, std::ostream* log)
    : opts_(std::move(opts)), log_(log),
      store_(open_store(opts_, log)) {
  LC_CHECK(opts_.replicas >= 1 && opts_.replica >= 0 && opts_.replica < opts_.replicas, "elastic: replica ",
           opts_.replica, " of ", opts_.replicas);
  LC_CHECK(opts_.max_attempts >= 1, "elastic: max_attempts ", opts_.max_attempts);
  LC_CHECK(opts_.min_quorum >= 0 && opts_.min_quorum <= opts_.replicas, "elastic: min_quorum ", opts_.min_quorum,
           ": expected 0 (a majority) to ", opts_.replicas, " (--replicas)");
  if (opts_.min_quorum == 0) opts_.min_quorum = opts_.replicas / 2 + 1;
  rules_ = {.replicas = opts_.replicas, .min_quorum = opts_.min_quorum, .join_timeout_s = opts_.join_timeout_s,
            .max_examples = opts_.max_local_steps * opts_.examples_per_step};
  for (int i = 0; i < opts_.replicas; ++i) committed_.push_back(i);  // a run starts with all of them
}

ElasticGroup::~ElasticGroup() {
  {
    std::lock_guard lock(beat_mu_);
    beat_stop_ = true;
  }
  beat_cv_.notify_all();
  if (beat_.joinable()) beat_.join();
}

std::string ElasticGroup::key(std::int64_t round, const std::string& what) const {
  return "round." + std::to_string(round) + "." + what;
}

void ElasticGroup::count(const Transport& t) {
  const ByteCounters b = t.bytes();
  sent_ += b.sent;
  recv_ += b.recv;
  messages_ += b.messages_sent;
}

void ElasticGroup::log(const std::string& line) const {
  if (log_) *log_ << "laconic: elastic: replica " << opts_.replica << ": " << line << std::endl;
}

void ElasticGroup::ignored(const std::string& k, const std::string& why) {
  if (warned_.emplace(k, true).second) log(detail::concat("store key '", k, "' ignored: ", why));
}

std::optional<elastic::Quorum> ElasticGroup::read_quorum(std::int64_t round) {
  const std::string k = key(round, "quorum");
  const auto text = store_->find(k);
  if (!text) return std::nullopt;
  try {
    return quorum_from_json(json::parse(*text), opts_.replicas);
  } catch (const std::exception& e) {  // a damaged or foreign value: nobody can act on this round
    ignored(k, detail::concat("it does not parse (", e.what(), "); the round is skipped"));
    Quorum q;
    q.void_round = true;
    return q;
  }
}

void ElasticGroup::read_hellos(std::int64_t round, std::map<int, Hello>& here) {
  for (int i = 0; i < opts_.replicas; ++i) {
    if (here.count(i)) continue;
    const std::string k = key(round, "hello." + std::to_string(i));
    const auto text = store_->find(k);
    if (!text) continue;
    try {
      Hello h = hello_from_json(json::parse(*text));
      LC_CHECK(h.replica == i, "it names replica ", h.replica);
      here.emplace(i, std::move(h));
    } catch (const std::exception& e) {  // as if that replica had not come
      ignored(k, detail::concat("it does not parse (", e.what(), ")"));
    }
  }
}

std::int64_t ElasticGroup::head() {
  const auto text = store_->find("head");
  if (!text) return -1;
  char* end = nullptr;
  const long long r = std::strtoll(text->c_str(), &end, 10);
  if (end == text->c_str() || *end != '\0' || r < 0) {
    ignored("head", "expected a round number");
    return -1;
  }
  return r;
}

std::int64_t ElasticGroup::first_open_round() {
  std::int64_t r = head() + 1;  // the head may lag a round: a hint, the quorums decide
  while (store_->find(key(r, "quorum"))) ++r;
  return r;
}

void ElasticGroup::committed(std::int64_t round, bool pruner) {
  if (!pruner) return;
  store_->put("head", std::to_string(round));
  for (; pruned_to_ < round - kKeptRounds; ++pruned_to_) store_->erase_prefix(key(pruned_to_, ""));
}

void ElasticGroup::beat() {
  std::lock_guard lock(beat_mu_);
  if (beat_.joinable() || beat_stop_) return;
  beat_ = std::thread([this, store = open_store(opts_, log_)] {
    const std::string k = "alive." + std::to_string(opts_.replica);
    std::unique_lock lock(beat_mu_);
    for (std::uint64_t n = 1; !beat_stop_; ++n) {
      lock.unlock();
      try {
        store->put(k, std::to_string(::getpid()) + "." + std::to_string(n));
      } catch (const std::exception&) {  // the store is down: the next beat tries again
      }
      lock.lock();
      beat_cv_.wait_for(lock, std::chrono::seconds(1), [this] { return beat_stop_; });
    }
  });
}

bool ElasticGroup::run_finished() { return store_->find("finished").has_value(); }

void ElasticGroup::finished() { store_->create("finished", std::to_string(opts_.replica)); }

std::optional<elastic::Quorum> ElasticGroup::decide(std::int64_t round, const Hello& mine) {
  if (!store_->create(key(round, "hello." + std::to_string(opts_.replica)), to_json(mine).dump())) return std::nullopt;
  return mine.joiner ? joiner_round(round) : member_round(round);
}

elastic::Quorum ElasticGroup::member_round(std::int64_t round) {
  const auto t0 = std::chrono::steady_clock::now();
  std::map<int, Hello> here;
  const std::vector<int> awaited = elastic::awaited(expected_, opts_.replicas);
  bool said = false;
  for (;;) {
    if (auto q = read_quorum(round)) return *q;
    read_hellos(round, here);
    const elastic::Decision d = elastic::decide_members(here, awaited, since(t0), rules_, opts_.replica);
    if (d.verdict == elastic::Verdict::wait) {
      pause();
    } else if (d.verdict == elastic::Verdict::decide) {
      store_->create(key(round, "quorum"), to_json(d.quorum).dump());  // the first decision stands
    } else {
      wait_for_min_quorum(round, d.quorum, since(t0), said);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
}

void ElasticGroup::wait_for_min_quorum(std::int64_t round, const Quorum& q, double waited_s, bool& said) {
  const int size_now = elastic::headcount(q);
  LC_CHECK(!opts_.stop_requested || !opts_.stop_requested(), "elastic: round ", round, ": asked to stop while ",
           size_now, " replica(s) waited for elastic.min_quorum = ", opts_.min_quorum,
           " (the others stopped before this sync): stopping without this step's checkpoint; --resume continues "
           "from this replica's last one");
  LC_CHECK(waited_s < opts_.join_wait_s, "elastic: round ", round, ": ", size_now, " replica(s) came within ",
           opts_.join_wait_s, " s (elastic.join_wait_s), fewer than elastic.min_quorum = ", opts_.min_quorum,
           ": a minority does not train on as the run");
  if (!said)
    log(detail::concat("round ", round, ": ", size_now, " replica(s) here, waiting for elastic.min_quorum = ",
                       opts_.min_quorum));
  said = true;
}

// A joiner watches the heartbeats of the replicas that are not joiners here: one that changed within
// join_timeout_s is a live member (perhaps mid-period) that will come, or is here, and decides.
elastic::Quorum ElasticGroup::joiner_round(std::int64_t round) {
  const auto t0 = std::chrono::steady_clock::now();
  std::map<int, Hello> here;
  elastic::Heartbeats beats;
  for (;;) {
    if (auto q = read_quorum(round)) return *q;
    read_hellos(round, here);
    if (run_finished())
      throw RunFinished(detail::concat("replica ", opts_.replica, ": the run finished before it could rejoin"));
    LC_CHECK(since(t0) < opts_.join_wait_s, "elastic: replica ", opts_.replica, " waited ", opts_.join_wait_s,
             " s (elastic.join_wait_s) at round ", round, " and no quorum of at least ", opts_.min_quorum,
             " (elastic.min_quorum) formed");
    if (head() >= round) {  // the run committed this round without a key here: the store was lost and rebuilt
      Quorum q;
      q.void_round = true;
      return q;
    }
    const bool live = member_alive(here, beats);
    if (auto q = elastic::decide_joiners(here, since(t0), live, rules_, opts_.replica))
      if (store_->create(key(round, "quorum"), to_json(*q).dump())) continue;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

bool ElasticGroup::member_alive(const elastic::Hellos& here, elastic::Heartbeats& beats) {
  const auto now = std::chrono::steady_clock::now();
  bool live = false;
  for (int i = 0; i < opts_.replicas; ++i) {
    if (here.count(i) && here.at(i).joiner) continue;
    live = beats.alive(i, store_->find("alive." + std::to_string(i)), now, opts_.join_timeout_s) || live;
  }
  return live;
}

elastic::Hello ElasticGroup::hello_of(const ReplicaSync& sync) const {
  Hello mine;
  mine.replica = opts_.replica;
  mine.step = sync.step;
  mine.fragment = sync.fragment;
  mine.checksum = checksum_of(sync.anchor);
  mine.rule = rule_of(opts_.aggregate);
  mine.examples = sync.local_steps * opts_.examples_per_step;
  mine.size = static_cast<std::int64_t>(sync.delta.size());
  mine.norm = l2_norm(sync.delta);
  mine.finite = std::isfinite(mine.norm);
  return mine;
}

namespace {

// What a retry of a sync starts again from: its pseudo-gradient and its reducer's state.
struct SyncInputs {
  std::vector<float> delta;
  std::vector<std::vector<float>> state;

  explicit SyncInputs(const ReplicaSync& sync) : delta(sync.delta.begin(), sync.delta.end()) {
    for (const StateTensor& s : sync.reducer_state) {
      LC_CHECK(s.device == Device::cpu, "elastic: reducer state '", s.name, "' on a device (elastic runs on the CPU)");
      state.emplace_back(s.data.begin(), s.data.end());
    }
  }
  void restore(ReplicaSync& sync) const {
    std::copy(delta.begin(), delta.end(), sync.delta.begin());
    for (std::size_t i = 0; i < state.size(); ++i)
      std::copy(state[i].begin(), state[i].end(), sync.reducer_state[i].data.begin());
  }
};

}  // namespace

void ElasticGroup::reduce(ReplicaSync& sync) {
  const auto t0 = std::chrono::steady_clock::now();
  LC_CHECK(store_ != nullptr, "elastic: no store");
  beat();
  const SyncInputs inputs(sync);
  const Hello mine = hello_of(sync);
  std::string why;
  for (int attempt = 1;; ++attempt) {
    const std::int64_t round = round_++;
    const std::optional<Quorum> decided = decide(round, mine);
    if (unusable(decided, round, attempt, why)) continue;
    const Quorum& q = *decided;
    const Attempt a{.round = round, .number = attempt, .rank = take_seat(q, round, sync), .t0 = t0};
    const bool ok = reduce_in(q, a, mine.examples, sync, why);
    if (outcome(q, round, ok, why) == "commit") {
      LC_CHECK(ok, "elastic: round ", round, " committed without this replica's reduction");
      commit(q, a, sync);
      return;
    }
    log(detail::concat("round ", round, " (sync at step ", sync.step + 1, ", replicas ", list(q.members),
                       ") failed: ", why.empty() ? "another member failed" : why, "; retrying with the replicas left"));
    LC_CHECK(attempt < opts_.max_attempts, "elastic: the sync at step ", sync.step + 1, " failed in ", attempt,
             " rounds (elastic.max_attempts): ", why);
    inputs.restore(sync);
    expected_ = q.members;  // wait for those that were in step, not for the ones that failed
  }
}

bool ElasticGroup::unusable(const std::optional<Quorum>& decided, std::int64_t round, int attempt,
                            std::string& why) const {
  if (!decided) {  // an earlier process of this replica announced itself here before it died
    why = detail::concat("replica ", opts_.replica, " had already announced itself in round ", round);
    LC_CHECK(attempt < opts_.max_attempts, "elastic: ", why, " (two processes with one replica id?)");
    return true;
  }
  if (decided->void_round) {
    why = detail::concat("round ", round, "'s quorum key does not parse");
    LC_CHECK(attempt < opts_.max_attempts, "elastic: ", why);
    return true;
  }
  return false;
}

int ElasticGroup::take_seat(const Quorum& q, std::int64_t round, const ReplicaSync& sync) {
  const elastic::Place place = elastic::place_of(q, opts_.replica);
  if (place.seat == elastic::Seat::rejected) {
    dropped_ = detail::concat("replica ", opts_.replica, " was left out of round ", round, " (the sync at step ",
                              sync.step + 1, "): its contribution was rejected: ", place.reason,
                              "; restart it to rejoin");
    throw ReplicaDropped(dropped_);
  }
  if (place.seat != elastic::Seat::member) {
    dropped_ = detail::concat("replica ", opts_.replica, " was left out of round ", round, " (the sync at step ",
                              q.step + 1, " of replicas ", list(q.members), "; this replica is at step ",
                              sync.step + 1,
                              place.seat == elastic::Seat::dropped ? ", its anchor or aggregation rule differs"
                                                                   : ", it came late",
                              "): restart it to rejoin");
    throw ReplicaDropped(dropped_);
  }
  for (std::size_t j = 0; j < q.rejected.size(); ++j)
    log(detail::concat("round ", round, ": replica ", q.rejected[j], " left out, its contribution was rejected: ",
                       q.reasons[j]));
  return place.rank;
}

bool ElasticGroup::reduce_in(const Quorum& q, const Attempt& a, std::int64_t examples, ReplicaSync& sync,
                             std::string& why) {
  const bool mean = opts_.aggregate.rule == Aggregate::mean;
  if (mean) weigh(q, a, examples, sync.delta);
  try {
    GlooCommunicator comm(*store_, key(a.round, "gloo"), a.rank, static_cast<int>(q.members.size()),
                          {.timeout_s = opts_.sync_timeout_s, .address = opts_.address, .streams = opts_.streams});
    if (mean) sync.reduce(comm);
    else gather_and_aggregate(comm, sync.delta, q.members, a.round);
    count(comm);
    return true;
  } catch (const Error& e) {
    why = e.what();
    return false;
  }
}

// The reducer averages over the quorum: weigh this replica's share by its examples over those of
// the members kept (max_norm_ratio leaves out by the norms the hellos declared; one left out sends zeros).
void ElasticGroup::weigh(const Quorum& q, const Attempt& a, std::int64_t examples, std::span<float> delta) {
  use_.resize(q.members.size());
  std::iota(use_.begin(), use_.end(), std::size_t{0});
  keep_within_norm(q.norms, q.members, a.round);
  const double w = elastic::mean_weight(q.examples, use_, a.rank, examples);
  if (w != 1.0)
    for (float& x : delta) x *= static_cast<float>(w);
}

std::string ElasticGroup::outcome(const Quorum& q, std::int64_t round, bool ok, std::string& why) {
  std::string verdict = "retry";
  if (ok) {
    store_->create(key(round, "ok." + std::to_string(opts_.replica)), "1");
    const auto t1 = std::chrono::steady_clock::now();
    std::vector<int> missing = q.members;
    while (!missing.empty() && since(t1) < opts_.sync_timeout_s) {
      if (store_->find(key(round, "ok." + std::to_string(missing.back())))) missing.pop_back();
      else if (store_->find(key(round, "outcome"))) break;  // decided already (a retry)
      else pause();
    }
    if (missing.empty()) verdict = "commit";
    else why = detail::concat("replica ", missing.back(), " did not confirm its reduction within ", opts_.sync_timeout_s, " s");
  }
  store_->create(key(round, "outcome"), verdict);
  return store_->find(key(round, "outcome")).value_or("retry");
}

void ElasticGroup::commit(const Quorum& q, const Attempt& a, const ReplicaSync& sync) {
  Membership m;
  m.round = a.round;
  m.step = sync.step;
  m.fragment = sync.fragment;
  m.attempts = a.number;
  m.members = q.members;
  m.joiners = q.joiners;
  // Left: in the last committed quorum (as member or joiner) but no member now; joined: the
  // joiners, who receive the state now and are members from the next sync on.
  m.left = elastic::left(committed_, q);
  m.joined = q.joiners;
  m.seconds = since(a.t0);
  // Left out by max_norm_ratio, its steps did not reach theta_global.
  m.contributed_steps = kept(a.rank) ? static_cast<double>(sync.local_steps) * sync.share : 0.0;
  if (!m.left.empty() || !m.joined.empty() || a.number > 1)
    log(detail::concat("sync at step ", sync.step + 1, " (round ", a.round, "): quorum ", list(q.members),
                       q.joiners.empty() ? "" : ", joining " + list(q.joiners),
                       m.left.empty() ? "" : ", left " + list(m.left),
                       a.number > 1 ? ", after " + std::to_string(a.number - 1) + " failed round(s)" : ""));
  expected_ = committed_ = elastic::everyone(q);
  committed(a.round, a.rank == 0);
  std::lock_guard lock(mu_);
  history_.push_back(std::move(m));
  if (elastic::donates(q, opts_.replica)) donations_.push_back({a.round, q.joiners});
}

std::optional<std::string> ElasticGroup::join(const std::string& checkpoint_root,
                                              const std::optional<HeldCheckpoint>& held) {
  std::int64_t round = first_open_round();
  if (head() < 0 && !held) {  // the run has not committed a sync and this replica holds none of it
    round_ = round;
    beat();
    return std::nullopt;
  }
  if (run_finished())
    throw RunFinished(detail::concat("replica ", opts_.replica, ": the run finished before it could rejoin"));
  const auto t0 = std::chrono::steady_clock::now();
  Hello mine;
  mine.replica = opts_.replica;
  mine.joiner = true;
  if (held) {
    mine.step = held->step;
    mine.held = held->theta_global;
  }
  // A round this replica is not admitted at (its earlier process announced itself there before it
  // died, or it was decided before this hello arrived, or skipped): the next open one.
  for (;; round = std::max(round + 1, first_open_round())) {
    LC_CHECK(since(t0) < opts_.join_wait_s, "elastic: replica ", opts_.replica, " could not join within ",
             opts_.join_wait_s, " s (elastic.join_wait_s)");
    const std::optional<Quorum> decided = decide(round, mine);
    if (!decided) continue;
    const Quorum& q = *decided;
    if (q.recovery) store_->create(key(round, "outcome"), "commit");  // it commits as it is written
    const elastic::JoinPlace place = elastic::join_place_of(q, opts_.replica);
    if (place.seat == elastic::JoinSeat::recovers) return recover(q, round, held);
    if (place.seat == elastic::JoinSeat::receives && store_->wait(key(round, "outcome"), opts_.join_wait_s) == "commit")
      return receive(q, round, place.index, checkpoint_root);
  }
}

void ElasticGroup::enter(const Quorum& q, std::int64_t round) {
  round_ = round + 1;
  pruned_to_ = std::max<std::int64_t>(0, round - kKeptRounds);
  expected_ = committed_ = elastic::everyone(q);
  beat();
}

std::optional<std::string> ElasticGroup::recover(const Quorum& q, std::int64_t round,
                                                 const std::optional<HeldCheckpoint>& held) {
  log(detail::concat("no live member: the run recovers at round ", round, " with replicas ", list(q.members),
                     q.joiners.empty() ? "" : " (sending the state to " + list(q.joiners) + ")",
                     q.step < 0 ? ", from the beginning (no checkpoint held)"
                                : ", each from its own checkpoint of theta_global " + held->theta_global));
  enter(q, round);
  committed(round, q.members.front() == opts_.replica);
  if (q.step < 0) return std::nullopt;
  if (elastic::donates(q, opts_.replica)) donate(held->dir, round, q.joiners);
  return held->dir;
}

std::string ElasticGroup::receive(const Quorum& q, std::int64_t round, int index, const std::string& root) {
  log(detail::concat("joining at round ", round, q.recovery ? " (a recovery" : " (after the sync at step ",
                     q.recovery ? "" : std::to_string(q.step + 1), ", from replica ", q.members.front(), ")"));
  GlooCommunicator comm(*store_, key(round, "join"), 1 + index, 1 + static_cast<int>(q.joiners.size()),
                        {.timeout_s = opts_.join_wait_s, .address = opts_.address, .streams = opts_.streams});
  const std::string blob = receive_state(comm, opts_.max_state_bytes, opts_.secret, state_name(opts_, round));
  count(comm);
  const std::string dir = unpack_dir(blob, root);
  enter(q, round);
  return dir;
}

bool ElasticGroup::donation_pending() const {
  std::lock_guard lock(mu_);
  return !donations_.empty();
}

std::vector<Membership> ElasticGroup::history(std::size_t from) const {
  std::lock_guard lock(mu_);
  return {history_.begin() + static_cast<std::ptrdiff_t>(std::min(from, history_.size())), history_.end()};
}

std::size_t ElasticGroup::syncs() const {
  std::lock_guard lock(mu_);
  return history_.size();
}

int ElasticGroup::last_quorum_size() const {
  std::lock_guard lock(mu_);
  return history_.empty() ? 0 : static_cast<int>(history_.back().members.size());
}

void ElasticGroup::donate(const std::string& checkpoint_dir) {
  std::vector<Donation> pending;
  {
    std::lock_guard lock(mu_);
    pending.swap(donations_);
  }
  for (const Donation& d : pending) donate(checkpoint_dir, d.round, d.to);
}

bool ElasticGroup::kept(int row) const {
  return std::find(use_.begin(), use_.end(), static_cast<std::size_t>(row)) != use_.end();
}

void ElasticGroup::keep_within_norm(std::span<const double> norms, const std::vector<int>& members, std::int64_t round) {
  if (opts_.aggregate.max_norm_ratio <= 0) return;
  const double bound = norm_bound(norms, use_, opts_.aggregate.max_norm_ratio, scratch_);
  std::erase_if(use_, [&](std::size_t j) {
    if (norms[j] <= bound) return false;
    log(detail::concat("round ", round, ": replica ", members[j], "'s pseudo-gradient left out: norm ", norms[j],
                       " > elastic.max_norm_ratio ", opts_.aggregate.max_norm_ratio, " x the median member's (bound ",
                       bound, ")"));
    return true;
  });
}

void ElasticGroup::gather_and_aggregate(Communicator& comm, std::span<float> delta, const std::vector<int>& members,
                                        std::int64_t round) {
  const std::size_t n = members.size(), d = delta.size();
  gathered_.resize(n * d);
  comm.all_gather(cbuf(std::span<const float>(delta)), buf(std::span<float>(gathered_)));
  // The values received are checked again: a member whose hello said finite but whose values are
  // not is left out of this aggregate (every member sees the same values and leaves it out).
  use_.clear();
  norms_.resize(n);
  for (std::size_t j = 0; j < n; ++j) {
    norms_[j] = l2_norm(std::span<const float>(gathered_).subspan(j * d, d));
    if (std::isfinite(norms_[j])) use_.push_back(j);
    else log(detail::concat("round ", round, ": replica ", members[j], "'s pseudo-gradient arrived not finite; left out"));
  }
  LC_CHECK(!use_.empty(), "elastic: round ", round, ": no member's pseudo-gradient is finite");
  keep_within_norm(norms_, members, round);
  trimmed_mean(gathered_, use_, trim_count(opts_.aggregate, use_.size()), delta, scratch_);
}

void ElasticGroup::donate(const std::string& checkpoint_dir, std::int64_t round, const std::vector<int>& to) {
  try {
    const std::string blob = pack_dir(checkpoint_dir);
    GlooCommunicator comm(*store_, key(round, "join"), 0, 1 + static_cast<int>(to.size()),
                          {.timeout_s = opts_.sync_timeout_s, .address = opts_.address, .streams = opts_.streams});
    send_state(comm, blob, opts_.secret, state_name(opts_, round));
    count(comm);
    log(detail::concat("sent the state of ", checkpoint_dir, " (", blob.size(), " bytes) to replica(s) ", list(to)));
  } catch (const std::exception& e) {
    log(detail::concat("could not send the state to replica(s) ", list(to), ": ", e.what(),
                       " (they will time out and be restarted)"));
  }
}

}  // namespace laconic
