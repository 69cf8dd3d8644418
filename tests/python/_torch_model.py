"""The laconic.torch tests' model and data: a small torch MLP and a deterministic synthetic
classification set, where step s's global batch is a fixed slice and rank r of W reads its
contiguous part (so W ranks at micro-batch b see exactly one rank's 4b at W = 4). A model of other
widths (an input wider than FEATURES) reads the same examples with their features repeated."""
import tomllib

import torch

FEATURES, HIDDEN, CLASSES, EXAMPLES = 12, 32, 4, 4096


def make_model(widths=(FEATURES, HIDDEN, HIDDEN, CLASSES)):
    """Linear layers of these widths (input first) with tanh between them."""
    torch.manual_seed(0)
    layers = []
    for i, o in zip(widths, widths[1:]):
        layers += [torch.nn.Linear(i, o), torch.nn.Tanh()]
    return torch.nn.Sequential(*layers[:-1])


def _widen(x, features):
    return x if features == FEATURES else x.repeat(1, -(-features // FEATURES))[:, :features]


def make_optimizer(model, name):
    if name == "adamw":
        return torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    return torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)


_g = torch.Generator().manual_seed(1234)
_X = torch.randn(EXAMPLES, FEATURES, generator=_g)
_W = torch.randn(FEATURES, CLASSES, generator=_g)
_Y = (_X @ _W + 0.5 * torch.randn(EXAMPLES, CLASSES, generator=_g)).argmax(dim=1)
_EX, _EY = _X[-512:], _Y[-512:]


def _setting(recipe, overrides, section, key, default):
    if f"{section}.{key}" in overrides:
        return overrides[f"{section}.{key}"]
    with open(recipe, "rb") as f:
        return tomllib.load(f).get(section, {}).get(key, default)


def micro_batch(recipe, overrides):
    return int(_setting(recipe, overrides, "train", "micro_batch", 32))


def grad_accum(recipe, overrides):
    return int(_setting(recipe, overrides, "train", "grad_accum", 1))


def batch(step, micro, rank, world, b, features=FEATURES):
    """Rank `rank` of `world`'s micro-batch `micro` of step `step` (b examples of `features`)."""
    per_step = 2048  # a global batch of at most this many examples
    start = step * per_step + (micro * world + rank) * b
    rows = torch.arange(start, start + b) % (EXAMPLES - 512)
    return _widen(_X[rows], features), _Y[rows]


def eval_loss(model, features=FEATURES):
    device = next(model.parameters()).device
    logits = model(_widen(_EX, features).to(device))
    labels = _EY.to(device)
    return (torch.nn.functional.cross_entropy(logits, labels).item(),
            (logits.argmax(dim=1) == labels).float().mean().item())
