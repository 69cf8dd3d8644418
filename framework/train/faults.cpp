#include "framework/train/faults.h"

#include <chrono>
#include <csignal>
#include <cstdio>
#include <limits>
#include <thread>

#include "core/check.h"

namespace laconic {
namespace {

class FaultInjector final : public StepHook {
 public:
  FaultInjector(Loop& loop, const FaultConfig& f) : loop_(loop), f_(f) {}

  void before_step(StepState& s) override {
    if (s.step != f_.step || loop_.rank() != f_.rank) return;
    const std::string what = detail::concat("fault injected: rank ", f_.rank, " ", name_of(f_.kind), " at step ", s.step + 1);
    switch (f_.kind) {
      case FaultKind::throw_:
        throw Error(what);
      case FaultKind::exit:
        std::fprintf(stderr, "laconic: %s\n", what.c_str());
        std::fflush(stderr);
        std::_Exit(3);
      case FaultKind::stall:  // stops answering; gives up long after the others' timeout
        std::this_thread::sleep_for(std::chrono::duration<double>(2 * loop_.spec.recipe.distributed.timeout_s + 1));
        throw Error(what + " (stalled rank giving up)");
      case FaultKind::nan: {  // before backward accumulates: reduction may start during backward
        const float nan = std::numeric_limits<float>::quiet_NaN();
        copy_bytes(loop_.store().grad(0), loop_.device(), &nan, Device::cpu, sizeof nan);
        return;
      }
      case FaultKind::none:
      case FaultKind::crash:
        return;
    }
  }

  void on_shard_chunk(std::int64_t step, std::uint64_t /*written*/) override {
    if (f_.kind == FaultKind::crash && step == f_.step && loop_.rank() == f_.rank) std::raise(SIGKILL);  // mid-write
  }

 private:
  Loop& loop_;
  FaultConfig f_;
};

}  // namespace

HookFactory fault_injector(const FaultConfig& fault) {
  return [fault](Loop& loop) -> std::unique_ptr<StepHook> {
    if (fault.kind == FaultKind::none) return nullptr;
    return std::make_unique<FaultInjector>(loop, fault);
  };
}

}  // namespace laconic
