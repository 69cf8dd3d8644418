#include "framework/train/trainer.h"

#include <mutex>
#include <optional>
#include <ostream>

#include "core/check.h"
#include "core/timer.h"
#include "core/units.h"
#include "core/rng.h"
#include "core/ops/dispatch.h"
#include "workloads/data/sampler.h"
#include "framework/recipe/factory.h"
#include "framework/train/elastic_hook.h"
#include "workloads/weights/model_weights.h"
#include "framework/train/lifecycle.h"
#include "framework/train/session.h"
#include "framework/train/world.h"

namespace laconic {
namespace {

// One rank's replica of Laconic's own models: the data, the model, the optimizer and the step
// loop that drives the rank's Session (session.h) through them.
class Worker {
 public:
  // `resume`: the checkpoint to continue from (null: start fresh).
  // `elastic`: the replica group of an elastic run (null: the world is this run's ranks).
  Worker(const RunSpec& spec, const TrainData& data, const TrainOptions& opts, Communicator& base,
         Communicator& control, const CheckpointInfo* resume, ElasticGroup* elastic)
      : spec_(spec), r_(spec.recipe), data_(data),
        shard_(data_shard(base, elastic)),
        model_(make_model(r_, data)),
        optimizer_(make_optimizer(r_)),
        // One optimizer step consumes one global batch; this rank's slice of it is cut into
        // grad_accum micro-batches. So K ranks with micro-batch b, one rank accumulating K
        // micro-batches of b, and one rank with micro-batch K*b all see the same examples.
        sampler_(SamplerOptions{data.train->size(), r_.run.seed, shard_.ranks, shard_.rank,
                                r_.train.micro_batch * r_.train.grad_accum}) {
    model_->init(r_.run.seed);  // on the host, then to where it trains
    if (spec_.plan.init_weights) load_model_weights(*spec_.plan.init_weights, r_.model.init_from.path, *model_, "model.init_from");
    model_->to(spec_.device);
    session_.emplace(spec, data, opts, base, control, resume, elastic, *model_, *optimizer_, &sampler_);
  }

  TrainSummary run() {
    std::int64_t step = session_->start();
    Stop stop;  // none: ran to the end
    try {
      while (step < spec_.plan.steps && !stop) {
        run_step(step);
        session_->end_step(step);
        stop = session_->agree_to_stop(step++);
      }
      return session_->finish(step, stop);
    } catch (const InputError&) {
      throw;
    } catch (const ReplicaDropped&) {
      throw;
    } catch (const std::exception& e) {
      // Name where it happened; a peer's failure already names its rank.
      throw Error(detail::concat("rank ", session_->comm().rank(), " at step ", step + 1, ": ", e.what()));
    }
  }

 private:
  // One optimizer step: the micro-batches' forward and backward, the strategy's reduction, the
  // optimizer, the strategy's parameter sync, and the hooks between them.
  void run_step(std::int64_t step) {
    StepState s;
    s.step = step;
    session_->begin_step(s, 1.0f / static_cast<float>(r_.train.grad_accum));
    // A replica slower than the fastest (asynchronous strategies) skips the step's work; its
    // batch of the data order goes unseen.
    const bool computes = session_->computes(step);
    Stopwatch t;
    if (computes) {
      forward_backward(s);
    } else {
      sampler_.next();
    }
    if (!session_->reduce(s, t.seconds())) return;
    t.reset();
    if (computes) {
      TraceSpan span(session_->tracer(), SpanKind::optimizer);
      optimizer_->step(session_->update_store(), s.lr);
      synchronize_kernels(spec_.device);
    }
    session_->updated(s, t.seconds());
  }

  // This rank's slice of the global batch in grad_accum micro-batches.
  void forward_backward(StepState& s) {
    const std::int64_t step = s.step;
    const int accum = r_.train.grad_accum;
    const std::span<const std::int64_t> slice = sampler_.next();
    const auto micro = static_cast<std::size_t>(r_.train.micro_batch);
    const bool each = session_->reduces_each_micro_batch();
    for (int a = 0; a < accum; ++a) {
      const auto at = static_cast<std::uint64_t>(step * accum + a);
      data_.train->fill(batch_, slice.subspan(static_cast<std::size_t>(a) * micro, micro),
                        rng::key({r_.run.seed, static_cast<std::uint64_t>(shard_.rank), at, rng::kData}));
      TraceSpan span(session_->tracer(), SpanKind::forward_backward);
      ForwardOptions fo;
      fo.train = true;
      fo.seed = r_.run.seed;
      fo.rank = shard_.rank;
      fo.step = static_cast<std::int64_t>(at);
      const ForwardResult f = model_->forward(batch_, fo);
      s.loss_sum += static_cast<double>(f.loss) * static_cast<double>(f.counted);
      s.loss_count += static_cast<double>(f.counted);
      // Only the last backward of the step makes final gradients, unless the strategy reduces
      // each micro-batch's (ZeRO-2 holds no whole gradient buffer to accumulate them in).
      const bool told = each || a + 1 == accum;
      if (each && a > 0) session_->next_micro_batch();
      model_->set_grads_ready_listener(told ? &session_->ready() : nullptr);
      model_->backward();
      // whatever the model did not report (the mean over micro-batches)
      if (told) session_->ready().grads_ready(0);
      // The last micro-batch's span ends with the gradients handed on, on the device as well.
      if (a + 1 == accum) synchronize_kernels(spec_.device);  // on a GPU, backward is queued work until here
    }
  }

  const RunSpec& spec_;
  const Recipe& r_;
  const TrainData& data_;
  DataShard shard_;  // which shard of the data this rank reads
  std::unique_ptr<Model> model_;
  std::unique_ptr<Optimizer> optimizer_;
  ShardedSampler sampler_;
  std::optional<Session> session_;  // made once the model holds its initial parameters
  Batch batch_;
};


}  // namespace

TrainSummary train(const Recipe& recipe, const TrainData& data, const TrainOptions& options) {
  const RunSpec spec = resolve(recipe, data, options.run_dir);  // every cross-field error, before anything is written
  RunLifecycle life(spec, options);
  const TrainOptions& opts = life.options();
  TrainSummary summary;
  bool led = false;  // this process ran rank 0
  std::mutex mu;
  const int gemm_threads = gemm_threads_for(spec);
  ops::cpu::set_gemm_threads(gemm_threads);
  life.guarded([&] {
    run_world(spec, [&](Communicator& comm, Communicator& control) {
      const std::optional<CheckpointInfo> agreed = life.open_rank(comm, control, data, gemm_threads);
      Worker worker(spec, data, opts, comm, control, agreed ? &*agreed : nullptr, life.elastic());
      TrainSummary s = worker.run();
      if (comm.rank() == 0) {
        std::lock_guard lock(mu);
        summary = std::move(s);
        led = true;
      }
    });
  });
  life.close(led, summary);
  return summary;
}


}  // namespace laconic

namespace laconic {

TrainSummary train(const Recipe& recipe, const TrainOptions& opts) {
  LoadOptions load;
  load.cache_dir = recipe.run.out_dir;
  return train(recipe, load_data(recipe, load), opts);
}

}  // namespace laconic
