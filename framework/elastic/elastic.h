// Elastic periodic training: replicas (processes) that leave and rejoin between outer syncs.
//
// Each replica is an ordinary run (its ranks, its own communicator and run directory) of a
// periodic strategy; only the outer sync crosses replicas, over a gloo communicator that
// ElasticGroup forms anew at every sync from the replicas alive (collectives/gloo). `trainer
// elastic` (framework/cli) starts and restarts the processes. Rendezvous is a KeyStore (a folder,
// or redis) and needs no coordinator: every decision is a set-once key that the first writer wins.
// Invariants: a sync needs elastic.min_quorum replicas, so a minority never trains on as the run;
// a member whose anchor differs from the majority's is dropped, so the members of a committed sync
// leave it with one theta_global.
// The protocol (the store's keys round by round, retries, joining, recovery, aggregation):
// docs/elastic.md "Inside a sync: the store's keys"; the guarantees and their tests:
// docs/reliability.md "Guarantees".
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <ostream>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "collectives/gloo/key_store.h"
#include "collectives/transport.h"
#include "framework/elastic/aggregate.h"
#include "framework/elastic/quorum.h"
#include "framework/sync/replica_group.h"

namespace laconic {

struct ElasticOptions {
  int replica = 0;   // this replica's id, 0..replicas-1 (its shard of the data)
  int replicas = 1;  // how many the run has when all are alive
  StoreSpec store;   // where the replicas meet
  double join_timeout_s = 10;  // a quorum waits this long for replicas that have not arrived
  double sync_timeout_s = 30;  // connecting and each reduction step, and the members' verdicts
  double join_wait_s = 600;    // how long a joiner waits for a round to admit it and its state
  int max_attempts = 3;        // rounds one sync may take before it fails
  std::string address = "127.0.0.1";  // where this replica's gloo ranks listen
  int streams = 1;                    // TCP connections per pair of replicas (distributed.streams)
  std::int64_t examples_per_step = 1; // this replica's examples per optimizer step
  // The most inner steps between two syncs (the longest period): a member claiming more than
  // max_local_steps x examples_per_step examples is dropped. 0: no bound.
  std::int64_t max_local_steps = 0;
  AggregateOptions aggregate;         // how the members' pseudo-gradients are combined
  // Replicas a sync needs (its members and joiners): fewer never train on as the run. 0: a
  // majority of `replicas`.
  int min_quorum = 0;
  // The replicas' shared secret ("": none): the store is signed (collectives/gloo/signed_store.h)
  // and a donated state carries its HMAC (state_transfer.h).
  std::string secret;
  // The most bytes a donated state may declare (0: no bound): more is refused before allocating.
  std::uint64_t max_state_bytes = 0;
  // Whether this replica was asked to stop (a signal; null: never). A replica asked to stop does
  // not wait at a sync for a quorum that is not there: the others stopped before it (a supervisor
  // signals every replica at once, and a faster one may already be at the next sync).
  std::function<bool()> stop_requested;
};

// A replica's newest checkpoint of this run, as a restarted replica offers it for recovery.
struct HeldCheckpoint {
  std::string dir;
  std::int64_t step = 0;
  std::string theta_global;  // the checksum of its theta_global (every fragment's anchor)
};

// This replica is no longer part of the run (it was left out of a quorum): restart it to rejoin.
struct ReplicaDropped : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// One committed outer sync as every member saw it.
struct Membership {
  std::int64_t round = 0, step = 0;
  int fragment = 0;
  int attempts = 1;                    // rounds it took (a retry each after the first)
  std::vector<int> members, joiners;   // joiners receive the state after this sync
  std::vector<int> joined;             // the joiners (members from the next sync on)
  std::vector<int> left;               // in the previous committed quorum, not a member now
  double seconds = 0;                  // waiting for the quorum, reducing, agreeing
  // This replica's inner steps that reached theta_global here (a fragment's sync: its share of them).
  double contributed_steps = 0;
};

class ElasticGroup final : public ReplicaGroup {
 public:
  explicit ElasticGroup(ElasticOptions opts, std::ostream* log = nullptr);
  ~ElasticGroup() override;

