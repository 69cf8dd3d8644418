#!/usr/bin/env python3
"""One training step (zero_grad, forward, backward, optimizer step) of the models that
tests/bench/bert_step_bench.cpp times, written in PyTorch 1.13 so the two can be compared on the
same machine (tests/bench/bert_step.sh runs them in alternation).

  bert_step_torch.py [--threads N] [--reps N] [--warmup N] [--model bert|mlp|gpt|all] [--optim lamb|adamw]

bert: what workloads/models/bert.cpp computes, layer for layer: post-LN encoder (Devlin et al.
2019) with e = Drop(LN(E[tok] + P[t])); per block x = LN(x + Drop(Attn(x))), x = LN(x + Drop(FFN(x)))
with one fused QKV projection, dropout on the attention probabilities, exact GELU, LayerNorm eps
1e-12; the MLM head runs on the predicted positions only (gathered first, as ours):
h = LN(GELU(W x + b)), logits = h E^T + bias with E the (tied) token embedding; mean cross-entropy.
Sizes: vocab 4000, seq_len 128, dim 128, 2 layers, 4 heads, ffn 512, dropout 0.1, 32 sequences,
19 predicted positions per sequence. Optimizer: LAMB written here with torch ops (the formulas of
optimizers/lamb.h: per-tensor trust ratio on the decay group, trust 1 on biases and LayerNorm
parameters), or torch.optim.AdamW (--optim adamw) as a stand-in made of torch's own kernels.

mlp: 784-512-256-10 ReLU at batch 256, torch.optim.SGD momentum 0.9, weight decay 5e-4 on the
weights only (our decay group).

gpt: what workloads/models/gpt.cpp computes: pre-LN decoder (GPT-2) with x = E[tok] + P[t]; per
block x = x + Attn(LN1(x)) with a causal mask, x = x + FFN(LN2(x)) (exact GELU, LayerNorm eps
1e-5); logits = LN_f(x) E^T (tied, no bias) at every position; mean cross-entropy. Sizes: vocab
4000, seq_len 128, dim 192, 4 layers, 6 heads, ffn 768, no dropout, 16 sequences.
torch.optim.AdamW (betas 0.9/0.95, weight decay 0.1 on weights and embeddings only).

Rows match bert_step_bench's: ms/step mean, min and median over the timed steps after warm-up.
"""
import argparse
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, dim, heads, ffn, p):
        super().__init__()
        self.heads, self.p = heads, p
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.ln1 = nn.LayerNorm(dim, eps=1e-12)
        self.fc1 = nn.Linear(dim, ffn)
        self.fc2 = nn.Linear(ffn, dim)
        self.ln2 = nn.LayerNorm(dim, eps=1e-12)

    def forward(self, x):  # x: [B, T, dim]
        b, t, c = x.shape
        h, d = self.heads, c // self.heads
        # [B, T, 3, H, D] -> [3, B, H, T, D]: rows 0..dim-1 of the QKV weight make Q, as ours.
        q, k, v = self.qkv(x).view(b, t, 3, h, d).permute(2, 0, 3, 1, 4)
        s = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(d))
        probs = F.dropout(s.softmax(-1), self.p, self.training)
        ctx = torch.matmul(probs, v).transpose(1, 2).reshape(b, t, c)
        x = self.ln1(x + F.dropout(self.proj(ctx), self.p, self.training))
        f = self.fc2(F.gelu(self.fc1(x)))
        return self.ln2(x + F.dropout(f, self.p, self.training))


