"""examples/hf_llama at a tiny size: Hugging Face models built from a config train through lt.Sync
on the fortunes tokens: a GPT2LMHeadModel alone under bf16 autocast with 2 accumulated
micro-batches, and a LlamaForCausalLM on 2 torchrun processes with DiLoCo and with streaming
DiLoCo; each run's weights saved with save_pretrained load back with from_pretrained to the same
held-out loss (the example checks it and says so). Skips without transformers (Debian's torch:
scripts/install-deps --pypi)."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _setup import setup_torch, torchrun, torchrun_env  # noqa: E402

TRAINER, SOURCE = setup_torch()
try:
    import transformers  # noqa: F401
except ImportError as e:
    print(f"skipped: transformers is not installed for this interpreter ({e}; scripts/install-deps --pypi)")
    sys.exit(77)

EXAMPLE = os.path.join(SOURCE, "examples", "hf_llama", "train.py")
tmp = tempfile.mkdtemp(prefix="laconic-hf-")
TINY = ["--vocab", "300", "--dim", "32", "--layers", "1", "--heads", "2", "--seq-len", "32", "--eval-sequences", "16",
        "--warmup", "2", "--set", "train.steps=8", "--set", "train.micro_batch=4", "--set", "train.eval_every=4",
        "--set", "train.log_every=4"]


def check(name, cmd):
    out = os.path.join(tmp, name)
    done = subprocess.run(cmd + ["--out", out], env=torchrun_env(), timeout=300, capture_output=True, text=True)
    assert done.returncode == 0, f"{name}: exit {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    assert "from_pretrained gives the same held-out loss" in done.stdout, f"{name}: no reload check\n{done.stdout}"
    summary = json.load(open(os.path.join(out, "summary.json")))
    assert summary["steps"] == 8, f"{name}: {summary['steps']} steps"
    print(f"ok: {name}: 8 steps, eval loss {summary['eval_loss']:.4f}, save_pretrained / from_pretrained agree")


try:
    data = os.path.join(tmp, "data")
    subprocess.run([TRAINER, "tokenize", "--input", "/usr/share/games/fortunes", "--extensions", "", "--vocab-size",
                    "300", "--out", data], check=True, stdout=subprocess.DEVNULL)
    check("gpt2_bf16_accum", [sys.executable, EXAMPLE, "--data", data, "--model", "gpt2", "--bf16"] + TINY +
          ["--set", "distributed.world_size=1", "--set", "network.groups=1", "--set", "train.grad_accum=2"])
    for strategy in ("diloco", "streaming_diloco"):
        check(f"llama_{strategy}", torchrun(2) + [EXAMPLE, "--data", data, "--model", "llama"] + TINY +
              ["--set", "distributed.world_size=2", "--set", "network.groups=2", "--set", f"sync.strategy={strategy}",
               "--set", f"sync.{strategy}.period=4"])
finally:
    shutil.rmtree(tmp, ignore_errors=True)
