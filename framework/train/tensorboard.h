// TensorBoard events of the trainer's runs, through tensorboard's own event writer and protocol
// definitions: the Python package laconic.tensorboard (python/laconic/tensorboard.py) in an
// interpreter that has the `tensorboard` package, so no event format is written by hand here.
// train.tensorboard = true streams each metrics record, as it is made, to
// `python -m laconic.tensorboard --stdin --logdir RUN/tensorboard`; `trainer compare --tensorboard
// LOGDIR` writes its runs' finished records. docs/torch.md "TensorBoard".
#pragma once

#include <string>
#include <sys/types.h>
#include <vector>

namespace laconic {

// The interpreter: LACONIC_TENSORBOARD_PYTHON, else the PyPI environment's python
// (scripts/install-deps --pypi: $LACONIC_VENV, /opt/laconic-venv, ~/.local/share/laconic/venv),
// checked to import tensorboard and laconic.tensorboard. An InputError naming `what` (the key or
// flag that asked) otherwise.
std::string tensorboard_python(const std::string& what);

// `python -m laconic.tensorboard ARGS` to its end, the build tree's package (beside this program)
// first on PYTHONPATH. Returns "" or what went wrong, in one line.
std::string run_tensorboard(const std::string& python, const std::vector<std::string>& args);

// The live stream of one run's records into `logdir`: the writer starts at the first record (so
// only the rank that records starts one) and ends when the stream is destroyed.
class TensorboardStream {
 public:
  TensorboardStream(std::string python, std::string logdir);
  ~TensorboardStream();  // closes the stream and waits for the writer (a minute at most, then kills it)
  TensorboardStream(const TensorboardStream&) = delete;
  TensorboardStream& operator=(const TensorboardStream&) = delete;
  // One record (a JSON line, no newline). A writer that died stops the stream with one warning on
  // stderr; the run goes on.
  void write(const std::string& line);

 private:
  void start();

  std::string python_, logdir_;
  int fd_ = -1;      // our end of the socket pair (MSG_NOSIGNAL: a dead writer raises no SIGPIPE)
  pid_t pid_ = -1;
  bool failed_ = false;
};

}  // namespace laconic
