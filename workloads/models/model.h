// A trainable model over flat parameters. forward() caches what backward() needs in buffers the
// model owns (grown on first use, reused after: no allocation in the step loop).
//
// Devices: a model runs where its ParamStore lives. Models are built and initialised on the host
// and moved with to(Device::cuda); every layer picks its kernels (ops::kernels) from the store's
// device at each call and keeps its activation buffers there, so the same code runs on either.
// On cuda, forward() waits for the device once, to bring back the loss statistics; backward()
// only queues work on the default stream.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "core/batch.h"
#include "core/device.h"
#include "core/params.h"
#include "core/step.h"
#include "workloads/models/export_layout.h"

namespace laconic {

struct ForwardResult {
  float loss = 0.0f;         // mean loss over counted examples
  std::int64_t counted = 0;  // examples (or tokens) not ignored
  std::int64_t correct = 0;  // argmax == target among the counted
};

// Told during backward() as gradients become final: after grads_ready(from), the gradients at
// [from, params().size()) will not change again in this backward. Models report after each layer
// (they lay their tensors out first layer first, so the final region grows from the end); sync
// strategies use it to start reducing a bucket while backward goes on. On cuda "final" is in
// stream order: every kernel that writes them has been queued on the default (legacy) stream,
// perhaps not run yet, so work queued after the call on that stream, or a synchronous copy, sees
// them final; work on another stream must wait for an event recorded on it first.
class GradsReadyListener {
 public:
  virtual ~GradsReadyListener() = default;
  virtual void grads_ready(std::size_t from) = 0;
};

// A parameter count for describe(): "940", "12.3k", "1.2M".
inline std::string param_count_text(std::size_t count) {
  const double n = static_cast<double>(count);
  char text[32];
  if (n >= 1e6)
    std::snprintf(text, sizeof text, "%.1fM", n / 1e6);
  else if (n >= 1e3)
    std::snprintf(text, sizeof text, "%.1fk", n / 1e3);
  else
    std::snprintf(text, sizeof text, "%zu", count);
  return text;
}

class Model {
 public:
  virtual ~Model() = default;
  virtual ParamStore& params() = 0;
  // Where the parameters, gradients and activations live.
  Device device() { return params().device(); }
  // Moves the model to device d: parameters and gradients now (ParamStore::to), every layer's
  // activation buffers on the next forward. Pointers into the old buffers become invalid; call
  // between steps, never between forward() and backward().
  virtual void to(Device d) { params().to(d); }
  // Deterministic initialisation from the seed (same seed -> same parameters bit for bit).
  virtual void init(std::uint64_t seed) = 0;
  virtual ForwardResult forward(const Batch& batch, const ForwardOptions& opts) = 0;
  // Accumulates (+=) the gradient of the last forward()'s mean loss into params().grads().
  virtual void backward() = 0;
  // Training FLOPs per example (forward + backward), for throughput and MFU.
  virtual double flops_per_example() const = 0;
  virtual std::string describe() const = 0;
  // The parameters as another framework names them (safetensors export, model.init_from): by
  // default Laconic's own view names under the architecture "custom".
  virtual ExportLayout export_layout() { return native_layout(params(), "custom"); }

  // Whom backward() tells about final gradients (nullptr: nobody). Not owned.
  void set_grads_ready_listener(GradsReadyListener* l) { listener_ = l; }

 protected:
  void notify_grads_ready(std::size_t from) {
    if (listener_) listener_->grads_ready(from);
  }
  // The offset of view v: where a layer's tensors start.
  std::size_t offset_of(std::size_t view) { return params().view(view).offset; }

 private:
  GradsReadyListener* listener_ = nullptr;
};

}  // namespace laconic
