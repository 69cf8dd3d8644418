#include "framework/train/ledger.h"

#include "framework/elastic/elastic.h"
#include "framework/sync/sync_strategy.h"
#include "framework/train/checkpoint.h"

namespace laconic {

std::array<std::uint64_t, RunCounters::kValues> RunCounters::values() const {
  std::array<std::uint64_t, kValues> v{bytes.sent, bytes.recv, bytes.messages_sent};
  for (std::size_t i = 0; i < kReducerCounts.size(); ++i) v[3 + i] = reducer.*kReducerCounts[i];
  return v;
}

RunCounters RunCounters::from_values(const std::array<std::uint64_t, kValues>& v) {
  RunCounters c;
  c.bytes = {v[0], v[1], v[2]};
  for (std::size_t i = 0; i < kReducerCounts.size(); ++i) c.reducer.*kReducerCounts[i] = v[3 + i];
  return c;
}

RunCounters RunCounters::operator+(const RunCounters& o) const {
  RunCounters c{bytes + o.bytes, reducer};
  c.reducer += o.reducer;
  return c;
}

RunCounters RunCounters::operator-(const RunCounters& o) const {
  RunCounters c{bytes - o.bytes, reducer};
  c.reducer -= o.reducer;
  return c;
}

RunLedger::RunLedger(const Communicator& comm, const Communicator* device, const SyncStrategy& sync,
                     const ElasticGroup* elastic)
    : comm_(comm), device_(device), sync_(sync), elastic_(elastic) {}

RunCounters RunLedger::live() const {
  RunCounters c{total_bytes({&comm_, device_}), sync_.reducer_stats()};
  if (elastic_ && comm_.rank() == 0) c.bytes = c.bytes + elastic_->bytes();  // across replicas, over gloo
  return c;
}

RunCounters RunLedger::totals() const { return resumed_ + (live() - at_start_); }

void RunLedger::save(ShardWriter& w) {
  const auto v = totals().values();
  for (std::size_t i = 0; i < v.size(); ++i) entry_[i] = static_cast<std::int64_t>(v[i]);
  w.add("counters", std::span<const std::int64_t>(entry_));
}

void RunLedger::load(const ShardReader& r, std::int64_t step) {
  r.read("counters", std::span<std::int64_t>(entry_));
  std::array<std::uint64_t, RunCounters::kValues> v;
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<std::uint64_t>(entry_[i]);
  resumed_ = RunCounters::from_values(v);
  at_start_ = live();
  first_step_ = step;
}

}  // namespace laconic
