#include "collectives/algorithms/broadcast_tree.h"

#include "core/check.h"

namespace laconic {

BroadcastTree::BroadcastTree(Transport& comm, void* data, std::size_t bytes, int root)
    : comm_(comm), data_(data), bytes_(bytes), root_(root), n_(comm.size()) {
  LC_CHECK(root >= 0 && root < n_, "broadcast root ", root, " outside a world of ", n_, " ranks");
  v_ = (comm.rank() - root + n_) % n_;
}

void BroadcastTree::run() {
  if (n_ == 1 || bytes_ == 0) return;
  schedule(
      n_, v_, [&](int u) { comm_.recv(data_, bytes_, to_rank(u)); }, [&](int u) { comm_.send(data_, bytes_, to_rank(u)); });
}

}  // namespace laconic
