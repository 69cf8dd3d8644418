// Gradient and pseudo-gradient reducers: the Reducer interface and Laconic's codecs.
#pragma once

#include "compression/reducer.h"
#include "compression/topk.h"
#include "compression/powersgd.h"
#include "compression/onebit.h"
#include "compression/quantize.h"
#include "compression/sparse.h"
