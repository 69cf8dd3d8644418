"""A Hugging Face model (LlamaForCausalLM, or GPT2LMHeadModel), built from a config (nothing is
downloaded), trained on Debian's fortunes through laconic.torch with the recipe's strategy:

    trainer tokenize --input /usr/share/games/fortunes --extensions "" --vocab-size 2048 --out data
    torchrun --nproc-per-node 4 train.py --data data --out runs/llama_allreduce
    torchrun --nproc-per-node 4 train.py --data data --out runs/llama_diloco \\
        --set sync.strategy=diloco --set sync.intra=allreduce
    python3 train.py --data data --model gpt2 --bf16 --set distributed.world_size=1 --set network.groups=1

The recipe is examples/torch_gpt/gpt.toml (two simulated datacenters), and so are the data, its
shards and the learning-rate schedule (examples/torch_gpt/train.py's). --bf16 trains under bf16
autocast; the recipe's train.grad_accum accumulates micro-batches; the embeddings are tied (one
parameter, which lt.Sync counts once). At the end rank 0 saves the weights with save_pretrained
into OUT/hf, loads them back with from_pretrained and checks that they give the same held-out
loss. Needs transformers (the PyPI environment: scripts/install-deps --pypi).
"""
import argparse
import importlib.util
import os
import sys

import torch

import laconic
import laconic.torch as lt

HERE = os.path.dirname(os.path.abspath(__file__))


def _torch_gpt():
    """examples/torch_gpt/train.py, whose data, shards and schedule this example shares."""
    spec = importlib.util.spec_from_file_location("torch_gpt_train", os.path.join(HERE, "..", "torch_gpt", "train.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_gpt = _torch_gpt()
Shard, load_tokens, value = _gpt.Shard, _gpt.load_tokens, _gpt.value

try:
    import transformers
except ImportError as e:
    raise laconic.Error(f"examples/hf_llama: transformers is not installed for {sys.executable} ({e}); "
                        "scripts/install-deps --pypi puts it in the PyPI environment") from None
transformers.utils.logging.disable_progress_bar()


def build(kind, vocab, seq_len, dim, layers, heads):
    """A small model of `kind` from its config, tied input and output embeddings."""
    if kind == "llama":
        config = transformers.LlamaConfig(vocab_size=vocab, hidden_size=dim, intermediate_size=4 * dim,
                                          num_hidden_layers=layers, num_attention_heads=heads,
                                          num_key_value_heads=heads, max_position_embeddings=seq_len,
                                          tie_word_embeddings=True)
        return transformers.LlamaForCausalLM(config)
    config = transformers.GPT2Config(vocab_size=vocab, n_positions=seq_len, n_embd=dim, n_layer=layers, n_head=heads,
                                     tie_word_embeddings=True)
    return transformers.GPT2LMHeadModel(config)


def next_token_loss(model, x, y):
    """The mean next-token cross-entropy of windows x -> y (the windows' own shift)."""
    logits = model(input_ids=x).logits
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), y.reshape(-1))


@torch.no_grad()
def held_out(model, val, seq_len, sequences):
    """The held-out next-token loss over the first `sequences` disjoint windows of val.bin, in fp32."""
    n = min(sequences, (val.numel() - 1) // seq_len)
    rows = val[:n * seq_len + 1]
    x, y = rows[:-1].view(n, seq_len), rows[1:].view(n, seq_len)
    was = model.training
    model.eval()
    loss = sum(next_token_loss(model, x[i:i + 32], y[i:i + 32]).item() * len(x[i:i + 32]) for i in range(0, n, 32))
    model.train(was)
    return loss / n


def save_and_reload(model, out, val, seq_len, sequences):
    """save_pretrained, from_pretrained, and the same held-out loss from both."""
    path = os.path.join(out, "hf")
    model.save_pretrained(path)
    loaded = transformers.AutoModelForCausalLM.from_pretrained(path)
    before, after = held_out(model, val, seq_len, sequences), held_out(loaded, val, seq_len, sequences)
    if before != after:
        raise SystemExit(f"examples/hf_llama: {path}: held-out loss {after!r} after from_pretrained, {before!r} before")
    print(f"hf_llama: weights in {path} (save_pretrained); from_pretrained gives the same held-out loss {after:.4f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    _gpt.add_arguments(ap)  # torch_gpt's data, recipe (gpt.toml), model size, schedule and seed
    ap.add_argument("--model", choices=("llama", "gpt2"), default="llama")
    ap.add_argument("--out", default="runs/hf_llama", help="the run directory")
    ap.add_argument("--bf16", action="store_true", help="forward and backward under bf16 autocast")
    a = ap.parse_args()
    overrides = dict((kv.split("=", 1)[0], value(kv.split("=", 1)[1])) for kv in a.set)

    torch.set_num_threads(1)  # one core per process
    torch.manual_seed(a.seed)
    model = build(a.model, a.vocab, a.seq_len, a.dim, a.layers, a.heads)
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.95), weight_decay=0.1)
    train, val = (load_tokens(os.path.join(a.data, f"{split}.bin"), a.vocab) for split in ("train", "val"))
    params = sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())
    sync = lt.Sync(model, recipe=a.recipe, overrides=overrides, out=a.out, optimizer=opt,
                   eval_fn=lambda: held_out(model, val, a.seq_len, a.eval_sequences),
                   flops_per_example=6.0 * params * a.seq_len)  # dense estimate per sequence

    def loss_fn(x, y):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.bf16):
            return next_token_loss(model, x, y)

    _gpt.train_loop(sync, opt, Shard(train, sync.data_rank, sync.data_world, a.seq_len, a.seed), a, overrides, loss_fn)
    sync.finish()
    if sync.rank == 0:
        save_and_reload(model, a.out, val, a.seq_len, a.eval_sequences)


if __name__ == "__main__":
    main()
