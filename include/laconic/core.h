// Laconic's core layer: errors, devices, flat parameters, batches, the random keys.
#pragma once

#include "framework/core/check.h"
#include "framework/core/device.h"
#include "framework/core/params.h"
#include "framework/core/batch.h"
#include "framework/core/rng.h"
#include "framework/core/step.h"
#include "framework/core/state.h"
