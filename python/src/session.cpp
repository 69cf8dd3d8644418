// laconic._laconic.Session: one rank of a run whose model lives in PyTorch (laconic.torch.Sync,
// python/laconic/torch.py, drives it). The C++ side is framework/train/external.h; this file only
// converts: the store's buffers as numpy arrays (no copy), Python callables as hooks, the GIL
// released while Laconic communicates.
#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "collectives/gloo/key_store.h"
#include "framework/train/external.h"
#include "laconic/laconic.h"
#include "python_lines.h"

namespace py = pybind11;

namespace {

// A Python object held by C++ callbacks that may be destroyed without the GIL (the run is
// released with the GIL released): the reference is dropped with the GIL.
struct Held {
  explicit Held(py::object o) : obj(std::move(o)) {}
  ~Held() {
    py::gil_scoped_acquire gil;
    obj = py::object();
  }
  py::object obj;
};

// torch.distributed's store (a PrefixStore over torchrun's TCPStore, python/laconic/torch.py) as
// the store gloo ranks meet through, so that torchrun needs nothing of Laconic's. Every call takes
// the GIL (gloo's rendezvous calls from C++ with it released). Only set, get and add serve, the
// calls torch 1.13 and 2.x share: a key's ".written" counter says whether it exists without
// waiting (add(k, 0) reads it), its ".created" counter decides who creates it. torch's store
// cannot list keys: erase_prefix(), which only elastic runs use (with their own store), is refused.
class TorchStore final : public laconic::KeyStore {
 public:
  TorchStore(py::object store, std::string what)
      : KeyStore(spec_of(std::move(what))), store_(std::make_shared<Held>(std::move(store))) {}
  bool create(const std::string& key, const std::string& value) override {
    const std::string k = stored(key);
    py::gil_scoped_acquire gil;
    if (add(k + ".created", 1) != 1) return false;
    write(k, value);
    return true;
  }
  std::optional<std::string> find(const std::string& key) override {
    const std::string k = stored(key);
    py::gil_scoped_acquire gil;
    if (add(k + ".written", 0) == 0) return std::nullopt;
    return store_->obj.attr("get")(k).cast<std::string>();
  }
  void put(const std::string& key, const std::string& value) override {
    const std::string k = stored(key);
    py::gil_scoped_acquire gil;
    write(k, value);
  }
  void erase_prefix(const std::string& prefix) override {
    throw laconic::Error("store " + spec().str() + ": torch's store cannot remove keys by prefix ('" + prefix +
                         "'); elastic runs meet through LACONIC_STORE");
  }

 private:
  static laconic::StoreSpec spec_of(std::string what) {
    laconic::StoreSpec s;
    s.kind = laconic::StoreSpec::Kind::external;
    s.path = std::move(what);
    return s;
  }
  std::int64_t add(const std::string& k, std::int64_t n) { return store_->obj.attr("add")(k, n).cast<std::int64_t>(); }
  void write(const std::string& k, const std::string& value) {  // the value first, then that it exists
    store_->obj.attr("set")(k, py::bytes(value));
    add(k + ".written", 1);
  }
  std::shared_ptr<Held> store_;  // dropped with the GIL, whichever thread ends the run
};

// Calls `fn(dir)` with the GIL when a checkpoint is staged: the caller's files (torch's optimizer
// state) go beside this rank's shard and are committed with it.
class FilesHook final : public laconic::StepHook {
 public:
  explicit FilesHook(std::shared_ptr<Held> fn) : fn_(std::move(fn)) {}
  void save_files(const std::string& dir) override {
    py::gil_scoped_acquire gil;
    fn_->obj(dir);
  }

 private:
  std::shared_ptr<Held> fn_;
};

// DLPack (github.com/dmlc/dlpack, the ABI torch.utils.dlpack.from_dlpack reads): its structs as
// the standard defines them, for a flat float32 buffer on the host or a GPU.
struct DLDevice {
  std::int32_t device_type;  // kDLCPU = 1, kDLCUDA = 2
  std::int32_t device_id;
};
struct DLDataType {
  std::uint8_t code;  // kDLFloat = 2
  std::uint8_t bits;
  std::uint16_t lanes;
};
struct DLTensor {
  void* data;
  DLDevice device;
  std::int32_t ndim;
  DLDataType dtype;
  std::int64_t* shape;
  std::int64_t* strides;  // in elements
  std::uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor* self);
};

// One exported buffer: the tensor, its shape and strides, and a reference to the Python object
// that owns the memory (the Session), dropped when the consumer is done with it.
struct Exported {
  DLManagedTensor managed;
  std::int64_t shape[1];
  std::int64_t strides[1];
  PyObject* owner;
};

void release_exported(DLManagedTensor* m) {
  auto* e = static_cast<Exported*>(m->manager_ctx);
  const PyGILState_STATE gil = PyGILState_Ensure();  // torch may free the tensor on any thread
  Py_DECREF(e->owner);
  PyGILState_Release(gil);
  delete e;
}

