// laconic._laconic: the native half of the Python package (python/laconic/). Bindings only: the
// trainer in-process and the error type; reading a run directory back, the overrides' formatting
// and the error hook are Python (python/laconic/__init__.py, run.py).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <filesystem>
#include <ostream>
#include <streambuf>
#include <string>
#include <utility>
#include <vector>

#include "laconic/laconic.h"
#include "python_lines.h"

namespace py = pybind11;

namespace {

struct Trained {
  std::string run_dir;
  std::string note;     // why the run did not train to its end ("" = it did)
  int stop_signal = 0;  // the signal that stopped it (0: none)
};

// `overrides` are "section.key=value" as the command line takes them; `out` "" = the recipe's
// [run] out_dir / name; `log` None = silent. The GIL is released for loading the data and training.
Trained train(const std::string& recipe_path, const std::string& out, const std::vector<std::string>& overrides,
              const py::object& log, const std::string& resume) {
  const laconic::Recipe recipe = laconic::load_recipe(recipe_path, overrides);
  // MPI is set up once per process, before the data is loaded (the trainer's command line does
  // it): `mpirun trainer` is the way to MPI; here the workers are threads.
  if (laconic::resolve_backend(recipe) == laconic::BackendKind::mpi)
    LC_INPUT_ERROR(recipe_path, ": distributed.backend: laconic.train trains on the threads backend, got mpi",
                   recipe.distributed.backend == laconic::BackendKind::auto_ ? " (auto, under an MPI launcher)" : "",
                   ": train it with `mpirun ... trainer --recipe`, or here outside mpirun with backend "
                   "\"auto\" or \"threads\"");
  laconic::TrainOptions opts;
  opts.run_dir = out.empty() ? (std::filesystem::path(recipe.run.out_dir) / recipe.run.name).string() : out;
  opts.resume = resume;
  // SIGINT, SIGTERM, SIGUSR1 during the run: a checkpoint after the current step, then the
  // caller decides (laconic.train raises KeyboardInterrupt or exits 128 + the signal).
  opts.stop_on_signals = true;
  laconic::python::PythonLines lines(log);
  std::ostream log_stream(&lines);
  if (!log.is_none()) opts.log = &log_stream;
  Trained t{opts.run_dir, "", 0};
  {
    py::gil_scoped_release release;
    try {
      const laconic::TrainSummary s = laconic::train(recipe, opts);
      if (opts.log) *opts.log << laconic::done_line(s) << "; results in " << opts.run_dir << "/" << std::endl;
      t.stop_signal = s.stop_signal;
      if (!s.stopped.empty())
        t.note = laconic::detail::concat(
            "stopped by ", s.stopped == "signal" ? s.signal : "train.time_limit", " after step ", s.steps, " of ",
            s.planned_steps, "; ",
            s.checkpoint.empty() ? "no checkpoint" : "checkpoint " + s.checkpoint + " (continue with resume=\"auto\")");
    } catch (const laconic::RunFinished& e) {
      t.note = e.what();
    }
  }
  return t;
}

}  // namespace

namespace laconic::python {
void bind_session(py::module_& m);  // session.cpp
}

PYBIND11_MODULE(_laconic, m) {
  m.doc() = "Laconic's native module (use the package laconic)";
  // A user's mistake (recipe, key, file): one line naming it. laconic's excepthook prints it as
  // that one line and exits 2 (laconic/__init__.py).
  py::register_exception<laconic::InputError>(m, "Error");
  py::class_<Trained>(m, "Trained")
      .def_readonly("run_dir", &Trained::run_dir)
      .def_readonly("note", &Trained::note)
      .def_readonly("stop_signal", &Trained::stop_signal);
  m.def("train", &train, py::arg("recipe"), py::arg("out"), py::arg("overrides"), py::arg("log"), py::arg("resume"),
        "Trains a recipe in this process (laconic.train is the documented entry point).");
  laconic::python::bind_session(m);
}
