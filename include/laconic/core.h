// Laconic's core layer: errors, devices, flat parameters, batches, the random keys, the user's
// files read with bounded memory (input.h) and JSON with bounded nesting (json.h).
#pragma once

#include "framework/core/check.h"
#include "framework/core/input.h"
#include "framework/core/json.h"
#include "framework/core/device.h"
#include "framework/core/params.h"
#include "framework/core/batch.h"
#include "framework/core/rng.h"
#include "framework/core/step.h"
#include "framework/core/state.h"
