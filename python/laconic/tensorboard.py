"""A run's metrics as TensorBoard scalars, through tensorboard's own event writer and protocol
definitions (the `tensorboard` package: `scripts/install-deps --pypi` puts it in the PyPI
environment).

    lt.Sync(model, recipe, out="runs/x", tensorboard=True)          # live, into runs/x/tensorboard
    lt.Sync(model, recipe, tensorboard=SummaryWriter("tb/x"))        # live, the script's own writer
    python -m laconic.tensorboard runs/a runs/b --logdir tb          # finished (or running) runs
    python -m laconic.tensorboard runs/a --logdir tb --follow        # ... until the run ends

Each number of a metrics record (metrics.jsonl: loss, eval_loss, lr, bytes_sent, bytes_inter,
sim_time_s, examples_per_s, ...) becomes the scalar of that name at the record's step. Records of
runs several logs apart stay apart: each run's events go to LOGDIR/<the run directory's name>.
"""
import argparse
import json
import os
import sys
import time

__all__ = ["scalars", "RecordWriter", "write_run"]


def scalars(record):
    """(name, value) of every number in a metrics record but its step."""
    for key, value in record.items():
        if key != "step" and isinstance(value, (int, float)) and not isinstance(value, bool):
            yield key, float(value)


class RecordWriter:
    """Metrics records (JSON lines) into `writer`: anything with add_scalar(tag, value, step) and
    flush() (torch's SummaryWriter, left open for its owner), or, given a folder, tensorboard's own
    event file writer, made at the first record (so that only the rank that records writes a file)
    and closed by close()."""

    def __init__(self, writer):
        self._folder = os.fspath(writer) if isinstance(writer, (str, os.PathLike)) else None
        if self._folder is None and not callable(getattr(writer, "add_scalar", None)):
            import laconic
            raise laconic.Error(f"laconic.tensorboard: expected a folder or a writer with add_scalar() (torch's "
                                f"SummaryWriter), got {type(writer).__name__}")
        self.writer = None if self._folder else writer
        if self._folder:
            _tensorboard_modules()  # a missing package said now, not at the first record

    def __call__(self, line):
        if self.writer is None:
            self.writer = _EventWriter(self._folder)
        record = json.loads(line)
        step = int(record["step"])
        for name, value in scalars(record):
            self.writer.add_scalar(name, value, step)
        flush = getattr(self.writer, "flush", None)
        if flush:
            flush()

    def close(self):
        if self._folder and self.writer is not None:
            self.writer.close()


class _EventWriter:
    """tensorboard's EventFileWriter with Event/Summary protos: add_scalar as torch's SummaryWriter."""

    def __init__(self, logdir):
        event_pb2, summary_pb2, EventFileWriter = _tensorboard_modules()
        self._event, self._summary = event_pb2.Event, summary_pb2.Summary
        self._file = EventFileWriter(logdir)

    def add_scalar(self, tag, value, step):
        summary = self._summary(value=[self._summary.Value(tag=tag, simple_value=float(value))])
        self._file.add_event(self._event(wall_time=time.time(), step=int(step), summary=summary))

    def flush(self):
        self._file.flush()

    def close(self):
        self._file.close()


def _tensorboard_modules():
    try:
        from tensorboard.compat.proto import event_pb2, summary_pb2
        from tensorboard.summary.writer.event_file_writer import EventFileWriter
    except ImportError as e:
        import laconic
        raise laconic.Error(f"laconic.tensorboard: the tensorboard package is not installed for {sys.executable} "
                            f"({e}); scripts/install-deps --pypi puts it in the PyPI environment") from None
    return event_pb2, summary_pb2, EventFileWriter


def write_run(run_dir, logdir, follow=False, poll_s=1.0, out=sys.stdout, name=None):
    """Every record of run_dir/metrics.jsonl into logdir/<name> (default: the run directory's
    name); with follow, the records a running run adds too, until its summary.json appears.
    Returns the number of records written."""
    path = os.path.join(run_dir, "metrics.jsonl")
    target = os.path.join(logdir, name or os.path.basename(os.path.normpath(run_dir)))
    writer = RecordWriter(target)
    done, pending = 0, ""
    try:
        with _open_when_there(path, follow, poll_s) as f:
            while True:
                chunk = f.read()
                pending += chunk
                *lines, pending = pending.split("\n")
                for line in lines:
                    if line.strip():
                        writer(line)
                        done += 1
                if not follow or (not chunk and os.path.exists(os.path.join(run_dir, "summary.json"))):
                    break
                if not chunk:
                    time.sleep(poll_s)
    finally:
        writer.close()
    print(f"laconic.tensorboard: {done} records of {run_dir} in {target}", file=out)
    return done


def write_stream(stream, logdir):
    """Every metrics record (a JSON line) read from `stream` until its end, into logdir itself."""
    writer, done = RecordWriter(logdir), 0
    try:
        for line in stream:
            if line.strip():
                writer(line)  # flushed: each record visible to TensorBoard as it comes
                done += 1
    finally:
        writer.close()
    return done


def _open_when_there(path, follow, poll_s):
    while follow and not os.path.exists(path):
        time.sleep(poll_s)
    try:
        return open(path)
    except OSError as e:
        import laconic
        raise laconic.Error(f"{path}: cannot read the run's records: {e.strerror}") from None


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m laconic.tensorboard", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="*", help="run directories (each with its metrics.jsonl)")
    ap.add_argument("--logdir", required=True, help="TensorBoard's log directory: each run goes to LOGDIR/<its name>")
    ap.add_argument("--follow", action="store_true", help="keep adding a running run's records until it ends")
    ap.add_argument("--stdin", action="store_true", help="records from stdin until it closes, into LOGDIR itself")
    ap.add_argument("--names", help="N1,N2,...: each run's folder under LOGDIR (default: its directory's name)")
    a = ap.parse_args(argv)
    if a.stdin == bool(a.runs):
        ap.error("give run directories, or --stdin")
    names = a.names.split(",") if a.names else [None] * len(a.runs)
    if len(names) != len(a.runs):
        ap.error(f"--names: expected {len(a.runs)} names, one per run, got {len(names)}")
    if a.stdin:
        write_stream(sys.stdin, a.logdir)
    for run, name in zip(a.runs, names):
        write_run(run, a.logdir, follow=a.follow, name=name)


if __name__ == "__main__":
    import laconic  # its hook prints a laconic.Error as one line, exit 2
    main()
