// The collective layer: the Communicator interface, dtypes, the threads world, the gloo backend and
// its stores, the simulated network.
#pragma once

#include "collectives/communicator.h"
#include "collectives/collectives.h"
#include "collectives/dtype.h"
#include "collectives/threads/threads_communicator.h"
#include "collectives/gloo/gloo_communicator.h"
#include "collectives/gloo/key_store.h"
#include "collectives/netsim/topology.h"
