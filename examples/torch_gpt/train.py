"""A GPT written in plain PyTorch, trained with Laconic's sync strategies through laconic.torch.

The model, the data and the inner optimizer (AdamW, warmup then cosine decay) are this script's;
the recipe says how the processes sync: every step (`allreduce`), or DiLoCo's outer step every H
steps. Each process is one rank:

    trainer tokenize --input /usr/share/games/fortunes --extensions "" --vocab-size 2048 --out data
    mpirun -np 4 python3 train.py --data data --recipe gpt.toml --out runs/allreduce
    mpirun -np 4 python3 train.py --data data --recipe gpt.toml --out runs/diloco --set sync.strategy=diloco

(or 4 processes with LACONIC_RANK, LACONIC_WORLD_SIZE and LACONIC_STORE=file:DIR; or one alone).
Model size: --dim, --layers, --heads, --seq-len. See README.md beside this file.
"""
import argparse
import math
import os
import tomllib

import numpy as np
import torch
import torch.nn.functional as F

import laconic
import laconic.torch as lt

# ---- data: llm.c token files as `trainer tokenize` writes them ----

_MAGIC, _VERSION, _HEADER_INTS = 20240520, 1, 256


def load_tokens(path, vocab):
    """The uint16 tokens of an llm.c .bin file (header: 256 int32, magic, version, token count)."""
    header = np.fromfile(path, dtype=np.int32, count=_HEADER_INTS)
    if header.size != _HEADER_INTS or header[0] != _MAGIC or header[1] != _VERSION:
        raise laconic.Error(f"{path}: expected an llm.c token file (magic {_MAGIC}, version {_VERSION}); "
                            "write one with trainer tokenize")
    tokens = np.fromfile(path, dtype=np.uint16, offset=_HEADER_INTS * 4)
    if tokens.size != header[2]:
        raise laconic.Error(f"{path}: header says {header[2]} tokens, the file holds {tokens.size}")
    if tokens.size and int(tokens.max()) >= vocab:
        raise laconic.Error(f"{path}: token id {int(tokens.max())} >= --vocab {vocab} "
                            "(trainer tokenize's --vocab-size)")
    return torch.from_numpy(tokens.astype(np.int64))


class Shard:
    """Rank `data_rank` of `data_world` reads the `data_rank`-th contiguous part of the training
    tokens; step s's micro-batch m is b windows of seq_len + 1 tokens at offsets drawn from a
    generator seeded with (seed, s, m, data_rank), so a resumed run reads what it would have."""

    def __init__(self, tokens, data_rank, data_world, seq_len, seed):
        n = tokens.numel() // data_world
        self.tokens = tokens[data_rank * n:(data_rank + 1) * n]
        self.seq_len, self.seed, self.rank = seq_len, seed, data_rank
        if n <= seq_len + 1:
            raise laconic.Error(f"the training tokens ({tokens.numel()}) are too few for {data_world} shards of "
                                f"windows of {seq_len + 1}")

    def batch(self, step, micro, b):
        g = torch.Generator().manual_seed(((self.seed * 1_000_003 + step) * 64 + micro) * 4096 + self.rank)
        starts = torch.randint(0, self.tokens.numel() - self.seq_len - 1, (b,), generator=g)
        rows = torch.stack([self.tokens[s:s + self.seq_len + 1] for s in starts.tolist()])
        return rows[:, :-1], rows[:, 1:]


# ---- model: a decoder-only transformer (GPT-2's layout: pre-LN blocks, tied embedding) ----


class Block(torch.nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = torch.nn.LayerNorm(dim)
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.proj = torch.nn.Linear(dim, dim)
        self.ln2 = torch.nn.LayerNorm(dim)
        self.fc = torch.nn.Linear(dim, 4 * dim)
        self.out = torch.nn.Linear(4 * dim, dim)

    def forward(self, x, mask):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        # [B, T, C] -> [B, heads, T, C / heads]; scores [B, heads, T, T], future positions masked
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(C // self.heads))
        att = att.masked_fill(mask[:T, :T], float("-inf")).softmax(dim=-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(B, T, C))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class GPT(torch.nn.Module):
    def __init__(self, vocab, seq_len, dim, layers, heads):
        super().__init__()
        self.tok = torch.nn.Embedding(vocab, dim)
        self.pos = torch.nn.Embedding(seq_len, dim)
        self.blocks = torch.nn.ModuleList(Block(dim, heads) for _ in range(layers))
        self.ln = torch.nn.LayerNorm(dim)
        self.head = torch.nn.Linear(dim, vocab, bias=False)
        self.head.weight = self.tok.weight  # tied: one parameter, which lt.Sync counts once
        self.register_buffer("mask", torch.triu(torch.ones(seq_len, seq_len, dtype=torch.bool), diagonal=1),
                             persistent=False)
        # GPT-2's initialisation: N(0, 0.02), residual projections scaled by 1 / sqrt(2 layers)
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                torch.nn.init.zeros_(p)
            elif p.dim() >= 2:
                std = 0.02 / math.sqrt(2 * layers) if name.endswith(("proj.weight", "out.weight")) else 0.02
                torch.nn.init.normal_(p, std=std)

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1]))
        for block in self.blocks:
            x = block(x, self.mask)
        return self.head(self.ln(x))

    def flops_per_sequence(self, seq_len):
        """Training FLOPs of one sequence, 3 x the forward's (backward is twice the forward): 2 per
        multiply-add of the linear layers (12 dim^2 per block and the head's vocab x dim, per
        token) and of attention's QK^T and AV (2 x seq_len^2 x dim per block); the embedding
        lookups have none."""
        linear = sum(m.weight.numel() for m in self.modules() if isinstance(m, torch.nn.Linear))
        attention = sum(2 * seq_len * seq_len * b.qkv.in_features for b in self.blocks)
        return 3 * 2 * (linear * seq_len + attention)


