#include "framework/elastic/quorum.h"

#include <algorithm>

#include "core/check.h"

namespace laconic::elastic {

namespace {

using Tag = std::tuple<std::int64_t, int, std::string, std::string>;

bool contains(const std::vector<int>& v, int x) { return std::find(v.begin(), v.end(), x) != v.end(); }

// The tag most member hellos share: ties to the later step, then to the first in the map's order.
std::optional<Tag> majority_tag(const Hellos& here) {
  std::map<Tag, int> votes;
  for (const auto& [i, h] : here)
    if (!h.joiner) ++votes[h.tag()];
  if (votes.empty()) return std::nullopt;
  auto best = votes.begin();
  for (auto it = votes.begin(); it != votes.end(); ++it)
    if (it->second > best->second || (it->second == best->second && std::get<0>(it->first) > std::get<0>(best->first)))
      best = it;
  return best->first;
}

// The size of a contribution: the one most members in step send (ties to the smaller).
std::int64_t common_size(const Hellos& here, const Tag& tag) {
  std::map<std::int64_t, int> sizes;
  for (const auto& [i, h] : here)
    if (!h.joiner && h.tag() == tag) ++sizes[h.size];
  return std::max_element(sizes.begin(), sizes.end(), [](const auto& a, const auto& b) { return a.second < b.second; })
      ->first;
}

// The checkpoint the joiners here recover from, and how many joiners there are.
struct Choice {
  std::string checksum;   // its theta_global's ("": none holds a checkpoint)
  std::int64_t step = -1;  // the latest step of its holders'
  int joiners = 0;
};

Choice chosen_checkpoint(const Hellos& here) {
  std::map<std::string, std::pair<int, std::int64_t>> votes;  // theta_global: holders, the latest step
  Choice c;
  for (const auto& [i, h] : here) {
    if (!h.joiner) continue;  // a member that died in this round (its heartbeat stopped)
    ++c.joiners;
    if (h.held.empty()) continue;
    auto& [n, step] = votes.try_emplace(h.held, 0, h.step).first->second;
    ++n;
    step = std::max(step, h.step);
  }
  std::pair<int, std::int64_t> best{0, -1};
  for (const auto& [sum, v] : votes)
    if (v > best) best = v, c.checksum = sum;
  c.step = best.second;
  return c;
}

}  // namespace

std::vector<int> awaited(const std::vector<int>& expected, int replicas) {
  std::vector<int> out = expected;
  if (out.empty())
    for (int i = 0; i < replicas; ++i) out.push_back(i);
  return out;
}

std::string invalid(const Hello& h, std::int64_t size, std::int64_t max_examples) {
  if (h.size != size) return detail::concat("its pseudo-gradient has ", h.size, " values, expected ", size);
  if (!h.finite) return "its pseudo-gradient is not finite";
  if (h.examples < 1 || (max_examples > 0 && h.examples > max_examples))
    return detail::concat("it claims ", h.examples, " examples since its last sync, expected 1 to ",
                          max_examples > 0 ? std::to_string(max_examples) : "any",
                          " (the longest period x examples per step)");
  return {};
}

Quorum vote(const Hellos& here, std::int64_t max_examples, int decided_by) {
  Quorum q;
  q.decided_by = decided_by;
  const std::optional<Tag> best = majority_tag(here);
  const std::int64_t size = best ? common_size(here, *best) : 0;
  if (best) q.step = std::get<0>(*best);
  for (const auto& [i, h] : here) {
    if (h.joiner) {
      q.joiners.push_back(i);
    } else if (best && h.tag() == *best) {
      if (std::string why = invalid(h, size, max_examples); !why.empty()) {
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
  return q;
}

int headcount(const Quorum& q) { return static_cast<int>(q.members.size() + q.joiners.size()); }

bool quorate(const Quorum& q, int min_quorum) { return !q.members.empty() && headcount(q) >= min_quorum; }

Decision decide_members(const Hellos& here, const std::vector<int>& awaited, double waited_s, const Rules& rules,
                        int decided_by) {
  const bool all_here = std::all_of(awaited.begin(), awaited.end(), [&](int i) { return here.count(i) > 0; });
  if (!all_here && waited_s < rules.join_timeout_s) return {};
  Decision d{Verdict::decide, vote(here, rules.max_examples, decided_by)};
  if (!quorate(d.quorum, rules.min_quorum)) d.verdict = Verdict::too_few;
  return d;
}

Place place_of(const Quorum& q, int replica) {
  for (std::size_t j = 0; j < q.rejected.size(); ++j)
    if (q.rejected[j] == replica) return {Seat::rejected, -1, q.reasons[j]};
  const auto self = std::find(q.members.begin(), q.members.end(), replica);
  if (self != q.members.end()) return {Seat::member, static_cast<int>(self - q.members.begin()), {}};
  return {contains(q.dropped, replica) ? Seat::dropped : Seat::late, -1, {}};
}

double mean_weight(std::span<const std::int64_t> examples, std::span<const std::size_t> kept, int row,
                   std::int64_t mine) {
  if (std::find(kept.begin(), kept.end(), static_cast<std::size_t>(row)) == kept.end()) return 0.0;
  std::int64_t total = 0;
  for (std::size_t j : kept) total += examples[j];
  const int size = static_cast<int>(examples.size());
  return static_cast<double>(mine) * size / static_cast<double>(total);
}

std::vector<int> everyone(const Quorum& q) {
  std::vector<int> all = q.members;
  all.insert(all.end(), q.joiners.begin(), q.joiners.end());
  std::sort(all.begin(), all.end());
  return all;
}

std::vector<int> left(const std::vector<int>& committed, const Quorum& q) {
  std::vector<int> out;
  for (int i : committed)
    if (!contains(q.members, i)) out.push_back(i);
  return out;
}

bool donates(const Quorum& q, int replica) {
  return !q.joiners.empty() && !q.members.empty() && q.members.front() == replica;
}

bool may_recover(const Hellos& here, double waited_s, bool member_alive, const Rules& rules) {
  const bool all_joiners = std::all_of(here.begin(), here.end(), [](const auto& h) { return h.second.joiner; });
  return (all_joiners && static_cast<int>(here.size()) == rules.replicas) ||
         (waited_s >= rules.join_timeout_s && !member_alive);
}

std::optional<Quorum> recovery(const Hellos& here, int min_quorum, int decided_by) {
  const Choice chosen = chosen_checkpoint(here);
  if (chosen.joiners < min_quorum) return std::nullopt;
  Quorum q;
  q.recovery = true;
  q.decided_by = decided_by;
  q.step = chosen.step;
  for (const auto& [i, h] : here) {
    if (!h.joiner) continue;
    if (h.held == chosen.checksum) {
      q.members.push_back(i);
      q.examples.push_back(0);
      q.norms.push_back(0);
    } else {
      q.joiners.push_back(i);
    }
  }
  return q;
}

std::optional<Quorum> decide_joiners(const Hellos& here, double waited_s, bool member_alive, const Rules& rules,
                                     int decided_by) {
  if (!may_recover(here, waited_s, member_alive, rules)) return std::nullopt;
  return recovery(here, rules.min_quorum, decided_by);
}

JoinPlace join_place_of(const Quorum& q, int replica) {
  if (q.recovery && contains(q.members, replica)) return {JoinSeat::recovers, -1};
  const auto self = std::find(q.joiners.begin(), q.joiners.end(), replica);
  if (self == q.joiners.end()) return {JoinSeat::retries, -1};
  return {JoinSeat::receives, static_cast<int>(self - q.joiners.begin())};
}

bool Heartbeats::alive(int replica, std::optional<std::string> value, Clock::time_point now, double timeout_s) {
  auto [it, fresh] = seen_.try_emplace(replica, std::nullopt, now);
  if (fresh || value != it->second.first) it->second = {std::move(value), now};
  return std::chrono::duration<double>(now - it->second.second).count() < timeout_s;
}

}  // namespace laconic::elastic
