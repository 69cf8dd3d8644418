// laconic._laconic.Session: one rank of a run whose model lives in PyTorch (laconic.torch.Sync,
// python/laconic/torch.py, drives it). The C++ side is framework/train/external.h; this file only
// converts: the store's buffers as numpy arrays (no copy), Python callables as hooks, the GIL
// released while Laconic communicates.
#include <pybind11/functional.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

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

class TorchSession {
 public:
  // `tensors`: (name, shape) of each parameter in store order. `log`: a text stream or None.
  // `evaluate`: None or a callable returning (loss, accuracy) (accuracy may be None), on rank 0.
  // `save_files`: None or a callable(dir) writing this rank's files into a staged checkpoint.
  TorchSession(const std::string& recipe_path, const std::vector<std::string>& overrides, const std::string& out,
          const std::vector<std::tuple<std::string, std::vector<std::int64_t>>>& tensors, const std::string& resume,
          const py::object& log, const py::object& evaluate, const py::object& save_files, double flops_per_example,
          bool stop_on_signals, const laconic::TrainOptions::Elastic& elastic)
      : lines_(log), log_stream_(&lines_) {
    const laconic::Recipe recipe = laconic::load_recipe(recipe_path, overrides);
    laconic::ExternalOptions opts;
    opts.train.run_dir = out;
    opts.train.resume = resume;
    opts.train.stop_on_signals = stop_on_signals;
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

  // params() or grads() of the store as a flat float32 array over its memory, keeping `self` alive.
  static py::array buffer(py::object self, bool grads) {
    laconic::ParamStore& store = self.cast<TorchSession&>().run().store();
    float* data = grads ? store.grads().data() : store.params().data();
    return py::array_t<float>({static_cast<py::ssize_t>(store.size())}, {static_cast<py::ssize_t>(sizeof(float))},
                              data, self);
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
      s = run_->finish(why);
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
                    const py::object&, const py::object&, const py::object&, double, bool,
                    const laconic::TrainOptions::Elastic&>(),
           py::arg("recipe"), py::arg("overrides"), py::arg("out"), py::arg("tensors"), py::arg("resume"),
           py::arg("log"), py::arg("evaluate"), py::arg("save_files"), py::arg("flops_per_example"),
           py::arg("stop_on_signals"), py::arg("elastic"))
      .def("params", [](py::object self) { return TorchSession::buffer(self, false); })
      .def("grads", [](py::object self) { return TorchSession::buffer(self, true); })
      .def("views", &TorchSession::views)
      .def_property_readonly("rank", [](TorchSession& s) { return s.run().rank(); })
      .def_property_readonly("world_size", [](TorchSession& s) { return s.run().world_size(); })
      .def_property_readonly("data_rank", [](TorchSession& s) { return s.run().shard().rank; })
      .def_property_readonly("data_world", [](TorchSession& s) { return s.run().shard().ranks; })
      .def_property_readonly("steps", [](TorchSession& s) { return s.run().spec().plan.steps; })
      .def_property_readonly("grad_accum", [](TorchSession& s) { return s.run().spec().recipe.train.grad_accum; })
      .def_property_readonly("overlap", [](TorchSession& s) { return s.run().spec().overlap; })
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
      .def("end_step", [](TorchSession& s) { return s.run().end_step(); }, py::call_guard<py::gil_scoped_release>())
      .def("finish", &TorchSession::finish);
  m.def("abort_mpi_job", &laconic::abort_mpi_job, py::arg("exit_code"),
        "Ends every rank of a running MPI job (this rank failed); nothing without one.");
  m.attr("TIME_LIMIT") = laconic::Session::kTimeLimit;  // end_step()'s verdict for train.time_limit
}

}  // namespace laconic::python
