#include "framework/elastic/elastic.h"

#include <xxhash.h>

#include <algorithm>
#include <chrono>
#include <cmath>
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
#include "core/check.h"
#include "core/timer.h"

namespace laconic {

namespace fs = std::filesystem;
using nlohmann::json;

struct ElasticGroup::Hello {
  int replica = 0;
  bool joiner = false;
  std::int64_t step = -1;
  int fragment = 0;
  std::string checksum;
  std::string rule;  // the aggregation rule: members must share it (the same collective, the same result)
  std::int64_t examples = 0;
  std::int64_t size = 0;  // the contribution: its values, whether all are finite, its L2 norm
  bool finite = true;
  double norm = 0;
  json to_json() const {
    return {{"replica", replica}, {"role", joiner ? "joiner" : "member"}, {"step", step},
            {"fragment", fragment}, {"checksum", checksum}, {"rule", rule}, {"examples", examples},
            {"size", size}, {"finite", finite}, {"norm", finite ? norm : 0.0}};
  }
  static Hello from_json(const json& j) {
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
    return h;
  }
  auto tag() const { return std::tie(step, fragment, checksum, rule); }
};

struct ElasticGroup::Quorum {
  std::vector<int> members, joiners, dropped;
  std::vector<std::int64_t> examples;  // per member
  std::vector<double> norms;           // per member: its pseudo-gradient's L2 norm
  std::vector<int> rejected;           // in step, but their contribution failed a check
  std::vector<std::string> reasons;    // why, per rejected member
  std::int64_t step = -1;
  int decided_by = -1;
  static Quorum from_json(const json& j) {
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
    return q;
  }
  json to_json() const {
    return {{"members", members}, {"joiners", joiners}, {"dropped", dropped},
            {"examples", examples}, {"norms", norms}, {"rejected", rejected}, {"reasons", reasons},
            {"step", step}, {"decided_by", decided_by}};
  }
};

namespace {

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

bool contains(const std::vector<int>& v, int x) { return std::find(v.begin(), v.end(), x) != v.end(); }

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

}  // namespace

ElasticGroup::ElasticGroup(ElasticOptions opts, std::ostream* log)
    : opts_(std::move(opts)), log_(log), store_(KeyStore::open(opts_.store)) {
  LC_CHECK(opts_.replicas >= 1 && opts_.replica >= 0 && opts_.replica < opts_.replicas, "elastic: replica ",
           opts_.replica, " of ", opts_.replicas);
  LC_CHECK(opts_.max_attempts >= 1, "elastic: max_attempts ", opts_.max_attempts);
  for (int i = 0; i < opts_.replicas; ++i) committed_.push_back(i);  // a run starts with all of them
}

ElasticGroup::~ElasticGroup() = default;

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

std::optional<ElasticGroup::Quorum> ElasticGroup::read_quorum(std::int64_t round) {
  const auto text = store_->find(key(round, "quorum"));
  if (!text) return std::nullopt;
  return Quorum::from_json(json::parse(*text));
}

std::int64_t ElasticGroup::first_open_round() {
  std::int64_t r = 0;
  while (store_->find(key(r, "quorum"))) ++r;
  return r;
}

bool ElasticGroup::run_finished() { return store_->find("finished").has_value(); }

void ElasticGroup::finished() { store_->create("finished", std::to_string(opts_.replica)); }

std::optional<ElasticGroup::Quorum> ElasticGroup::decide(std::int64_t round, const Hello& mine) {
  if (!store_->create(key(round, "hello." + std::to_string(opts_.replica)), mine.to_json().dump())) return std::nullopt;
  const auto t0 = std::chrono::steady_clock::now();
  std::map<int, Hello> here;
  std::vector<int> awaited = expected_;
  if (awaited.empty())
    for (int i = 0; i < opts_.replicas; ++i) awaited.push_back(i);
  for (;;) {
    if (auto q = read_quorum(round)) return *q;
    if (mine.joiner) {  // joiners never decide: the members do, when they come
      if (run_finished())
        throw RunFinished(detail::concat("replica ", opts_.replica, ": the run finished before it could rejoin"));
      LC_CHECK(since(t0) < opts_.join_wait_s, "elastic: replica ", opts_.replica, " waited ", opts_.join_wait_s,
               " s (elastic.join_wait_s) at round ", round, " and no member formed a quorum");
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;
    }
    for (int i = 0; i < opts_.replicas; ++i)
      if (!here.count(i))
        if (auto h = store_->find(key(round, "hello." + std::to_string(i)))) here.emplace(i, Hello::from_json(json::parse(*h)));
    const bool all_here = std::all_of(awaited.begin(), awaited.end(), [&](int i) { return here.count(i) > 0; });
    if (all_here || since(t0) >= opts_.join_timeout_s) {
      // The members in step: those sharing the most common (step, fragment, anchor, rule); ties go
      // to the later step, then to the lowest replica.
      std::map<std::tuple<std::int64_t, int, std::string, std::string>, int> votes;
      for (const auto& [i, h] : here)
        if (!h.joiner) ++votes[h.tag()];
      auto best = votes.begin();
      for (auto it = votes.begin(); it != votes.end(); ++it)
        if (it->second > best->second || (it->second == best->second && std::get<0>(it->first) > std::get<0>(best->first)))
          best = it;
      // The size of a contribution: the one most members in step send (ties to the smaller).
      std::map<std::int64_t, int> sizes;
      for (const auto& [i, h] : here)
        if (!h.joiner && h.tag() == best->first) ++sizes[h.size];
      const auto size = std::max_element(sizes.begin(), sizes.end(),
                                         [](const auto& a, const auto& b) { return a.second < b.second; })->first;
      Quorum q;
      q.decided_by = opts_.replica;
      q.step = std::get<0>(best->first);
      for (const auto& [i, h] : here) {
        if (h.joiner) {
          q.joiners.push_back(i);
        } else if (h.tag() == best->first) {
          if (std::string why = invalid(h, size); !why.empty()) {
            q.rejected.push_back(i);
            q.reasons.push_back(std::move(why));
            continue;
          }
          q.members.push_back(i);
          q.examples.push_back(h.examples);
          q.norms.push_back(h.norm);
        } else {
          q.dropped.push_back(i);
        }
      }
      store_->create(key(round, "quorum"), q.to_json().dump());  // the first decision stands
      continue;
    }
    pause();
  }
}

std::string ElasticGroup::invalid(const Hello& h, std::int64_t size) const {
  if (h.size != size) return detail::concat("its pseudo-gradient has ", h.size, " values, expected ", size);
  if (!h.finite) return "its pseudo-gradient is not finite";
  const std::int64_t most = opts_.max_local_steps * opts_.examples_per_step;
  if (h.examples < 1 || (most > 0 && h.examples > most))
    return detail::concat("it claims ", h.examples, " examples since its last sync, expected 1 to ",
                          most > 0 ? std::to_string(most) : "any", " (the longest period x examples per step)");
  return {};
}

void ElasticGroup::reduce(ReplicaSync& sync) {
  const auto t0 = std::chrono::steady_clock::now();
  LC_CHECK(store_ != nullptr, "elastic: no store");
  // What a retry starts again from.
  const std::vector<float> delta0(sync.delta.begin(), sync.delta.end());
  std::vector<std::vector<float>> state0;
  for (const StateTensor& s : sync.reducer_state) {
    LC_CHECK(s.device == Device::cpu, "elastic: reducer state '", s.name, "' on a device (elastic runs on the CPU)");
    state0.emplace_back(s.data.begin(), s.data.end());
  }
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
  std::string why;
  for (int attempt = 1;; ++attempt) {
    const std::int64_t round = round_++;
    const std::optional<Quorum> decided = decide(round, mine);
    if (!decided) {  // an earlier process of this replica announced itself here before it died
      why = detail::concat("replica ", opts_.replica, " had already announced itself in round ", round);
      LC_CHECK(attempt < opts_.max_attempts, "elastic: ", why, " (two processes with one replica id?)");
      continue;
    }
    const Quorum& q = *decided;
    const auto self = std::find(q.members.begin(), q.members.end(), opts_.replica);
    for (std::size_t j = 0; j < q.rejected.size(); ++j)
      if (q.rejected[j] == opts_.replica) {
        dropped_ = detail::concat("replica ", opts_.replica, " was left out of round ", round, " (the sync at step ",
                                  sync.step + 1, "): its contribution was rejected: ", q.reasons[j], "; restart it to rejoin");
        throw ReplicaDropped(dropped_);
      } else if (self != q.members.end()) {
        log(detail::concat("round ", round, ": replica ", q.rejected[j], " left out, its contribution was rejected: ",
                           q.reasons[j]));
      }
    if (self == q.members.end()) {
      dropped_ = detail::concat("replica ", opts_.replica, " was left out of round ", round, " (the sync at step ",
                                          q.step + 1, " of replicas ", list(q.members), "; this replica is at step ",
                                          sync.step + 1, contains(q.dropped, opts_.replica) ? ", its anchor or aggregation rule differs" : ", it came late",
                                          "): restart it to rejoin");
      throw ReplicaDropped(dropped_);
    }
    const int rank = static_cast<int>(self - q.members.begin()), size = static_cast<int>(q.members.size());
    const bool mean = opts_.aggregate.rule == Aggregate::mean;
    if (mean) {
      // The reducer averages over the quorum: weigh this replica's share by its examples over those
      // of the members kept (max_norm_ratio leaves out by the norms the hellos declared; one left
      // out sends zeros).
      use_.resize(q.members.size());
      std::iota(use_.begin(), use_.end(), std::size_t{0});
      keep_within_norm(q.norms, q.members, round);
      std::int64_t total = 0;
      for (std::size_t j : use_) total += q.examples[j];
      const double w = kept(rank) ? static_cast<double>(mine.examples) * size / static_cast<double>(total) : 0.0;
      if (w != 1.0)
        for (float& x : sync.delta) x *= static_cast<float>(w);
    }
    bool ok = false;
    try {
      GlooCommunicator comm(*store_, key(round, "gloo"), rank, size, {opts_.sync_timeout_s, opts_.address});
      if (mean) sync.reduce(comm);
      else gather_and_aggregate(comm, sync.delta, q.members, round);
      count(comm);
      ok = true;
    } catch (const Error& e) {
      why = e.what();
    }
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
    const std::string outcome = store_->find(key(round, "outcome")).value_or("retry");
    if (outcome == "commit") {
      LC_CHECK(ok, "elastic: round ", round, " committed without this replica's reduction");
      Membership m;
      m.round = round;
      m.step = sync.step;
      m.fragment = sync.fragment;
      m.attempts = attempt;
      m.members = q.members;
      m.joiners = q.joiners;
      std::vector<int> now = q.members;
      now.insert(now.end(), q.joiners.begin(), q.joiners.end());
      std::sort(now.begin(), now.end());
      // Left: in the last committed quorum (as member or joiner) but no member now; joined: the
      // joiners, who receive the state now and are members from the next sync on.
      for (int i : committed_)
        if (!contains(q.members, i)) m.left.push_back(i);
      m.joined = q.joiners;
      m.seconds = since(t0);
      // Left out by max_norm_ratio, its steps did not reach theta_global.
      m.contributed_steps = kept(rank) ? static_cast<double>(sync.local_steps) * sync.share : 0.0;
      if (!m.left.empty() || !m.joined.empty() || attempt > 1)
        log(detail::concat("sync at step ", sync.step + 1, " (round ", round, "): quorum ", list(q.members),
                           q.joiners.empty() ? "" : ", joining " + list(q.joiners),
                           m.left.empty() ? "" : ", left " + list(m.left),
                           attempt > 1 ? ", after " + std::to_string(attempt - 1) + " failed round(s)" : ""));
      expected_ = committed_ = now;
      std::lock_guard lock(mu_);
      history_.push_back(std::move(m));
      if (!q.joiners.empty() && rank == 0) donations_.push_back({round, q.joiners});
      return;
    }
    log(detail::concat("round ", round, " (sync at step ", sync.step + 1, ", replicas ", list(q.members),
                       ") failed: ", why.empty() ? "another member failed" : why, "; retrying with the replicas left"));
    LC_CHECK(attempt < opts_.max_attempts, "elastic: the sync at step ", sync.step + 1, " failed in ", attempt,
             " rounds (elastic.max_attempts): ", why);
    std::copy(delta0.begin(), delta0.end(), sync.delta.begin());
    for (std::size_t i = 0; i < state0.size(); ++i)
      std::copy(state0[i].begin(), state0[i].end(), sync.reducer_state[i].data.begin());
    expected_ = q.members;  // wait for those that were in step, not for the ones that failed
  }
}

std::optional<std::string> ElasticGroup::join(const std::string& checkpoint_root) {
  std::int64_t round = first_open_round();
  bool committed = false;
  for (std::int64_t r = 0; r < round && !committed; ++r) committed = store_->find(key(r, "outcome")) == "commit";
  if (!committed) {
    round_ = round;
    return std::nullopt;
  }
  if (run_finished())
    throw RunFinished(detail::concat("replica ", opts_.replica, ": the run finished before it could rejoin"));
  const auto t0 = std::chrono::steady_clock::now();
  Hello mine;
  mine.replica = opts_.replica;
  mine.joiner = true;
  for (;;) {
    LC_CHECK(since(t0) < opts_.join_wait_s, "elastic: replica ", opts_.replica, " could not join within ",
             opts_.join_wait_s, " s (elastic.join_wait_s)");
    const std::optional<Quorum> decided = decide(round, mine);
    if (!decided) {  // this replica's earlier process announced itself here before it died
      round = std::max(round + 1, first_open_round());
      continue;
    }
    const Quorum& q = *decided;
    const auto self = std::find(q.joiners.begin(), q.joiners.end(), opts_.replica);
    if (self == q.joiners.end()) {  // decided before this replica's hello arrived
      round = std::max(round + 1, first_open_round());
      continue;
    }
    const auto outcome = store_->wait(key(round, "outcome"), opts_.join_wait_s);
    if (outcome != "commit") {
      round = std::max(round + 1, first_open_round());
      continue;
    }
    log(detail::concat("joining at round ", round, " (after the sync at step ", q.step + 1, ", from replica ",
                       q.members.front(), ")"));
    GlooCommunicator comm(*store_, key(round, "join"), 1 + static_cast<int>(self - q.joiners.begin()),
                          1 + static_cast<int>(q.joiners.size()), {opts_.join_wait_s, opts_.address});
    std::uint64_t bytes = 0;
    comm.broadcast(&bytes, sizeof bytes, 0);
    std::string blob(bytes, '\0');
    comm.broadcast(blob.data(), blob.size(), 0);
    count(comm);
    const std::string dir = unpack_dir(blob, checkpoint_root);
    round_ = round + 1;
    expected_ = q.members;
    expected_.insert(expected_.end(), q.joiners.begin(), q.joiners.end());
    std::sort(expected_.begin(), expected_.end());
    committed_ = expected_;
    return dir;
  }
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
    std::string blob = pack_dir(checkpoint_dir);
    GlooCommunicator comm(*store_, key(round, "join"), 0, 1 + static_cast<int>(to.size()),
                          {opts_.sync_timeout_s, opts_.address});
    std::uint64_t bytes = blob.size();
    comm.broadcast(&bytes, sizeof bytes, 0);
    comm.broadcast(blob.data(), blob.size(), 0);
    count(comm);
    log(detail::concat("sent the state of ", checkpoint_dir, " (", bytes, " bytes) to replica(s) ", list(to)));
  } catch (const std::exception& e) {
    log(detail::concat("could not send the state to replica(s) ", list(to), ": ", e.what(),
                       " (they will time out and be restarted)"));
  }
}

}  // namespace laconic
