// moe_trainer: Laconic's trainer with one more model, "moe" (moe.h), and its recipe section:
//
//   [model]
//   name = "moe"
//   [model.moe]
//   experts = 4      # 1..64
//   hidden = 64
//
// Everything else (strategies, compare, export, checkpoints) is Laconic's: moe_trainer --help.
#include <laconic/laconic.h>

#include "moe.h"

int main(int argc, char** argv) {
  laconic::registry().add_model(
      "moe",
      [](const laconic::Recipe& r, const laconic::TrainData& data) -> std::unique_ptr<laconic::Model> {
        if (data.features == 0) LC_INPUT_ERROR(r.path, ": model.name = \"moe\" needs image data (data.name = \"fashion_mnist\")");
        if (r.distributed.device != laconic::DeviceKind::cpu) LC_INPUT_ERROR(r.path, ": model.name = \"moe\" runs on the CPU only");
        return std::make_unique<MoeMlp>(r.section<MoeOptions>("model.moe"), data.features, data.classes);
      },
      laconic::Section<MoeOptions>()
          .add<&MoeOptions::experts>("experts", laconic::closed(1, 64))
          .add<&MoeOptions::hidden>("hidden", laconic::at_least(1)));
  return laconic::train_main(argc, argv);
}
