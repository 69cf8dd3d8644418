#include "collectives/algorithms/broadcast_tree.h"

#include "framework/core/check.h"

namespace laconic {

BroadcastTree::BroadcastTree(Transport& comm, void* data, std::size_t bytes, int root)
    : comm_(comm), data_(data), bytes_(bytes), root_(root), n_(comm.size()) {
  LC_CHECK(root >= 0 && root < n_, "broadcast root ", root, " outside a world of ", n_, " ranks");
  v_ = (comm.rank() - root + n_) % n_;
}

void BroadcastTree::run() {
  if (n_ == 1 || bytes_ == 0) return;
  // Find the parent: the lowest set bit of v. The root has none; its subtree spans all N.
  int mask = 1;
  while (mask < n_) {
    if (v_ & mask) {
      comm_.recv(data_, bytes_, to_rank(v_ - mask));
      break;
    }
    mask <<= 1;
  }
  // Children v + m for every power of two m below that bit, farthest first (largest subtree).
  for (mask >>= 1; mask > 0; mask >>= 1)
    if (v_ + mask < n_) comm_.send(data_, bytes_, to_rank(v_ + mask));
}

}  // namespace laconic
