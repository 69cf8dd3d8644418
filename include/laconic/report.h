// Comparisons of runs: trainer compare's variants, reports and multi-seed statistics.
#pragma once

#include "framework/report/compare.h"
#include "framework/report/seeds.h"
