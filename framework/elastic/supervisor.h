// `trainer elastic`: the supervisor of an elastic run, as torchrun's elastic agent is for PyTorch.
// It starts N replica processes (each `trainer --recipe R --replica I --replicas N ...`, one run
// directory each), restarts one that dies (up to max_restarts in all; after 0.5 s, doubling for each
// restart in a row of a replica that lived less than 60 s, at most 30 s), forwards SIGTERM, SIGINT and
// SIGUSR1 to them, and when they are done writes OUT/elastic.json: every process's exit, the
// membership of every outer sync, the replicas' final theta_global checksums, and the run's goodput.
//
//   OUT/store/            the replicas' rendezvous (a file store; fresh at every start)
//   OUT/replica-I/        replica I's run directory; log.txt holds its output, pid its process id
//   OUT/elastic.json      the run as a whole (below)
//
// Goodput: the inner steps that reached theta_global (each replica's contributed_steps over its
// committed syncs, elastic.jsonl), per replica and per second of wall time; and the same steps as
// a share of what N replicas running throughout would have contributed (N x steps). A resumed
// run's figures count this invocation's syncs against the steps it had left.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace laconic {

struct SupervisorOptions {
  std::string program;            // the trainer executable
  std::vector<std::string> args;  // every replica's arguments (--recipe, overrides)
  // Instead of the trainer, every replica runs this command (`trainer elastic ... -- python3
  // train.py`: a laconic.torch script), told in its environment which replica it is
  // (LACONIC_ELASTIC_REPLICA, LACONIC_ELASTIC_REPLICAS), where the replicas meet
  // (LACONIC_ELASTIC_STORE), its run directory (LACONIC_OUT), the recipe the supervisor checked
  // (LACONIC_ELASTIC_RECIPE) and whether to resume (LACONIC_RESUME=auto with --resume). Every
  // replica inherits the rest of the supervisor's environment (LACONIC_ELASTIC_SECRET included).
  std::vector<std::string> command;
  std::string recipe;             // the recipe's path (for a command's environment)
  std::string out_dir;            // OUT
  int replicas = 2;
  int max_restarts = 3;           // restarts allowed over the whole run
  std::string store;              // "" = file:OUT/store
  std::int64_t steps = 0;         // the recipe's steps (for the useful share)
  bool resume = false;            // the replicas continue from their checkpoints (--resume in args):
                                  // goodput counts the syncs of this invocation only
  std::ostream* log = nullptr;
};

struct SupervisorResult {
  int exit_code = 0;  // 0: every replica finished; 128 + signal when stopped by one; else 1
  int restarts = 0;
  double wall_s = 0;
  double useful_steps = 0;
  double goodput = 0;        // useful steps per replica per second
  double useful_share = 0;   // useful steps / (replicas x steps)
  int checkpointed = 0;      // after a forwarded signal: replicas that stopped with a checkpoint of their step
};

SupervisorResult run_supervisor(const SupervisorOptions& opts);

}  // namespace laconic
