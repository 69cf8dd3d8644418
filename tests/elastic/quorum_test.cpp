// The elastic quorum's decisions (framework/elastic/quorum.h) table by table, without a store: each
// row is what the replicas announced at a round and the decision expected. Members in step and
// those dropped or rejected, ties, a minority waiting for min_quorum, a joiner admitted, recovery's
// choice of checkpoint and of who sends the state, heartbeats telling a live member from a dead one.
#include <gtest/gtest.h>

#include <chrono>
#include <ostream>
#include <optional>
#include <string>
#include <vector>

#include "framework/elastic/quorum.h"

namespace laconic::elastic {
namespace {

using Ints = std::vector<int>;

// A member at `step` with the anchor `anchor`: 4 examples, 8 finite values of norm 1, rule mean.
Hello member(int replica, std::int64_t step = 10, std::string anchor = "aa") {
  Hello h;
  h.replica = replica;
  h.step = step;
  h.checksum = std::move(anchor);
  h.rule = "mean";
  h.examples = 4;
  h.size = 8;
  h.norm = 1;
  return h;
}

// A joiner holding the checkpoint of theta_global `held` at `step` ("": none).
Hello joiner(int replica, std::string held = "", std::int64_t step = -1) {
  Hello h;
  h.replica = replica;
  h.joiner = true;
  h.held = std::move(held);
  h.step = step;
  return h;
}

Hello sized(Hello h, std::int64_t size) { return h.size = size, h; }
Hello not_finite(Hello h) { return h.finite = false, h; }
Hello claiming(Hello h, std::int64_t examples) { return h.examples = examples, h; }
Hello ruled(Hello h, std::string rule) { return h.rule = std::move(rule), h; }
Hello fragment(Hello h, int f) { return h.fragment = f, h; }
Hello normed(Hello h, double norm) { return h.norm = norm, h; }

Hellos of(const std::vector<Hello>& hs) {
  Hellos here;
  for (const Hello& h : hs) here.emplace(h.replica, h);
  return here;
}

// A row's name names its case, and is what gtest prints of it (not its bytes).
template <class Row>
std::string row_name(const testing::TestParamInfo<Row>& info) {
  return info.param.name;
}

template <class Row>
  requires requires(const Row& r) { r.name; }
void PrintTo(const Row& row, std::ostream* os) {
  *os << row.name;
}

// ---- vote: who is in step, dropped, rejected

struct VoteRow {
  std::string name;
  std::vector<Hello> here;
  std::int64_t max_examples;
  Ints members, joiners, dropped, rejected;
  std::int64_t step;
  std::vector<std::string> reasons;
};

class QuorumVote : public testing::TestWithParam<VoteRow> {};

TEST_P(QuorumVote, Decides) {
  const VoteRow& r = GetParam();
  const Quorum q = vote(of(r.here), r.max_examples, /*decided_by=*/7);
  EXPECT_EQ(q.members, r.members);
  EXPECT_EQ(q.joiners, r.joiners);
  EXPECT_EQ(q.dropped, r.dropped);
  EXPECT_EQ(q.rejected, r.rejected);
  EXPECT_EQ(q.reasons, r.reasons);
  EXPECT_EQ(q.step, r.step);
  EXPECT_EQ(q.decided_by, 7);
  EXPECT_FALSE(q.recovery);
  // One example count and norm per member, in the members' order.
  ASSERT_EQ(q.examples.size(), q.members.size());
  ASSERT_EQ(q.norms.size(), q.members.size());
  const Hellos here = of(r.here);
  for (std::size_t j = 0; j < q.members.size(); ++j) {
    const Hello& h = here.at(q.members[j]);
    EXPECT_EQ(q.examples[j], h.examples);
    EXPECT_EQ(q.norms[j], h.norm);
  }
}

const std::string kWrongSize = "its pseudo-gradient has 5 values, expected 8";

INSTANTIATE_TEST_SUITE_P(
    Rows, QuorumVote,
    testing::Values(
        VoteRow{"AllInStep", {member(0), member(1), member(2)}, 0, {0, 1, 2}, {}, {}, {}, 10, {}},
        VoteRow{"AStaleAnchorIsDropped", {member(0), member(1), member(2, 5, "old")}, 0, {0, 1}, {}, {2}, {}, 10, {}},
        VoteRow{"AMajorityBehindBeatsOneAhead", {member(0), member(1), member(2, 12, "new")}, 0, {0, 1}, {}, {2}, {},
                10, {}},
        VoteRow{"ATieGoesToTheLaterStep", {member(0, 10, "zz"), member(1, 12, "aa")}, 0, {1}, {}, {0}, {}, 12, {}},
        // At one step the first tag in (fragment, anchor, rule) order wins: here replica 1's.
        VoteRow{"ATieAtOneStepGoesToTheSmallerAnchor", {member(0, 10, "bb"), member(1, 10, "aa")}, 0, {1}, {}, {0},
                {}, 10, {}},
        VoteRow{"ATieAtOneStepGoesToTheLowerFragment", {fragment(member(0), 1), fragment(member(1), 0)}, 0, {1}, {},
                {0}, {}, 10, {}},
        VoteRow{"AnotherRuleIsDropped", {member(0), member(1), ruled(member(2), "median")}, 0, {0, 1}, {}, {2}, {},
                10, {}},
        VoteRow{"JoinersAreAdmittedAndDoNotVote", {member(0, 4, "x"), joiner(1, "y", 9), joiner(2)}, 0, {0}, {1, 2},
                {}, {}, 4, {}},
        VoteRow{"TheWrongSizeIsRejected", {member(0), member(1), sized(member(2), 5)}, 0, {0, 1}, {}, {}, {2}, 10,
                {kWrongSize}},
        // One each of 8 and 5 values: the smaller size is the one expected.
        VoteRow{"ASizeTieGoesToTheSmaller", {member(0), sized(member(1), 5)}, 0, {1}, {}, {}, {0}, 10,
                {"its pseudo-gradient has 8 values, expected 5"}},
        VoteRow{"NotFiniteIsRejected", {member(0), not_finite(member(1))}, 0, {0}, {}, {}, {1}, 10,
                {"its pseudo-gradient is not finite"}},
        VoteRow{"TooManyExamplesAreRejected", {member(0), claiming(member(1), 9)}, 8, {0}, {}, {}, {1}, 10,
                {"it claims 9 examples since its last sync, expected 1 to 8 (the longest period x examples per step)"}},
        VoteRow{"AsManyExamplesAsThePeriodAllowsAreKept", {member(0), claiming(member(1), 8)}, 8, {0, 1}, {}, {}, {},
                10, {}},
        VoteRow{"ZeroExamplesAreRejectedEvenWithoutABound", {member(0), claiming(member(1), 0)}, 0, {0}, {}, {}, {1}, 10,
                {"it claims 0 examples since its last sync, expected 1 to any (the longest period x examples per "
                 "step)"}},
        VoteRow{"ADroppedMemberIsNotCheckedForSize", {member(0), member(1), sized(member(2, 3, "old"), 5)}, 0,
                {0, 1}, {}, {2}, {}, 10, {}},
        VoteRow{"NoMemberHelloLeavesNoMembers", {joiner(0), joiner(1)}, 0, {}, {0, 1}, {}, {}, -1, {}},
        VoteRow{"ExamplesAndNormsFollowTheMembers", {claiming(normed(member(1), 3), 2), claiming(member(3), 6)}, 0,
                {1, 3}, {}, {}, {}, 10, {}}),
    row_name<VoteRow>);

// ---- decide_members: when a member's round decides, and when a minority waits

struct MemberRow {
  std::string name;
  std::vector<Hello> here;
  Ints awaited;
  double waited_s;
  int min_quorum;
  Verdict verdict;
  Ints members;  // when it decides or waits for more
};

class QuorumMembers : public testing::TestWithParam<MemberRow> {};

TEST_P(QuorumMembers, Decides) {
  const MemberRow& r = GetParam();
  const Rules rules{.replicas = 3, .min_quorum = r.min_quorum, .join_timeout_s = 1, .max_examples = 0};
  const Decision d = decide_members(of(r.here), r.awaited, r.waited_s, rules, 0);
  EXPECT_EQ(d.verdict, r.verdict);
  if (d.verdict != Verdict::wait) {
    EXPECT_EQ(d.quorum.members, r.members);
  }
  EXPECT_EQ(d.verdict == Verdict::decide, d.verdict != Verdict::wait && quorate(d.quorum, r.min_quorum));
}

INSTANTIATE_TEST_SUITE_P(
    Rows, QuorumMembers,
    testing::Values(
        MemberRow{"EveryoneAwaitedIsHere", {member(0), member(1), member(2)}, {0, 1, 2}, 0, 2, Verdict::decide,
                  {0, 1, 2}},
        MemberRow{"OneAwaitedIsMissingWithinTheTimeout", {member(0), member(1)}, {0, 1, 2}, 0.5, 2, Verdict::wait, {}},
        MemberRow{"OneAwaitedIsMissingAfterTheTimeout", {member(0), member(1)}, {0, 1, 2}, 1.0, 2, Verdict::decide,
                  {0, 1}},
        // Awaited are the last quorum's: a replica that left is not waited for.
        MemberRow{"OnlyTheAwaitedAreWaitedFor", {member(0), member(2)}, {0, 2}, 0, 2, Verdict::decide, {0, 2}},
        MemberRow{"AMinorityWaits", {member(0)}, {0, 1, 2}, 5, 2, Verdict::too_few, {0}},
        MemberRow{"AMinorityWhenAllAwaitedCame", {member(0)}, {0}, 0, 2, Verdict::too_few, {0}},
        MemberRow{"OneMaySyncAloneWhenAllowed", {member(0)}, {0, 1, 2}, 5, 1, Verdict::decide, {0}},
        MemberRow{"AJoinerCountsTowardsTheQuorum", {member(0), joiner(2)}, {0, 1, 2}, 5, 2, Verdict::decide, {0}},
        // Rejected and dropped members do not count: one member in step is a minority of 3.
        MemberRow{"RejectedMembersDoNotCount", {member(0), member(1), not_finite(member(2))}, {0, 1, 2}, 0, 3,
                  Verdict::too_few, {0, 1}},
        MemberRow{"DroppedMembersDoNotCount", {member(0), member(1), member(2, 4, "old")}, {0, 1, 2}, 0, 3,
                  Verdict::too_few, {0, 1}},
        MemberRow{"JoinersAloneNeverGoOn", {not_finite(member(0)), joiner(1), joiner(2)}, {0, 1, 2}, 0, 2,
                  Verdict::too_few, {}}),
    row_name<MemberRow>);

TEST(QuorumMembers, AwaitedIsTheExpectedOrEveryReplica) {
  EXPECT_EQ(awaited({}, 3), (Ints{0, 1, 2}));
  EXPECT_EQ(awaited({1, 2}, 3), (Ints{1, 2}));
}

// ---- place_of: where a replica stands in a member round's quorum

Quorum decided(Ints members, Ints dropped = {}, Ints rejected = {}, Ints joiners = {}) {
  Quorum q;
  q.members = std::move(members);
  q.dropped = std::move(dropped);
  q.rejected = std::move(rejected);
  for (int i : q.rejected) q.reasons.push_back("reason " + std::to_string(i));
  q.joiners = std::move(joiners);
  q.examples.assign(q.members.size(), 1);
  q.norms.assign(q.members.size(), 1);
  return q;
}

struct PlaceRow {
  std::string name;
  Quorum q;
  int replica;
  Seat seat;
  int rank;
  std::string reason;
};

class QuorumPlace : public testing::TestWithParam<PlaceRow> {};

TEST_P(QuorumPlace, Is) {
  const PlaceRow& r = GetParam();
  const Place p = place_of(r.q, r.replica);
  EXPECT_EQ(p.seat, r.seat);
  EXPECT_EQ(p.rank, r.rank);
  EXPECT_EQ(p.reason, r.reason);
}

INSTANTIATE_TEST_SUITE_P(Rows, QuorumPlace,
                         testing::Values(PlaceRow{"TheFirstMember", decided({1, 3}), 1, Seat::member, 0, ""},
                                         PlaceRow{"TheSecondMember", decided({1, 3}), 3, Seat::member, 1, ""},
                                         PlaceRow{"Rejected", decided({0}, {}, {2, 4}), 4, Seat::rejected, -1,
                                                  "reason 4"},
                                         PlaceRow{"Dropped", decided({0, 1}, {2}), 2, Seat::dropped, -1, ""},
                                         PlaceRow{"Late", decided({0, 1}, {2}), 3, Seat::late, -1, ""}),
                         row_name<PlaceRow>);

// ---- mean_weight: a member's share of the examples-weighted mean

struct WeightRow {
  std::string name;
  std::vector<std::int64_t> examples;
  std::vector<std::size_t> kept;
  int row;
  std::int64_t mine;
  double weight;
};

class QuorumWeight : public testing::TestWithParam<WeightRow> {};

TEST_P(QuorumWeight, Is) {
  const WeightRow& r = GetParam();
  EXPECT_DOUBLE_EQ(mean_weight(r.examples, r.kept, r.row, r.mine), r.weight);
}

INSTANTIATE_TEST_SUITE_P(
    Rows, QuorumWeight,
    testing::Values(WeightRow{"EqualShares", {4, 4, 4}, {0, 1, 2}, 1, 4, 1.0},
                    // 1, 1 and 2 examples: the third counts twice (3 x 2 / 4).
                    WeightRow{"TwiceTheExamples", {1, 1, 2}, {0, 1, 2}, 2, 2, 1.5},
                    WeightRow{"HalfTheExamples", {1, 1, 2}, {0, 1, 2}, 0, 1, 0.75},
                    WeightRow{"TwoMembers", {1, 3}, {0, 1}, 1, 3, 1.5},
                    // Row 2 left out by max_norm_ratio: the others' examples only (the reducer
                    // still averages over all 3, the one left out sending zeros).
                    WeightRow{"OverTheRowsKept", {1, 3, 100}, {0, 1}, 0, 1, 0.75},
                    WeightRow{"ARowLeftOutSendsZeros", {1, 3, 100}, {0, 1}, 2, 100, 0.0}),
    row_name<WeightRow>);

// ---- after a commit: everyone, who left, who sends the state

TEST(QuorumMembership, EveryoneIsTheMembersAndJoinersSorted) {
  EXPECT_EQ(everyone(decided({0, 3}, {}, {}, {2, 1})), (Ints{0, 1, 2, 3}));
  EXPECT_EQ(everyone(decided({})), Ints{});
}

TEST(QuorumMembership, LeftAreTheCommittedThatAreNoMembersNow) {
  EXPECT_EQ(left({0, 1, 2}, decided({0, 2})), (Ints{1}));
  EXPECT_EQ(left({0, 1, 2}, decided({0, 1, 2})), Ints{});
  // 3 was in the last quorum and joins now (its process died and came back): it left too.
  EXPECT_EQ(left({0, 1, 2, 3}, decided({0, 1}, {}, {}, {3})), (Ints{2, 3}));
}

TEST(QuorumMembership, TheFirstMemberSendsTheStateWhenSomeoneJoins) {
  EXPECT_TRUE(donates(decided({1, 2}, {}, {}, {0}), 1));
  EXPECT_FALSE(donates(decided({1, 2}, {}, {}, {0}), 2));
  EXPECT_FALSE(donates(decided({1, 2}), 1));  // nobody joins
  EXPECT_FALSE(donates(decided({}, {}, {}, {0}), 0));
}

// ---- recovery: no live member; who recovers from which checkpoint

struct RecoveryRow {
  std::string name;
  std::vector<Hello> here;
  int min_quorum;
  bool formed;
  Ints members, joiners;
  std::int64_t step;
};

class QuorumRecovery : public testing::TestWithParam<RecoveryRow> {};

TEST_P(QuorumRecovery, Chooses) {
  const RecoveryRow& r = GetParam();
  const std::optional<Quorum> q = recovery(of(r.here), r.min_quorum, 5);
  ASSERT_EQ(q.has_value(), r.formed);
  if (!q) return;
  EXPECT_TRUE(q->recovery);
  EXPECT_EQ(q->members, r.members);
  EXPECT_EQ(q->joiners, r.joiners);
  EXPECT_EQ(q->step, r.step);
  EXPECT_EQ(q->decided_by, 5);
  EXPECT_EQ(q->examples, std::vector<std::int64_t>(q->members.size(), 0));
  EXPECT_EQ(q->norms, std::vector<double>(q->members.size(), 0.0));
  // The members all hold one theta_global; the first of them sends it to the joiners.
  for (int i : q->members) EXPECT_EQ(of(r.here).at(i).held, of(r.here).at(q->members.front()).held);
  EXPECT_EQ(join_place_of(*q, q->members.front()).seat, JoinSeat::recovers);
}

INSTANTIATE_TEST_SUITE_P(
    Rows, QuorumRecovery,
    testing::Values(
        RecoveryRow{"NoneHoldsACheckpoint", {joiner(0), joiner(1), joiner(2)}, 2, true, {0, 1, 2}, {}, -1},
        // A at steps 40 and 35 (one anchor mid-period) against B at 20: A's holders recover, at the later step.
        RecoveryRow{"TheCheckpointMostHold", {joiner(0, "A", 40), joiner(1, "A", 35), joiner(2, "B", 20)}, 2, true,
                    {0, 1}, {2}, 40},
        RecoveryRow{"ACountTieGoesToTheLaterStep", {joiner(0, "A", 10), joiner(1, "B", 20)}, 2, true, {1}, {0}, 20},
        RecoveryRow{"AFullTieGoesToTheSmallerChecksum", {joiner(0, "B", 10), joiner(1, "A", 10)}, 2, true, {1}, {0},
                    10},
        RecoveryRow{"OneWithoutACheckpointReceivesIt", {joiner(0), joiner(1, "A", 30), joiner(2)}, 2, true, {1},
                    {0, 2}, 30},
        RecoveryRow{"ACheckpointBeatsNone", {joiner(0), joiner(1), joiner(2, "A", 30)}, 3, true, {2}, {0, 1}, 30},
        // Member hellos are processes that died in this round: not counted, not placed.
        RecoveryRow{"ADeadMembersHelloIsIgnored", {member(0, 50, "Z"), joiner(1, "A", 30), joiner(2, "A", 30)}, 2,
                    true, {1, 2}, {}, 30},
        RecoveryRow{"FewerJoinersThanMinQuorum", {member(0), joiner(1, "A", 30)}, 2, false, {}, {}, -1},
        RecoveryRow{"NobodyHere", {}, 1, false, {}, {}, -1}),
    row_name<RecoveryRow>);

// ---- decide_joiners: when joiners may recover at all

struct JoinersRow {
  std::string name;
  std::vector<Hello> here;
  double waited_s;
  bool member_alive;
  bool may;     // may_recover
  bool formed;  // a recovery quorum is proposed
};

class QuorumJoiners : public testing::TestWithParam<JoinersRow> {};

TEST_P(QuorumJoiners, Decides) {
  const JoinersRow& r = GetParam();
  const Rules rules{.replicas = 3, .min_quorum = 2, .join_timeout_s = 1, .max_examples = 0};
  EXPECT_EQ(may_recover(of(r.here), r.waited_s, r.member_alive, rules), r.may);
  EXPECT_EQ(decide_joiners(of(r.here), r.waited_s, r.member_alive, rules, 0).has_value(), r.formed);
}

INSTANTIATE_TEST_SUITE_P(
    Rows, QuorumJoiners,
    testing::Values(
        // Every replica came back: no need to wait for a member, even one whose heartbeat looks alive.
        JoinersRow{"EveryReplicaIsAJoiner", {joiner(0), joiner(1), joiner(2)}, 0, true, true, true},
        JoinersRow{"SomeWithinTheTimeout", {joiner(0), joiner(1)}, 0.5, false, false, false},
        JoinersRow{"ALiveMemberWillAdmitThem", {joiner(0), joiner(1)}, 5, true, false, false},
        JoinersRow{"NoLiveMemberAfterTheTimeout", {joiner(0), joiner(1)}, 1, false, true, true},
        // A member's hello is here but its process died: all three here is not all joiners.
        JoinersRow{"ADeadMembersHelloIsNotAJoiner", {member(0), joiner(1), joiner(2)}, 0, false, false, false},
        JoinersRow{"ADeadMembersHelloAfterTheTimeout", {member(0), joiner(1), joiner(2)}, 1, false, true, true},
        // May recover, but one joiner is a minority of 3.
        JoinersRow{"AMinorityOfJoinersWaits", {joiner(0)}, 5, false, true, false}),
    row_name<JoinersRow>);

TEST(QuorumJoiners, AloneMayRecoverWhenMinQuorumIsOne) {
  const Rules rules{.replicas = 3, .min_quorum = 1, .join_timeout_s = 1, .max_examples = 0};
  const std::optional<Quorum> q = decide_joiners(of({joiner(2, "A", 9)}), 1, false, rules, 2);
  ASSERT_TRUE(q);
  EXPECT_EQ(q->members, Ints{2});
}

// ---- join_place_of: what a joiner does with a round's quorum

struct JoinPlaceRow {
  std::string name;
  Quorum q;
  int replica;
  JoinSeat seat;
  int index;
};

class QuorumJoinPlace : public testing::TestWithParam<JoinPlaceRow> {};

TEST_P(QuorumJoinPlace, Is) {
  const JoinPlaceRow& r = GetParam();
  const JoinPlace p = join_place_of(r.q, r.replica);
  EXPECT_EQ(p.seat, r.seat);
  EXPECT_EQ(p.index, r.index);
}

Quorum recovering(Ints members, Ints joiners) {
  Quorum q = decided(std::move(members), {}, {}, std::move(joiners));
  q.recovery = true;
  return q;
}

Quorum void_round() {
  Quorum q;
  q.void_round = true;
  return q;
}

INSTANTIATE_TEST_SUITE_P(
    Rows, QuorumJoinPlace,
    testing::Values(JoinPlaceRow{"ARecoveryMemberRecovers", recovering({0, 1}, {2}), 1, JoinSeat::recovers, -1},
                    JoinPlaceRow{"ARecoveryJoinerReceives", recovering({0, 1}, {2}), 2, JoinSeat::receives, 0},
                    JoinPlaceRow{"ASyncsJoinerReceives", decided({0, 1}, {}, {}, {2, 3}), 3, JoinSeat::receives, 1},
                    // Only a recovery's members resume from their own checkpoint.
                    JoinPlaceRow{"ASyncsMemberIsNoRecovery", decided({0, 1}, {}, {}, {2}), 0, JoinSeat::retries, -1},
                    JoinPlaceRow{"DecidedBeforeItsHello", decided({0, 1}), 2, JoinSeat::retries, -1},
                    JoinPlaceRow{"AVoidRound", void_round(), 0, JoinSeat::retries, -1}),
    row_name<JoinPlaceRow>);

// ---- Heartbeats: a member alive while its heartbeat changes

struct Beat {
  int replica;
  std::optional<std::string> value;
  double at_s;
  bool alive;
};

TEST(QuorumHeartbeats, AReplicaIsAliveWhileItsValueChangesWithinTheTimeout) {
  const std::vector<Beat> beats = {
      {0, "p.1", 0.0, true},      // first seen: counts as changed now
      {0, "p.1", 0.9, true},      // unchanged within the timeout
      {0, "p.1", 1.0, false},     // unchanged for the timeout: dead
      {0, "p.2", 1.5, true},      // changed: alive again
      {1, std::nullopt, 1.5, true},   // no key yet, first seen
      {1, std::nullopt, 2.4, true},
      {1, std::nullopt, 2.5, false},  // still none after the timeout
      {1, "q.1", 2.6, true},          // it started beating
      {0, "p.2", 2.6, false},         // 0 stopped at 1.5
      {0, std::nullopt, 2.7, true},   // its key went away: a change
  };
  Heartbeats hb;
  const auto t0 = Heartbeats::Clock::time_point{} + std::chrono::hours(1);
  for (const Beat& b : beats) {
    const auto at = t0 + std::chrono::duration_cast<Heartbeats::Clock::duration>(std::chrono::duration<double>(b.at_s));
    EXPECT_EQ(hb.alive(b.replica, b.value, at, /*timeout_s=*/1.0), b.alive) << "replica " << b.replica << " at " << b.at_s;
  }
}

}  // namespace
}  // namespace laconic::elastic
