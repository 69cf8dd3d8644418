// Laconic, all of it: #include <laconic/laconic.h> and link Laconic::laconic
// (docs/library.md "Using Laconic as a library").
#pragma once

#include "laconic/core.h"
#include "laconic/collectives.h"
#include "laconic/compression.h"
#include "laconic/optimizers.h"
#include "laconic/models.h"
#include "laconic/data.h"
#include "laconic/sync.h"
#include "laconic/recipe.h"
#include "laconic/train.h"
#include "laconic/report.h"
