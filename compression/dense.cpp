#include "compression/reducer.h"

namespace laconic {

void DenseReducer::reduce(std::span<float> data, Communicator& comm) {
  account(data.size_bytes(), data.size_bytes());
  comm.all_reduce(data, ReduceOp::avg);
}

}  // namespace laconic