class Bert(nn.Module):
    def __init__(self, vocab, seq_len, dim, layers, heads, ffn, p):
        super().__init__()
        self.p = p
        self.tokens = nn.Embedding(vocab, dim)
        self.positions = nn.Embedding(seq_len, dim)
        self.embed_ln = nn.LayerNorm(dim, eps=1e-12)
        self.blocks = nn.ModuleList(Block(dim, heads, ffn, p) for _ in range(layers))
        self.head_fc = nn.Linear(dim, dim)
        self.head_ln = nn.LayerNorm(dim, eps=1e-12)
        self.head_bias = nn.Parameter(torch.zeros(vocab))
        for m in self.modules():  # BERT's init, as ours: N(0, 0.02^2) weights, zero biases
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)
            if isinstance(m, nn.Linear):
                nn.init.zeros_(m.bias)

    def forward(self, tokens, picked, targets):
        b, t = tokens.shape
        pos = torch.arange(t, device=tokens.device)
        x = self.embed_ln(self.tokens(tokens) + self.positions(pos))
        x = F.dropout(x, self.p, self.training)
        for blk in self.blocks:
            x = blk(x)
        g = x.reshape(b * t, -1).index_select(0, picked)  # [M, dim]: predicted positions only
        h = self.head_ln(F.gelu(self.head_fc(g)))
        logits = torch.addmm(self.head_bias, h, self.tokens.weight.t())  # tied
        return F.cross_entropy(logits, targets)


class GptBlock(nn.Module):
    def __init__(self, dim, heads, ffn):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(dim, eps=1e-5)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim, eps=1e-5)
        self.fc1 = nn.Linear(dim, ffn)
        self.fc2 = nn.Linear(ffn, dim)

    def forward(self, x, mask):  # x: [B, T, dim]; mask: [T, T], True above the diagonal
        b, t, c = x.shape
        h, d = self.heads, c // self.heads
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, h, d).permute(2, 0, 3, 1, 4)
        s = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(d))
        probs = s.masked_fill(mask, float("-inf")).softmax(-1)
        x = x + self.proj(torch.matmul(probs, v).transpose(1, 2).reshape(b, t, c))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class Gpt(nn.Module):
    def __init__(self, vocab, seq_len, dim, layers, heads, ffn):
        super().__init__()
        self.tokens = nn.Embedding(vocab, dim)
        self.positions = nn.Embedding(seq_len, dim)
        self.blocks = nn.ModuleList(GptBlock(dim, heads, ffn) for _ in range(layers))
        self.final_ln = nn.LayerNorm(dim, eps=1e-5)
        self.register_buffer("mask", torch.triu(torch.ones(seq_len, seq_len, dtype=torch.bool), 1))
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)
            if isinstance(m, nn.Linear):
                nn.init.zeros_(m.bias)

    def forward(self, tokens, targets):
        b, t = tokens.shape
        x = self.tokens(tokens) + self.positions(torch.arange(t, device=tokens.device))
        for blk in self.blocks:
            x = blk(x, self.mask[:t, :t])
        logits = torch.matmul(self.final_ln(x), self.tokens.weight.t())  # tied
        return F.cross_entropy(logits.view(b * t, -1), targets.view(-1))


def no_decay(name):  # biases and LayerNorm parameters, as ours (ParamGroup::no_decay)
    return name.endswith("bias") or "ln" in name


class Lamb:
    """optimizers/lamb.h's update (apex FusedLAMB semantics), in torch ops."""

    def __init__(self, named, lr, b1=0.9, b2=0.999, eps=1e-6, wd=0.01):
        self.groups = [(p, 0.0 if no_decay(n) else wd) for n, p in named]
        self.m = [torch.zeros_like(p) for p, _ in self.groups]
        self.v = [torch.zeros_like(p) for p, _ in self.groups]
        self.lr, self.b1, self.b2, self.eps, self.t = lr, b1, b2, eps, 0

    @torch.no_grad()
    def step(self):
        self.t += 1
        bc1, bc2 = 1 - self.b1 ** self.t, 1 - self.b2 ** self.t
        for (p, wd), m, v in zip(self.groups, self.m, self.v):
            g = p.grad
            m.mul_(self.b1).add_(g, alpha=1 - self.b1)
            v.mul_(self.b2).addcmul_(g, g, value=1 - self.b2)
            u = (m / bc1).div_((v / bc2).sqrt_().add_(self.eps))
            trust = 1.0
            if wd != 0.0:
                u.add_(p, alpha=wd)
                wn, un = p.norm().item(), u.norm().item()
                trust = wn / un if wn > 0 and un > 0 else 1.0
            p.add_(u, alpha=-self.lr * trust)

    def zero_grad(self):
        for p, _ in self.groups:
            p.grad = None


