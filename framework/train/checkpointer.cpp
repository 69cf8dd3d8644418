#include "framework/train/checkpointer.h"

#include <ostream>
#include <span>

#include "workloads/data/sampler.h"

namespace laconic {

Checkpointer::Checkpointer(Loop& loop, const Hooks& hooks, std::size_t before)
    : loop_(loop), hooks_(hooks), before_(before) {}

void Checkpointer::after_step(const StepState& s) {
  if (loop_.spec.checkpoint_root.empty()) return;  // no run directory
  const std::int64_t every = loop_.spec.recipe.checkpoint.every, done = s.step + 1;
  // The last step always, checkpoint.every or not: a finished run can be exported (trainer export),
  // sampled from (trainer generate) or continued for more steps (--resume auto --train.steps=N).
  if ((every > 0 && done % every == 0) || done == loop_.spec.plan.steps) write(done);
}

// Everything a step depends on, as this rank's shard of checkpoint `step`. The entries follow the
// run's order: the hooks before the checkpointer, its own, the hooks after it.
std::string Checkpointer::write(std::int64_t step) {
  const std::string& root = loop_.spec.checkpoint_root;
  if (written_ == step) return checkpoint_dir(root, step);
  written_ = step;
  Communicator& comm = loop_.control;
  if (loop_.lead()) prepare_staging(root, step);
  comm.barrier();
  ShardWriter w;
  std::vector<StateTensor> ts = tensors();
  stage(ts, /*download=*/true);
  for (const StateTensor& t : ts) w.add(t.name, std::span<const float>(t.data));
  for (std::size_t i = 0; i < before_; ++i) hooks_[i]->save(w);
  save_own(w);
  for (std::size_t i = before_; i < hooks_.size(); ++i) hooks_[i]->save(w);
  const std::string staging = staging_dir(root, step);
  w.write(shard_path(staging, comm.rank()), [&](std::uint64_t written) {
    for (const auto& h : hooks_) h->on_shard_chunk(step, written);
  });
  for (const auto& h : hooks_) h->save_files(staging);
  comm.barrier();  // every shard is on disk before the commit
  if (loop_.lead()) {
    const CheckpointInfo info = commit_checkpoint(root, step, comm.size(), loop_.spec.identity, loop_.spec.recipe.checkpoint.keep_latest);
    if (loop_.opts.log) *loop_.opts.log << "laconic: checkpoint " << info.dir << std::endl;
  }
  return checkpoint_dir(root, step);
}

// The data order, the ledger's totals (a resumed run goes on counting where this one stands), and
// what sizes the model besides the recipe (trainer export builds it without the data).
void Checkpointer::save_own(ShardWriter& w) {
  if (loop_.sampler) {
    const auto c = loop_.sampler->cursor();
    sampler_[0] = c.epoch;
    sampler_[1] = c.position;
  }
  w.add("sampler", std::span<const std::int64_t>(sampler_));
  loop_.ledger.save(w);
  w.add_scalar("data.features", loop_.data.features);
  w.add_scalar("data.classes", loop_.data.classes);
  w.add_scalar("data.vocab", loop_.data.vocab);
  w.add_scalar("data.seq_len", loop_.data.seq_len);
}

void Checkpointer::load_own(const ShardReader& r, std::int64_t step) {
  r.read("sampler", std::span<std::int64_t>(sampler_));
  if (loop_.sampler) loop_.sampler->seek({sampler_[0], sampler_[1]});
  loop_.ledger.load(r, step);
}

std::int64_t Checkpointer::resume(const CheckpointInfo& info) {
  const ShardReader rd = open_shard(info, loop_.rank());  // checked against the manifest too
  loop_.optimizer.prepare(loop_.update_store());  // sizes the state that state() then exposes
  const std::vector<StateTensor> ts = tensors();
  std::vector<StateTensor> staged = ts;
  stage(staged, /*download=*/false);
  for (std::size_t i = 0; i < ts.size(); ++i) {
    rd.read(staged[i].name, staged[i].data);
    copy_bytes(ts[i].data.data(), ts[i].device, staged[i].data.data(), Device::cpu,
               ts[i].data.size_bytes());  // nothing to do for host tensors (same pointer)
  }
  for (std::size_t i = 0; i < before_; ++i) hooks_[i]->load(rd);
  load_own(rd, info.step);
  for (std::size_t i = before_; i < hooks_.size(); ++i) hooks_[i]->load(rd);
  if (loop_.lead() && loop_.opts.log) *loop_.opts.log << "laconic: resumed from " << info.dir << std::endl;
  return info.step;
}

// Every float tensor of a checkpoint, named as in the shard, wherever it lives.
std::vector<StateTensor> Checkpointer::tensors() {
  ParamStore& store = loop_.store();
  std::vector<StateTensor> all{{"params", store.params(), store.device()}};
  for (StateTensor& t : loop_.optimizer.state()) all.push_back({"optimizer." + t.name, t.data, t.device});
  for (StateTensor& t : loop_.sync.state()) all.push_back({"sync." + t.name, t.data, t.device});
  return all;
}

// Points each device tensor of `ts` at a host copy in host_stage_ (filled from the device when
// `download`); host tensors stay as they are. A cpu run never copies.
void Checkpointer::stage(std::vector<StateTensor>& ts, bool download) {
  std::size_t total = 0;
  for (const StateTensor& t : ts)
    if (t.device != Device::cpu) total += t.data.size();
  if (host_stage_.size() < total) host_stage_.resize(total);
  std::size_t at = 0;
  for (StateTensor& t : ts) {
    if (t.device == Device::cpu) continue;
    const std::span<float> host(host_stage_.data() + at, t.data.size());
    if (download) copy_bytes(host.data(), Device::cpu, t.data.data(), t.device, t.data.size_bytes());
    t = {t.name, host, Device::cpu};
    at += host.size();
  }
}

}  // namespace laconic
