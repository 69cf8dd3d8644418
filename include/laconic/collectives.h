// The collective layer: the Communicator interface, dtypes, the threads world, the simulated network.
#pragma once

#include "collectives/communicator.h"
#include "collectives/collectives.h"
#include "collectives/dtype.h"
#include "collectives/threads/threads_communicator.h"
#include "collectives/netsim/topology.h"
