// A subset of a transport's ranks as a communicator of its own: the view of
// collectives/algorithms/subset_transport.h with collectives and an async queue on top, for a
// strategy's reducer over the members of one group or over the groups' leaders
// (framework/sync/composite). Every byte is counted once, on the parent.
#pragma once

#include "collectives/algorithms/subset_transport.h"
#include "collectives/communicator.h"

namespace laconic {

class SubsetCommunicator final : public SubsetView<Communicator> {
 public:
  using SubsetView::SubsetView;
  ~SubsetCommunicator() override { stop_async(); }
};

}  // namespace laconic
