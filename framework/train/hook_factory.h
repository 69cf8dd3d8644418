// A step hook made per rank once the loop exists (TrainOptions::hooks; they run before the
// built-in ones). Its own header so that the run's options (options.h) name it without the hooks.
#pragma once

#include <functional>
#include <memory>

namespace laconic {

struct Loop;
class StepHook;

using HookFactory = std::function<std::unique_ptr<StepHook>(Loop&)>;

}  // namespace laconic