  // For a (re)starting replica, before training: if the run has committed a sync, or this replica
  // holds a checkpoint of it (`held`), joins at the next round: either live members admit it and
  // the donor's checkpoint is written under `checkpoint_root` (step-N), or no member is alive and
  // the replicas here recover (below). Returns the directory to resume from; nullopt: start from
  // the beginning as a member (the run has not synced, or it recovered with no checkpoint).
  std::optional<std::string> join(const std::string& checkpoint_root, const std::optional<HeldCheckpoint>& held = {});

  void reduce(ReplicaSync& sync) override;

  // After a step whose sync admitted joiners, on the donor's rank 0: the checkpoint directory to
  // send (written by every rank of this replica); failures to send are logged, not thrown.
  bool donation_pending() const;
  void donate(const std::string& checkpoint_dir);
  // This replica trained to the end: a replica waiting to join learns the run is over.
  void finished();

  // The committed syncs from the `from`-th on (a copy: with overlapped syncs the communication
  // thread appends while the step loop reads), how many there are, and the last one's quorum size.
  std::vector<Membership> history(std::size_t from = 0) const;
  std::size_t syncs() const;
  int last_quorum_size() const;
  const ElasticOptions& options() const { return opts_; }
  // Why this replica was dropped ("" while it is in the run): the world of its ranks reports the
  // failure as its own error, so the trainer rethrows ReplicaDropped from this.
  const std::string& dropped() const { return dropped_; }
  // Every byte this replica's gloo groups moved (reductions, state sent or received).
  ByteCounters bytes() const { return {sent_.load(), recv_.load(), messages_.load()}; }

 private:
  using Hello = elastic::Hello;
  using Quorum = elastic::Quorum;
  void count(const Transport& t);
  void donate(const std::string& checkpoint_dir, std::int64_t round, const std::vector<int>& to);
  std::string key(std::int64_t round, const std::string& what) const;
  // This replica's hello at a sync.
  Hello hello_of(const ReplicaSync& sync) const;

  // ---- one round of a sync (reduce)
  struct Attempt {
    std::int64_t round = 0;
    int number = 1;  // 1: the sync's first round
    int rank = 0;    // this replica's row in the quorum
    std::chrono::steady_clock::time_point t0;  // when the sync began
  };
  // Whether `decided` is a round this replica cannot act on (its slot taken, its key void): says
  // why, and fails the sync once it has taken max_attempts rounds.
  bool unusable(const std::optional<Quorum>& decided, std::int64_t round, int attempt, std::string& why) const;
  // This replica's row in q; throws ReplicaDropped when it is not a member.
  int take_seat(const Quorum& q, std::int64_t round, const ReplicaSync& sync);
  // Reduces sync.delta over q's members; false (and why) when the collective failed.
  bool reduce_in(const Quorum& q, const Attempt& a, std::int64_t examples, ReplicaSync& sync, std::string& why);
  // mean: scales delta by this replica's weight among the members kept.
  void weigh(const Quorum& q, const Attempt& a, std::int64_t examples, std::span<float> delta);
  // The round's outcome ("commit" or "retry"): it commits when every member confirmed its reduction.
  std::string outcome(const Quorum& q, std::int64_t round, bool ok, std::string& why);
  // Records a committed round (history, membership, donations) and moves the head.
  void commit(const Quorum& q, const Attempt& a, const ReplicaSync& sync);

  // ---- joining (join)
  // Enters the run after `round` (its quorum q): the next round, whom it waits for, the heartbeat.
  void enter(const Quorum& q, std::int64_t round);
  // A recovery quorum's member: resumes from its own checkpoint (nullopt: from the beginning).
  std::optional<std::string> recover(const Quorum& q, std::int64_t round, const std::optional<HeldCheckpoint>& held);
  // A joiner admitted at `round`: receives the first member's state under `root`; its directory.
  std::string receive(const Quorum& q, std::int64_t round, int index, const std::string& root);

