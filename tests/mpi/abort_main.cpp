// A job where rank 1 stops taking part, for the CTest checks that such a job ends, non-zero and
// quickly, instead of hanging. Usage: mpi_abort_main native|ring|exit
//   native: rank 1 sleeps (alive, silent) while the others enter a native all-reduce;
//   ring:   the same with our ring, so the others wait in a point-to-point receive;
//   exit:   rank 1 exits without MPI_Finalize before the all-reduce.
// With timeout_s = 2 the waiting ranks print the timeout line and MPI_Abort the job; the sleep
// (60 s) is far beyond the CTest limit, so a job that is not aborted fails the test.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "collectives/mpi/mpi_communicator.h"

int main(int argc, char** argv) {
  laconic::MpiRuntime mpi(argc, argv);
  const std::string mode = argc > 1 ? argv[1] : "native";
  if (mode != "native" && mode != "ring" && mode != "exit") {
    std::fprintf(stderr, "usage: mpi_abort_main native|ring|exit\n");
    return 2;
  }
  laconic::MpiCommunicator comm({.timeout_s = 2});
  if (mode == "ring") comm.set_algorithm(laconic::Algorithm::ring);
  std::vector<float> data(1000, 1.0f);
  comm.all_reduce(data, laconic::ReduceOp::sum);  // everyone, once: the world works
  if (comm.rank() == 1) {
    if (mode == "exit") std::_Exit(3);
    std::this_thread::sleep_for(std::chrono::seconds(60));
    return 0;
  }
  comm.all_reduce(data, laconic::ReduceOp::sum);  // never completes: rank 1 is not in it
  std::fprintf(stderr, "rank %d: all-reduce completed without rank 1\n", comm.rank());
  return 0;
}
