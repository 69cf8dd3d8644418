"""torchft side by side (studies/torchft/side_by_side --tiny): torchft's local_sgd.DiLoCo with its
lighthouse and Managers, and lt.Sync's DiLoCo, on the same model, data and seeds over 2 replicas,
end with the same parameters to float rounding (the study exits non-zero otherwise); torchft's
default init_sync, which heals the replicas from the first at the first outer sync, is measured
apart; streaming DiLoCo over the same fragments agrees to float rounding without overlap and
differs with one overlapped step (the schedules differ). Skips without torchft (Debian's torch: scripts/install-deps --pypi)."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _setup import setup_torch  # noqa: E402

TRAINER, SOURCE = setup_torch()
try:
    import torchft  # noqa: F401
except ImportError as e:
    print(f"skipped: torchft is not installed for this interpreter ({e}; scripts/install-deps --pypi)")
    sys.exit(77)

out = tempfile.mkdtemp(prefix="laconic-torchft-")
try:
    subprocess.run([sys.executable, os.path.join(SOURCE, "studies", "torchft", "side_by_side"), "--tiny", "--out", out,
                    "--trainer", TRAINER], check=True, timeout=600)
    r = json.load(open(os.path.join(out, "results.json")))
    assert r["relative_difference"] < 1e-5, r
    assert r["relative_difference_init_sync"] > 1e-3, f"torchft's init_sync changed nothing: {r}"
    stream = r["streaming"]
    assert stream["streaming_tau0"]["relative_difference"] < 1e-5, stream
    assert stream["streaming_tau1"]["relative_difference"] > 1e-4, f"tau = 1 shifted nothing: {stream}"
    print(f"ok: torchft's DiLoCo (init_sync=False) and lt.Sync's agree to {r['relative_difference']:.1e}; "
          f"torchft's default init_sync differs by {r['relative_difference_init_sync']:.2g}; streaming DiLoCo agrees to "
          f"{stream['streaming_tau0']['relative_difference']:.1e} at tau 0")
finally:
    shutil.rmtree(out, ignore_errors=True)
