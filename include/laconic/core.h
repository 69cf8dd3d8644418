// Laconic's core layer: errors, devices, flat parameters, batches, the random keys, the user's
// files read with bounded memory (input.h) and JSON with bounded nesting (json.h).
#pragma once

#include "core/check.h"
#include "core/input.h"
#include "core/json.h"
#include "core/device.h"
#include "core/params.h"
#include "core/batch.h"
#include "core/rng.h"
#include "core/step.h"
#include "core/state.h"
