"""`import laconic` imports neither torch nor numpy (numpy comes with Run.series), names its error
laconic.Error, and installs its excepthook in front of the one that was there."""
import sys

from _setup import setup

setup()
import laconic  # noqa: E402

for heavy in ("torch", "numpy"):
    assert heavy not in sys.modules, f"import laconic imported {heavy}"
assert issubclass(laconic.Error, Exception) and laconic.Error.__module__ == "laconic", laconic.Error
assert sys.excepthook is laconic._excepthook
assert laconic._previous_excepthook is sys.__excepthook__
print("import: laconic imports without torch or numpy; laconic.Error and its excepthook are in place")
