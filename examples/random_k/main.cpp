// randk_trainer: Laconic's trainer with one more reducer, "random_k" (random_k.h). A reducer is
// also a gradient strategy of its name, so a recipe compares it with top-k directly:
//
//   randk_trainer compare --recipe compare.toml --vary sync.strategy=topk,random_k --out report/
//
//   [sync.random_k]
//   ratio = 0.01            # in (0, 1]
//   error_feedback = true
#include <laconic/laconic.h>

#include "random_k.h"

int main(int argc, char** argv) {
  register_random_k();
  return laconic::train_main(argc, argv);
}
