// Comparisons of runs: trainer compare's variants, reports and multi-seed statistics.
#pragma once

#include "report/compare.h"
#include "report/seeds.h"