def bert_case(optim):
    vocab, seq, batch, predicted = 4000, 128, 32, 128 * 15 // 100
    model = Bert(vocab, seq, 128, 2, 4, 512, 0.1).train()
    tokens = torch.randint(0, vocab, (batch, seq))
    picked = torch.cat([b * seq + torch.randperm(seq)[:predicted] for b in range(batch)]).sort().values
    targets = torch.randint(0, vocab, (picked.numel(),))
    named = list(model.named_parameters())
    if optim == "lamb":
        opt = Lamb(named, 1e-3)
    else:
        decay = [p for n, p in named if not no_decay(n)]
        rest = [p for n, p in named if no_decay(n)]
        opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01},
                                 {"params": rest, "weight_decay": 0.0}], lr=1e-3, eps=1e-6)
    return "bert", batch, model, opt, lambda: model(tokens, picked, targets)


def mlp_case(_optim):
    batch = 256
    model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(),
                          nn.Linear(256, 10))
    x = torch.rand(batch, 784)
    y = torch.randint(0, 10, (batch,))
    named = list(model.named_parameters())
    opt = torch.optim.SGD([{"params": [p for n, p in named if not no_decay(n)], "weight_decay": 5e-4},
                           {"params": [p for n, p in named if no_decay(n)], "weight_decay": 0.0}],
                          lr=0.05, momentum=0.9)
    return "mlp", batch, model, opt, lambda: F.cross_entropy(model(x), y)


def gpt_case(_optim):
    vocab, seq, batch = 4000, 128, 16
    model = Gpt(vocab, seq, 192, 4, 6, 768).train()
    tokens = torch.randint(0, vocab, (batch, seq))
    targets = torch.randint(0, vocab, (batch, seq))
    named = list(model.named_parameters())
    opt = torch.optim.AdamW([{"params": [p for n, p in named if not no_decay(n)], "weight_decay": 0.1},
                             {"params": [p for n, p in named if no_decay(n)], "weight_decay": 0.0}],
                            lr=1e-3, betas=(0.9, 0.95), eps=1e-8)
    return "gpt", batch, model, opt, lambda: model(tokens, targets)


def bench(case, args, label):
    name, batch, model, opt, loss_fn = case
    times = []
    for s in range(args.warmup + args.reps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True) if isinstance(opt, torch.optim.Optimizer) else opt.zero_grad()
        loss_fn().backward()
        opt.step()
        dt = time.perf_counter() - t0
        if s >= args.warmup:
            times.append(dt)
    times.sort()
    mean = sum(times) / len(times)
    print(f"{label:<8} {name:<5} {batch:6d} {mean * 1e3:10.2f} {times[0] * 1e3:10.2f} "
          f"{times[len(times) // 2] * 1e3:10.2f}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--model", choices=["bert", "mlp", "gpt", "all"], default="all")
    ap.add_argument("--optim", choices=["lamb", "adamw"], default="lamb")
    ap.add_argument("--header", action="store_true")
    ap.add_argument("--label", help="the row's impl column (default torch-<threads>t)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    if args.header:
        print(f"{'impl':<8} {'model':<5} {'batch':>6} {'ms/step':>10} {'min ms':>10} {'median ms':>10}")
    label = args.label or f"torch-{args.threads}t"
    if args.model in ("bert", "all"):
        bench(bert_case(args.optim), args, label)
    if args.model in ("mlp", "all"):
        bench(mlp_case(args.optim), args, label)
    if args.model in ("gpt", "all"):
        bench(gpt_case(args.optim), args, label)


if __name__ == "__main__":
    main()
