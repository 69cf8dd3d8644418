"""A finished run's directory read back: summary.json, recipe.resolved.toml, metrics.jsonl."""
import json
import os
import tomllib

from laconic._laconic import Error


def _read(directory, name):
    path = os.path.join(directory, name)
    try:
        with open(path, "rb") as f:
            return path, f.read()
    except FileNotFoundError:
        raise Error(f"{directory}: not a run directory: {name} is missing") from None
    except OSError as e:
        raise Error(f"{path}: cannot read: {e.strerror}") from None


def _json_object(path, text, where):
    try:
        value = json.loads(text)
    except (ValueError, UnicodeDecodeError) as e:  # JSONDecodeError is a ValueError
        raise Error(f"{where}: malformed JSON ({e})") from None
    if not isinstance(value, dict):
        raise Error(f"{where}: expected a JSON object, got {type(value).__name__}")
    return value


class Run:
    """A run directory as the trainer leaves it.

    summary  dict: summary.json
    recipe   dict: recipe.resolved.toml (every key, defaults included)
    records  list of dicts: metrics.jsonl, one per logged step
    note     None, or why laconic.train did not train (the run had finished before) or stopped early

    A directory that is not a run, or a file in it that is malformed, raises laconic.Error naming
    the directory or the file (and line).
    """

    def __init__(self, directory):
        self.path = os.fspath(directory)
        if not os.path.isdir(self.path):
            raise Error(f"{self.path}: not a run directory (no such directory)")
        path, text = _read(self.path, "summary.json")
        self.summary = _json_object(path, text, path)
        path, text = _read(self.path, "recipe.resolved.toml")
        try:
            self.recipe = tomllib.loads(text.decode("utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
            raise Error(f"{path}: malformed TOML ({e})") from None
        path, text = _read(self.path, "metrics.jsonl")
        self.records = []
        for number, line in enumerate(text.splitlines(), 1):
            if line.strip():
                record = _json_object(path, line, f"{path}:{number}")
                if not isinstance(record.get("step"), int):
                    raise Error(f"{path}:{number}: expected an integer \"step\", got {record.get('step')!r}")
                self.records.append(record)
        self.note = None

    def series(self, key):
        """(steps, values): numpy arrays (int64, float64) over the records that hold `key`, in step
        order as written; null (a NaN the trainer wrote) reads as NaN. laconic.Error when no record
        holds it."""
        import numpy as np  # here, so that `import laconic` stays light

        held = [r for r in self.records if key in r]
        if not held:
            keys = sorted({k for r in self.records for k in r})
            raise Error(f"{os.path.join(self.path, 'metrics.jsonl')}: no record has {key!r} "
                        f"(keys: {', '.join(keys) or 'none, no records'})")
        steps = np.array([r["step"] for r in held], dtype=np.int64)
        values = np.array([np.nan if r[key] is None else r[key] for r in held], dtype=np.float64)
        return steps, values

    def __repr__(self):
        return f"laconic.Run({self.path!r})"
