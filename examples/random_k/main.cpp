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
  laconic::registry().add_reducer(
      "random_k",
      [](const laconic::Recipe& r, laconic::Device device) -> std::unique_ptr<laconic::Reducer> {
        if (device != laconic::Device::cpu) LC_INPUT_ERROR(r.path, ": random_k runs on host buffers (distributed.device = \"cpu\")");
        return std::make_unique<RandomKReducer>(r.section<RandomKOptions>("sync.random_k"));
      },
      laconic::Section<RandomKOptions>()
          .add<&RandomKOptions::ratio>("ratio", laconic::Bound{.lo = 0, .hi = 1, .lo_open = true})
          .add<&RandomKOptions::error_feedback>("error_feedback"));
  return laconic::train_main(argc, argv);
}
