// Optimizers (SGD, AdamW, LARS, LAMB), gradient clipping and learning-rate schedules.
#pragma once

#include "optimizers/optimizer.h"
#include "optimizers/sgd.h"
#include "optimizers/adamw.h"
#include "optimizers/lars.h"
#include "optimizers/lamb.h"
#include "optimizers/clip.h"
#include "optimizers/schedule.h"
