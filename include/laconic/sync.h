// Sync strategies: data parallel, periodic (local SGD, DiLoCo, streaming, SparseLoCo), DeMo, composition.
#pragma once

#include "framework/sync/sync_strategy.h"
#include "framework/sync/periodic.h"
#include "framework/sync/demo.h"
#include "framework/sync/composite.h"
