// The elastic quorum's decisions as pure functions of what the replicas announced at a round (their
// hellos): who is in, who is left out and why, when a minority waits, who recovers from which
// checkpoint and who sends the state. ElasticGroup (elastic.h) reads and writes the store and acts
// on these; they take plain data, so tests/elastic/quorum_test.cpp checks them table by table.
// The protocol around them: docs/elastic.md "Inside a sync: the store's keys".
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <vector>

namespace laconic::elastic {

// A replica's announcement at a round (the store's round.R.hello.I).
struct Hello {
  int replica = 0;
  bool joiner = false;
  std::int64_t step = -1;
  int fragment = 0;
  std::string checksum;  // its anchor's (theta_global of the fragment)
  std::string rule;  // the aggregation rule: members must share it (the same collective, the same result)
  std::int64_t examples = 0;
  std::int64_t size = 0;  // the contribution: its values, whether all are finite, its L2 norm
  bool finite = true;
  double norm = 0;
  // A joiner's newest checkpoint of the run (its theta_global's checksum; "" none): `step` is its step.
  std::string held;
  // What members in step share.
  auto tag() const { return std::tie(step, fragment, checksum, rule); }
};

using Hellos = std::map<int, Hello>;  // by replica

// A round's decision (the store's round.R.quorum).
struct Quorum {
  std::vector<int> members, joiners, dropped;
  std::vector<std::int64_t> examples;  // per member
  std::vector<double> norms;           // per member: its pseudo-gradient's L2 norm
  std::vector<int> rejected;           // in step, but their contribution failed a check
  std::vector<std::string> reasons;    // why, per rejected member
  std::int64_t step = -1;
  int decided_by = -1;
  // Formed by replicas that found no live member: the members hold the checkpoint chosen and resume
  // from it, the joiners receive it now; no reduction (it commits as it is written).
  bool recovery = false;
  bool void_round = false;  // its key did not parse (not stored): the round is skipped
};

// What the decisions depend on (ElasticOptions, min_quorum resolved).
struct Rules {
  int replicas = 1;
  int min_quorum = 1;           // replicas (members and joiners) a quorum needs
  double join_timeout_s = 10;   // how long a round waits for replicas that have not arrived
  std::int64_t max_examples = 0;  // the most examples a member may claim (0: no bound)
};

// ---- a round of members (a sync)

// Whom a member's round waits for: `expected` (the last committed quorum, or the members in step
// at a failed round), or every replica when nothing is expected.
std::vector<int> awaited(const std::vector<int>& expected, int replicas);

// Why a member's contribution cannot be combined ("" when it can): `size` is the values most
// members in step send.
std::string invalid(const Hello& h, std::int64_t size, std::int64_t max_examples);

// The quorum of the hellos `here`: the members in step share the (step, fragment, anchor, rule)
// most of them announced (ties to the later step, then to the smallest such tuple: the first in
// its order); of those, the ones whose contribution fails a check are rejected, the others are
// dropped; every joiner is admitted. No member hello: no members and step -1.
Quorum vote(const Hellos& here, std::int64_t max_examples, int decided_by);

// Members and joiners of q: its size as min_quorum counts it.
int headcount(const Quorum& q);

// Whether q may go on as the run: it has a member and min_quorum replicas. Fewer never train on as
// the run (another part of it may be going on without them).
bool quorate(const Quorum& q, int min_quorum);

// What a member does at a round it has waited `waited_s` for.
enum class Verdict {
  wait,     // an awaited replica has not announced itself and join_timeout_s has not passed
  decide,   // propose `quorum` (the first proposal stored stands)
  too_few,  // `quorum` is a minority: wait for more, up to join_wait_s
};
struct Decision {
  Verdict verdict = Verdict::wait;
  Quorum quorum;
};
Decision decide_members(const Hellos& here, const std::vector<int>& awaited, double waited_s, const Rules& rules,
                        int decided_by);

// Where a replica stands in a member round's quorum.
enum class Seat {
  member,    // in it, at row `rank`
  rejected,  // in step, its contribution failed a check (`reason`)
  dropped,   // its anchor or aggregation rule differs from the members'
  late,      // not in it: its hello came after the decision
};
struct Place {
  Seat seat = Seat::late;
  int rank = -1;
  std::string reason;
};
Place place_of(const Quorum& q, int replica);

// A member's weight in the quorum's examples-weighted mean: its examples times the members over
// the examples of the rows `kept` (one entry of `examples` per member); 0 when its row is left out.
double mean_weight(std::span<const std::int64_t> examples, std::span<const std::size_t> kept, int row,
                   std::int64_t mine);

// ---- membership after a committed quorum

// Everyone in the run from the next round on: the members and joiners, sorted.
std::vector<int> everyone(const Quorum& q);
// In the last committed quorum (`committed`: members and joiners) but no member of q.
std::vector<int> left(const std::vector<int>& committed, const Quorum& q);
// Whether `replica` sends q's state to its joiners (the first member does; none when none join).
bool donates(const Quorum& q, int replica);

// ---- a round of joiners (a restarted replica)

// Whether joiners may form a recovery quorum now: every replica is here as a joiner, or
// join_timeout_s has passed with no live member (a member's hello whose heartbeat stopped is a
// process that died in this round).
bool may_recover(const Hellos& here, double waited_s, bool member_alive, const Rules& rules);

// The recovery quorum of the joiners here (nullopt: fewer than min_quorum): the theta_global most of
// them hold as their newest checkpoint (ties to the later step, then to the smallest checksum) is
// the run's; its holders are the members and resume from their own checkpoints (their steps may
// differ within a period: they hold the same theta_global, so they sync at the same step), the
// other joiners receive the first member's. When none holds a checkpoint, all are members from the
// beginning (step -1).
std::optional<Quorum> recovery(const Hellos& here, int min_quorum, int decided_by);

// A joiner's round: the recovery quorum to propose, when one may be formed now.
std::optional<Quorum> decide_joiners(const Hellos& here, double waited_s, bool member_alive, const Rules& rules,
                                     int decided_by);

// What a joiner does with a round's quorum.
enum class JoinSeat {
  recovers,  // a recovery's member: resumes from its own checkpoint
  receives,  // a joiner: receives the state of the first member, as rank 1 + `index` of the transfer
  retries,   // not in it (decided before its hello arrived, or void): the next round
};
struct JoinPlace {
  JoinSeat seat = JoinSeat::retries;
  int index = -1;
};
JoinPlace join_place_of(const Quorum& q, int replica);

// Which replicas are alive, from their heartbeats (the store's alive.I, a value that changes every
// second while a replica trains): one is alive while its value changed within the timeout; one
// first seen counts as changed then.
class Heartbeats {
 public:
  using Clock = std::chrono::steady_clock;
  // Notes `value`, replica's heartbeat read at `now`; whether it is alive.
  bool alive(int replica, std::optional<std::string> value, Clock::time_point now, double timeout_s);

 private:
  std::map<int, std::pair<std::optional<std::string>, Clock::time_point>> seen_;
};

}  // namespace laconic::elastic