// A "dltensor" capsule over `data` (`n` floats on `device`), keeping `owner` alive while a tensor
// views it. A capsule never consumed frees its export itself.
py::capsule export_dlpack(float* data, std::size_t n, laconic::Device device, int index, const py::object& owner) {
  auto* e = new Exported{};
  e->shape[0] = static_cast<std::int64_t>(n);
  e->strides[0] = 1;
  e->owner = owner.ptr();
  Py_INCREF(e->owner);
  e->managed.dl_tensor = {data,       {device == laconic::Device::cuda ? 2 : 1, device == laconic::Device::cuda ? index : 0},
                          1,          {2, 32, 1},
                          e->shape,   e->strides,
                          0};
  e->managed.manager_ctx = e;
  e->managed.deleter = release_exported;
  return py::capsule(&e->managed, "dltensor", [](PyObject* capsule) {
    if (!PyCapsule_IsValid(capsule, "dltensor")) return;  // a consumer renamed it "used_dltensor": its own now
    auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, "dltensor"));
    m->deleter(m);
  });
}

class TorchSession {
 public:
  // `tensors`: (name, shape) of each parameter in store order. `log`: a text stream or None.
  // `evaluate`: None or a callable returning (loss, accuracy) (accuracy may be None), on rank 0.
  // `save_files`: None or a callable(dir) writing this rank's files into a staged checkpoint.
  TorchSession(const std::string& recipe_path, const std::vector<std::string>& overrides, const std::string& out,
          const std::vector<std::tuple<std::string, std::vector<std::int64_t>>>& tensors, const std::string& resume,
          const py::object& log, const py::object& evaluate, const py::object& save_files, double flops_per_example,
          bool stop_on_signals, bool agree_every_step, const laconic::TrainOptions::Elastic& elastic,
          int cuda_index, const py::object& store, const std::string& store_name, const py::object& on_record)
      : lines_(log), log_stream_(&lines_) {
    const laconic::Recipe recipe = laconic::load_recipe(recipe_path, overrides);
    laconic::ExternalOptions opts;
    opts.train.run_dir = out;
    opts.train.resume = resume;
    opts.train.stop_on_signals = stop_on_signals;
    opts.train.agree_every_step = agree_every_step;
    opts.train.elastic = elastic;
    if (!log.is_none()) opts.train.log = &log_stream_;
    if (!evaluate.is_none()) {
      opts.train.evaluate = [fn = std::make_shared<Held>(evaluate)]() {
        py::gil_scoped_acquire gil;
        const py::tuple r = fn->obj();
        laconic::EvalResult e;
        e.loss = r[0].cast<double>();
        if (!r[1].is_none()) e.accuracy = r[1].cast<double>();
        return e;
      };
    }
    if (!save_files.is_none()) {
      auto fn = std::make_shared<Held>(save_files);
      opts.train.hooks.push_back([fn](laconic::Loop&) { return std::make_unique<FilesHook>(fn); });
    }
    opts.flops_per_example = flops_per_example;
    opts.device = cuda_index >= 0 ? laconic::Device::cuda : laconic::Device::cpu;
    opts.cuda_index = std::max(0, cuda_index);
    if (!store.is_none()) opts.store = std::make_shared<TorchStore>(store, store_name);
    if (!on_record.is_none()) {
      opts.train.on_record = [fn = std::make_shared<Held>(on_record)](const std::string& line) {
        py::gil_scoped_acquire gil;
        fn->obj(line);
      };
    }
    std::vector<laconic::ExternalTensor> ts;
    for (const auto& [name, shape] : tensors) ts.push_back({name, shape});
    py::gil_scoped_release release;  // joining the world waits for the other processes
    run_ = std::make_unique<laconic::ExternalRun>(recipe, ts, std::move(opts));
  }

  ~TorchSession() {
    py::gil_scoped_release release;
    run_.reset();
  }

  laconic::ExternalRun& run() { return *run_; }

  // params() or grads() of the store as a DLPack capsule over its memory (host or GPU), keeping
  // `self` alive while a tensor views it.
  static py::capsule buffer(py::object self, bool grads) {
    laconic::ExternalRun& run = self.cast<TorchSession&>().run();
    laconic::ParamStore& store = run.store();
    float* data = grads ? store.grads().data() : store.params().data();
    return export_dlpack(data, store.size(), store.device(), run.cuda_index(), self);
  }

  py::list views() {
    py::list out;
    for (const laconic::ParamView& v : run_->store().views()) out.append(py::make_tuple(v.name, v.offset, v.numel));
    return out;
  }

