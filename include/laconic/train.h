// Training: the step loop, what builds it from a recipe, checkpoints, export, simulation (and
// goodput under failures), elastic training.
#pragma once

#include "framework/train/trainer.h"
#include "framework/recipe/factory.h"
#include "framework/train/checkpoint.h"
#include "framework/inference/export.h"
#include "workloads/weights/safetensors.h"
#include "framework/train/simulate.h"
#include "sim/failures.h"
#include "framework/elastic/elastic.h"
#include "framework/elastic/supervisor.h"
#include "framework/cli/train_main.h"
#include "framework/recipe/registry.h"