def loss_of(model, x, y):
    return F.cross_entropy(model(x).view(-1, model.head.out_features), y.reshape(-1))


def held_out(model, val, seq_len, sequences):
    """The held-out next-token loss and accuracy over the first `sequences` disjoint windows of
    val.bin (rank 0 calls it every train.eval_every steps and after the last)."""
    n = min(sequences, (val.numel() - 1) // seq_len)
    rows = val[:n * seq_len + 1]
    x, y = rows[:-1].view(n, seq_len), rows[1:].view(n, seq_len)
    model.eval()
    loss = hits = 0.0
    for i in range(0, n, 32):
        logits = model(x[i:i + 32])
        loss += F.cross_entropy(logits.view(-1, logits.shape[-1]), y[i:i + 32].reshape(-1), reduction="sum").item()
        hits += (logits.argmax(dim=-1) == y[i:i + 32]).sum().item()
    model.train()
    return loss / y.numel(), hits / y.numel()


def lr_at(step, steps, lr, warmup):
    """Linear warmup, then cosine decay to lr / 10 (GPT-2 / nanoGPT's schedule)."""
    if step < warmup:
        return lr * (step + 1) / warmup
    t = (step - warmup) / max(1, steps - warmup)
    return lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * t)))


def value(text):
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return {"true": True, "false": False}.get(text, text)


def setting(recipe, overrides, key, default):
    """A [train] key as the run reads it: the override, else the recipe's, else the default."""
    if key in overrides:
        return overrides[key]
    with open(recipe, "rb") as f:
        section, name = key.split(".")
        return tomllib.load(f).get(section, {}).get(name, default)


def add_arguments(ap):
    """The options this example shares with examples/hf_llama: the data, the recipe's overrides,
    the model's size, the schedule and the seed."""
    ap.add_argument("--data", required=True, help="folder of trainer tokenize's train.bin, val.bin, tokenizer.txt")
    ap.add_argument("--recipe", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "gpt.toml"))
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a recipe override")
    ap.add_argument("--vocab", type=int, default=2048, help="trainer tokenize's --vocab-size")
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--seq-len", type=int, default=64)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--eval-sequences", type=int, default=128, help="held-out windows of seq-len in eval_fn")
    ap.add_argument("--seed", type=int, default=1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_arguments(ap)
    ap.add_argument("--out", default="", help="the run directory")
    ap.add_argument("--resume", default=None, help='"auto": continue the run in --out from its newest checkpoint')
    a = ap.parse_args()
    overrides = dict((kv.split("=", 1)[0], value(kv.split("=", 1)[1])) for kv in a.set)

    torch.set_num_threads(1)  # one core per process: 4 ranks share this machine's cores
    torch.manual_seed(a.seed)  # every rank builds the same model (lt.Sync broadcasts rank 0's anyway)
    model = GPT(a.vocab, a.seq_len, a.dim, a.layers, a.heads)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.95))
    train, val = (load_tokens(os.path.join(a.data, f"{split}.bin"), a.vocab) for split in ("train", "val"))
    sync = lt.Sync(model, recipe=a.recipe, overrides=overrides, out=a.out or None, optimizer=opt, resume=a.resume,
                   eval_fn=lambda: held_out(model, val, a.seq_len, a.eval_sequences),
                   flops_per_example=model.flops_per_sequence(a.seq_len))
    train_loop(sync, opt, Shard(train, sync.data_rank, sync.data_world, a.seq_len, a.seed), a, overrides,
               lambda x, y: loss_of(model, x, y))
    sync.finish()


def train_loop(sync, opt, shard, a, overrides, loss_fn):
    """The steps lt.Sync has left: the schedule's learning rate, then train.grad_accum micro-batches
    of this rank's shard, each loss_fn(x, y)'s backward and sync.step (examples/hf_llama's too)."""
    micro = int(setting(a.recipe, overrides, "train.micro_batch", 32))
    accum = int(setting(a.recipe, overrides, "train.grad_accum", 1))
    while not sync.done:
        step = sync.step_count
        for group in opt.param_groups:
            group["lr"] = lr_at(step, sync.steps, a.lr, a.warmup)
        for m in range(accum):
            x, y = shard.batch(step, m, micro)
            loss = loss_fn(x, y)
            loss.backward()
            sync.step(opt, loss=loss)


if __name__ == "__main__":
    main()