  // summary.json's figures the caller reports; the run directory holds the rest.
  py::dict finish(int why) {
    laconic::TrainSummary s;
    {
      py::gil_scoped_release release;
      s = run_->finish(laconic::Stop::from_code(why));
    }
    py::dict d;
    d["steps"] = s.steps;
    d["planned_steps"] = s.planned_steps;
    d["checkpoint"] = s.checkpoint;
    d["stop_signal"] = s.stop_signal;
    d["stopped"] = s.stopped;
    d["final_loss"] = s.final_loss;
    d["bytes_sent"] = s.bytes_sent;
    return d;
  }

 private:
  laconic::python::PythonLines lines_;
  std::ostream log_stream_;
  std::unique_ptr<laconic::ExternalRun> run_;
};

}  // namespace

namespace laconic::python {

void bind_session(py::module_& m) {
  // An elastic replica's identity (trainer elastic -- COMMAND sets it in the environment).
  py::class_<laconic::TrainOptions::Elastic>(m, "Elastic")
      .def(py::init([](int replica, int replicas, std::string store) {
             return laconic::TrainOptions::Elastic{replica, replicas, std::move(store)};
           }),
           py::arg("replica") = 0, py::arg("replicas") = 0, py::arg("store") = "");
  // A replica dropped from its elastic run: the process exits 76 and its supervisor restarts it.
  py::register_exception<laconic::ReplicaDropped>(m, "ReplicaDropped");
  // resume="auto" on a run that finished its steps: nothing to train (the trainer exits 0).
  py::register_exception<laconic::RunFinished>(m, "RunFinished");
  py::class_<TorchSession>(m, "Session")
      .def(py::init<const std::string&, const std::vector<std::string>&, const std::string&,
                    const std::vector<std::tuple<std::string, std::vector<std::int64_t>>>&, const std::string&,
                    const py::object&, const py::object&, const py::object&, double, bool, bool,
                    const laconic::TrainOptions::Elastic&, int, const py::object&, const std::string&,
                    const py::object&>(),
           py::arg("recipe"), py::arg("overrides"), py::arg("out"), py::arg("tensors"), py::arg("resume"),
           py::arg("log"), py::arg("evaluate"), py::arg("save_files"), py::arg("flops_per_example"),
           py::arg("stop_on_signals"), py::arg("agree_every_step"), py::arg("elastic"), py::arg("cuda_index"),
           py::arg("store") = py::none(), py::arg("store_name") = "", py::arg("on_record") = py::none())
      .def("params", [](py::object self) { return TorchSession::buffer(self, false); })
      .def("grads", [](py::object self) { return TorchSession::buffer(self, true); })
      .def("views", &TorchSession::views)
      .def_property_readonly("rank", [](TorchSession& s) { return s.run().rank(); })
      .def_property_readonly("world_size", [](TorchSession& s) { return s.run().world_size(); })
      .def_property_readonly("data_rank", [](TorchSession& s) { return s.run().shard().rank; })
      .def_property_readonly("data_world", [](TorchSession& s) { return s.run().shard().ranks; })
      .def_property_readonly("steps", [](TorchSession& s) { return s.run().spec().plan.steps; })
      .def_property_readonly("grad_accum", [](TorchSession& s) { return s.run().spec().recipe.train.grad_accum; })
      .def_property_readonly("micro_batch", [](TorchSession& s) { return s.run().spec().recipe.train.micro_batch; })
      .def_property_readonly("overlap", [](TorchSession& s) { return s.run().spec().overlap; })
      .def_property_readonly("tensorboard", [](TorchSession& s) { return s.run().spec().recipe.train.tensorboard; })
      .def_property_readonly("resumed_from", [](TorchSession& s) { return s.run().resumed_from(); })
      .def_property_readonly("finished", [](TorchSession& s) { return s.run().finished(); })
      .def("start", [](TorchSession& s) { return s.run().start(); }, py::call_guard<py::gil_scoped_release>())
      .def("begin_step", [](TorchSession& s, std::int64_t step) { s.run().begin_step(step); },
           py::call_guard<py::gil_scoped_release>())
      .def("grads_ready", [](TorchSession& s, std::size_t from) { s.run().grads_ready(from); },
           py::call_guard<py::gil_scoped_release>())
      .def("reduce", [](TorchSession& s, double sum, double count, double lr) { return s.run().reduce(sum, count, lr); },
           py::call_guard<py::gil_scoped_release>())
      .def("optimizer_begin", [](TorchSession& s) { s.run().optimizer_begin(); })
      .def("updated", [](TorchSession& s) { s.run().updated(); }, py::call_guard<py::gil_scoped_release>())
      // 0: go on; else the signal, or TIME_LIMIT
      .def("end_step", [](TorchSession& s) { return s.run().end_step().code(); }, py::call_guard<py::gil_scoped_release>())
      .def("finish", &TorchSession::finish);
  m.def("abort_mpi_job", &laconic::abort_mpi_job, py::arg("exit_code"),
        "Ends every rank of a running MPI job (this rank failed); nothing without one.");
  m.attr("TIME_LIMIT") = laconic::Stop::kTimeLimit;  // end_step()'s verdict for train.time_limit
}

}  // namespace laconic::python
