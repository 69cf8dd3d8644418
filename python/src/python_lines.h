// The trainer's log as lines handed to a Python text stream (python/src: module.cpp, session.cpp).
#pragma once

#include <pybind11/pybind11.h>

#include <streambuf>
#include <string>
#include <utility>

namespace laconic::python {

namespace py = pybind11;

// The trainer's log as lines handed to a Python text stream's write() (sys.stdout, a file): the
// trainer writes from its own threads with the GIL released, so each complete line takes the GIL
// for its write. A stream that raises is reported once as unraisable and the log goes quiet
// (the ostream turns bad), the training goes on.
class PythonLines : public std::streambuf {
 public:
  explicit PythonLines(py::object stream) : stream_(std::move(stream)) {}

 protected:
  int_type overflow(int_type c) override {
    if (traits_type::eq_int_type(c, traits_type::eof())) return traits_type::not_eof(c);
    line_ += traits_type::to_char_type(c);
    if (c == '\n' && !emit()) return traits_type::eof();
    return c;
  }
  int sync() override { return emit() ? 0 : -1; }

 private:
  bool emit() {
    if (line_.empty()) return true;
    py::gil_scoped_acquire gil;
    bool ok = true;
    try {
      stream_.attr("write")(line_);
      stream_.attr("flush")();
    } catch (py::error_already_set& e) {
      e.discard_as_unraisable("laconic.train's log");
      ok = false;
    }
    line_.clear();
    return ok;
  }

  py::object stream_;
  std::string line_;
};

}  // namespace laconic::python