  // ---- deciding a round (quorum.h decides; these read and write the store)
  // Whether the member at `row` of the quorum is in use_ (its contribution is in the aggregate).
  bool kept(int row) const;
  // Removes from use_ (rows of norms) the members above elastic.max_norm_ratio x the median of
  // their norms, one log line each; nothing without it.
  void keep_within_norm(std::span<const double> norms, const std::vector<int>& members, std::int64_t round);
  // trimmed_mean and median: every member's pseudo-gradient over comm, checked, combined
  // into delta (the same bits on every member).
  void gather_and_aggregate(Communicator& comm, std::span<float> delta, const std::vector<int>& members,
                            std::int64_t round);
  // Announces `mine` at `round` and returns the round's quorum; nullopt when this replica's slot
  // in the round was taken (an earlier process of the same replica announced itself there).
  std::optional<Quorum> decide(std::int64_t round, const Hello& mine);
  // A member's round: waits for the members expected, then proposes their quorum.
  Quorum member_round(std::int64_t round);
  // A minority's wait for min_quorum: fails when asked to stop or after join_wait_s; says it once.
  void wait_for_min_quorum(std::int64_t round, const Quorum& q, double waited_s, bool& said);
  // A joiner's round: waits for a quorum to admit it, or forms a recovery one when no member lives.
  Quorum joiner_round(std::int64_t round);
  // Whether a replica not here as a joiner has a live heartbeat.
  bool member_alive(const elastic::Hellos& here, elastic::Heartbeats& beats);
  bool run_finished();
  std::optional<Quorum> read_quorum(std::int64_t round);
  // The hellos of `round` not yet in `here` (one that does not parse is left out, said once).
  void read_hellos(std::int64_t round, std::map<int, Hello>& here);
  // Says once that the store's key was ignored and why.
  void ignored(const std::string& key, const std::string& why);
  // The newest committed round as the store's "head" says (-1: none), and the first round after it
  // without a quorum.
  std::int64_t head();
  std::int64_t first_open_round();
  // After committing `round`: the head moves to it and, on the quorum's first member, rounds older
  // than a few syncs are removed (the store's size stays bounded).
  void committed(std::int64_t round, bool pruner);
  // A thread that puts "alive.I" every second while this replica trains (its value changes: a
  // replica in recovery tells a live member, which may be mid-period, from a dead one).
  void beat();
  void log(const std::string& line) const;

  ElasticOptions opts_;
  elastic::Rules rules_;  // opts_ as the quorum's decisions take them
  std::ostream* log_;
  std::unique_ptr<KeyStore> store_;
  // The heartbeat: its own store handle (a store serves one thread), started once training starts.
  std::thread beat_;
  std::mutex beat_mu_;
  std::condition_variable beat_cv_;
  bool beat_stop_ = false;
  std::int64_t pruned_to_ = 0;       // rounds below this were removed (by this replica)
  std::map<std::string, bool> warned_;  // store keys that did not parse, said once each
  std::int64_t round_ = 0;           // the next round this replica takes part in
  std::vector<int> expected_;        // whom the next round waits for
  std::vector<int> committed_;       // the last committed quorum's members and joiners
  mutable std::mutex mu_;            // history_ and donations_: written where the sync runs
  std::vector<Membership> history_;
  // Reused by every sync: the gathered pseudo-gradients (trimmed_mean, median), the rows used,
  // each member's norm, the aggregators' scratch.
  std::vector<float> gathered_;
  std::vector<std::size_t> use_;
  std::vector<double> norms_, scratch_;

  std::string dropped_;
  // Committed rounds whose joiners await this replica's state (added where the sync ran: with
  // overlap, the communication thread; taken by the step loop).
  struct Donation {
    std::int64_t round;
    std::vector<int> to;
  };
  std::vector<Donation> donations_;
  std::atomic<std::uint64_t> sent_{0}, recv_{0}, messages_{0};
};

}  // namespace laconic
