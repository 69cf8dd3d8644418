// Fault injection for tests of the failure paths, as a step hook: rank `fault.rank` fails at step
// `fault.step` by throwing, exiting the process, stalling (it stops answering; the others must
// stop within distributed.timeout_s, never hang), putting a NaN into its gradients before
// backward (so it travels with overlapped reductions), or being killed by SIGKILL in the middle
// of writing its shard of the checkpoint of step `fault.step` (crash).
//
// The training library never reads [fault]: whoever wants it adds the hook (the trainer CLI does
// for a recipe's [fault], tests do for theirs):
//   opts.hooks.push_back(fault_injector(recipe.fault));
#pragma once

#include "framework/recipe/recipe.h"
#include "framework/train/hooks.h"

namespace laconic {

HookFactory fault_injector(const FaultConfig& fault);

}  // namespace laconic
