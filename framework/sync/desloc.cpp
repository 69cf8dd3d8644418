#include "framework/sync/desloc.h"

#include <sstream>

#include "core/check.h"
#include "core/timer.h"

namespace laconic {

Desloc::Desloc(DeslocOptions opts) : opts_(opts) {
  LC_CHECK(opts_.param_period >= 1 && opts_.m_period >= 1 && opts_.v_period >= 1, "desloc: periods ",
           opts_.param_period, ", ", opts_.m_period, ", ", opts_.v_period, ": expected at least 1");
}

void Desloc::prepare(std::int64_t /*first_step*/) {
  LC_CHECK(store().device() == Device::cpu, "desloc: runs on host buffers");
}

void Desloc::set_optimizer_state(std::span<const StateTensor> state) {
  m_ = {};
  v_ = {};
  for (const StateTensor& t : state) {
    if (t.name == "exp_avg") m_ = t.data;
    if (t.name == "exp_avg_sq") v_ = t.data;
  }
  if (m_.empty() || v_.empty())
    LC_INPUT_ERROR("sync.strategy = \"desloc\" averages Adam's moments: expected an optimizer with them (optimizer.name "
                   "= \"adamw\", \"lamb\" or \"muon\")");
}

void Desloc::average(std::span<float> x) {
  Stopwatch timer;
  comm().all_reduce(x, ReduceOp::avg);
  comm_s_ += timer.seconds();
  ++stats_.calls;
  stats_.input_bytes += x.size_bytes();
  stats_.value_bytes += x.size_bytes();
}

bool Desloc::after_update(std::int64_t step) {
  LC_CHECK(!m_.empty(), "desloc: after_update before set_optimizer_state()");
  const bool params = due(step, opts_.param_period);
  if (params) average(store().params());
  if (due(step, opts_.m_period)) average(m_);
  if (due(step, opts_.v_period)) average(v_);
  return params;
}

std::string Desloc::describe() const {
  std::ostringstream os;
  os << "DES-LOC (local Adam; parameters averaged every " << opts_.param_period << " steps, first moments every "
     << opts_.m_period << ", second moments every " << opts_.v_period << ", each by a dense fp32 all-reduce)";
  return os.str();
}

}  // namespace laconic
