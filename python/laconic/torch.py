"""Laconic's sync strategies on a PyTorch model: laconic.torch.Sync.

    import laconic.torch as lt
    sync = lt.Sync(model, recipe="recipes/cross_dc_diloco.toml", overrides={"sync.diloco.period": 20},
                   out="runs/mine")
    for batch in shard(loader, sync.data_rank, sync.data_world):
        loss = loss_fn(model, batch)
        loss.backward()
        sync.step(optimizer, loss=loss)
        if sync.done:
            break
    sync.finish()

The model's parameters and gradients become views of one flat Laconic parameter store (no copy per
step): tied parameters count once, parameters that need no gradient stay out (said once). Each
process is one rank: `mpirun -np N python3 train.py` (MPI), or N processes started with
LACONIC_RANK, LACONIC_WORLD_SIZE and LACONIC_STORE=file:DIR (gloo), or `torchrun --nproc-per-node N
train.py` as it is (gloo, meeting through torch's own rendezvous store), or one process alone. The recipe's [sync], [distributed], [network], [checkpoint],
[guards] and [train] settings apply; its [model], [data] and [optimizer] are yours (ignored).
Threads are yours too: torch's and OpenBLAS's thread counts stay as you set them.

sync.step(optimizer, loss) after each backward:
  - with train.grad_accum = k, the first k - 1 calls only count the micro-batch (gradients add up
    in the store); the k-th reduces the mean gradient, then
  - reduces the gradients (data-parallel strategies start on each bucket while backward runs,
    through gradient hooks), runs optimizer.step(), then the strategy's outer work (DiLoCo's outer
    step every period), zeroes the gradients for the next step, and runs Laconic's hooks: metrics,
    trace, checkpoints (with optimizer.state_dict() and the model's buffers in torch's format
    beside Laconic's shards), evaluation (eval_fn), guards.
Do not call optimizer.zero_grad(): sync.step zeroes the store (a gradient set to None or replaced
is copied back into the store, at a cost). SIGTERM or SIGINT stops after the current step with a
checkpoint, as the trainer does; lt.Sync(..., resume="auto") continues bit for bit (read your data
from sync.first_step on).
"""
import os
import sys

import torch
import torch.utils.dlpack

import laconic
from laconic import _laconic
from laconic import _override_list
from laconic.run import Run

__all__ = ["Sync"]

_TORCH_FILE = "torch.rank-{rank}.pt"


def _cuda_index(device):
    """The GPU of the parameters (-1: the CPU)."""
    if device is None or device.type != "cuda":
        return -1
    return device.index if device.index is not None else torch.cuda.current_device()


def _sections_of_yours(recipe):
    """The recipe's sections that lt.Sync leaves to the script ([model], [data], [optimizer],
    [schedule]), present in its file."""
    try:
        import tomllib
    except ImportError:  # Python < 3.11: the note is skipped
        return []
    try:
        with open(recipe, "rb") as f:
            text = tomllib.load(f)
    except (OSError, ValueError):
        return []  # the recipe loaded already: whatever this is, Laconic's parser had the say
    return [f"[{name}]" + (" (but grad_clip)" if name == "optimizer" and "grad_clip" in text[name] else "")
            for name in ("model", "data", "optimizer", "schedule") if name in text]


def _elastic_from_environment(recipe, out, resume):
    """Under `trainer elastic ... -- python3 train.py` this process is one replica: its identity,
    the store, its run directory (instead of `out`) and whether it resumes come from the
    supervisor's environment, whose recipe must be the one given here."""
    replicas = os.environ.get("LACONIC_ELASTIC_REPLICAS")
    if not replicas:
        return _laconic.Elastic(), out, resume
    checked = os.environ.get("LACONIC_ELASTIC_RECIPE", "")
    if checked and os.path.realpath(checked) != os.path.realpath(recipe):
        raise laconic.Error(f"laconic.torch.Sync: recipe {recipe}: trainer elastic checked {checked}; give both the same "
                            "recipe")
    try:
        replica = int(os.environ.get("LACONIC_ELASTIC_REPLICA", ""))
        count = int(replicas)
    except ValueError:
        raise laconic.Error("environment: LACONIC_ELASTIC_REPLICA / LACONIC_ELASTIC_REPLICAS: expected integers "
                            "(set by trainer elastic)") from None
    store = os.environ.get("LACONIC_ELASTIC_STORE", "")
    out = os.environ.get("LACONIC_OUT") or out
    if resume is None and os.environ.get("LACONIC_RESUME"):
        resume = os.environ["LACONIC_RESUME"]
    return _laconic.Elastic(replica, count, store), out, resume


def _torchrun_store():
    """(store, what it is) where gloo ranks meet under torchrun, or any launch that sets torch's
    MASTER_ADDR, MASTER_PORT, RANK and WORLD_SIZE, with no LACONIC_STORE: torch's own rendezvous
    store (the script's process group's when it has one), under the prefix "laconic/<attempt>" so
    that its keys and the script's stay apart, and so do torchrun's restarts. (None, "") otherwise."""
    env = os.environ
    if env.get("LACONIC_STORE") or not env.get("MASTER_ADDR") or not env.get("WORLD_SIZE"):
        return None, ""
    if env.get("OMPI_COMM_WORLD_SIZE") or env.get("PMI_RANK"):
        return None, ""  # an MPI launcher's processes meet through MPI
    import datetime
    import torch.distributed as dist
    if not dist.is_available():
        raise laconic.Error("laconic.torch.Sync: MASTER_ADDR is set (torchrun) but this torch has no "
                            "torch.distributed; set LACONIC_STORE=file:DIR instead")
    if dist.is_initialized():
        base = dist.distributed_c10d._get_default_store()
    else:
        base, _, _ = next(dist.rendezvous("env://", timeout=datetime.timedelta(minutes=5)))
    if not env.get("LACONIC_ADDRESS"):  # gloo's pairs listen where the master is reached from (nodes)
        env["LACONIC_ADDRESS"] = _address_towards(env["MASTER_ADDR"], env.get("MASTER_PORT", ""))
    # Under torchrun's elastic agent each attempt meets afresh: keys of an attempt whose worker died
    # stay in the agent's store, so an attempt's keys are its own.
    prefix = "laconic/" + env.get("TORCHELASTIC_RESTART_COUNT", "0")
    return dist.PrefixStore(prefix, base), f"torch's store at {env['MASTER_ADDR']}:{env.get('MASTER_PORT', '')}"


def _address_towards(host, port):
    """This host's address on the route to `host` (127.0.0.1 when `host` is this machine's
    loopback): the one other nodes reach this process at, as torchrun's --nnodes needs."""
    import socket
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect((host, int(port) if port.isdigit() else 1))  # no packet is sent: a route lookup
            return s.getsockname()[0]
    except OSError as e:
        raise laconic.Error(f"laconic.torch.Sync: MASTER_ADDR={host}: no route from this process ({e.strerror}); "
                            "set LACONIC_ADDRESS to the address the other nodes reach it at") from None


def _record_writer(tensorboard, out):
    """What lt.Sync's tensorboard= asks for, as a callable on each metrics record (None: nothing)."""
    if tensorboard is None or tensorboard is False:
        return None
    from laconic.tensorboard import RecordWriter
    if tensorboard is True:
        if not out:
            raise laconic.Error("laconic.torch.Sync: tensorboard=True writes into the run directory: give out=, "
                                "or tensorboard=FOLDER or a SummaryWriter")
        tensorboard = os.path.join(out, "tensorboard")
    return RecordWriter(tensorboard)


def _trainable_parameters(model):
    """(parameters, their names, the names of those that need no gradient, their device): a tied
    parameter once, under its first name; every parameter float32, dense and on one device."""
    params, names, frozen = [], [], []
    device = None
    for name, p in model.named_parameters():
        if not p.requires_grad:
            frozen.append(name)
            continue
        if p.dtype != torch.float32:
            raise laconic.Error(f"laconic.torch.Sync: parameter {name} is {p.dtype}: Laconic syncs float32 "
                                "parameters (model.float(); keep lower precision for autocast)")
        if p.device.type not in ("cpu", "cuda"):
            raise laconic.Error(f"laconic.torch.Sync: parameter {name} is on {p.device}: expected the CPU or a "
                                "CUDA device")
        if device is not None and p.device != device:
            raise laconic.Error(f"laconic.torch.Sync: parameter {name} is on {p.device}, others on {device}: "
                                "expected every parameter on one device")
        device = p.device
        if p.is_sparse:
            raise laconic.Error(f"laconic.torch.Sync: parameter {name} is sparse: expected dense tensors")
        params.append(p)
        names.append(name)
    return params, names, frozen, device


def _print_notes(recipe, frozen, stream):
    """Rank 0's notes on what the recipe sets that lt.Sync leaves alone, and on the parameters
    that stay out of the sync."""
    ignored = _sections_of_yours(recipe)
    if ignored:
        print(f"laconic: the recipe's {', '.join(ignored)} are not used here: your torch model, data loader and "
              "optimizer train; Laconic syncs", file=stream)
    if frozen:
        shown = ", ".join(frozen[:4]) + (f" and {len(frozen) - 4} more" if len(frozen) > 4 else "")
        print(f"laconic: {len(frozen)} parameters need no gradient and stay out of the sync: {shown}",
              file=stream)


class Sync:
    """One rank of a Laconic run around a torch model (see the module's doc).

    model              a torch.nn.Module whose parameters are float32 on the CPU
    recipe             a TOML recipe (its [sync], [distributed], [network], [checkpoint], [guards], [train])
    overrides          {"section.key": value}, as the trainer's --section.key=value
    out                the run directory ("" or None: write nothing, no checkpoints)
    resume             None: fresh; "auto": the newest intact checkpoint of the run; or a checkpoint directory
    optimizer          the torch optimizer (else the one the first step() gets); its state is checkpointed
    eval_fn            None, or a callable returning the held-out loss, or (loss, accuracy): rank 0 calls
                       it every train.eval_every steps and after the last; records go to metrics.jsonl
    flops_per_example  training FLOPs per example (default 6 x parameters), for modeled compute and MFU
    log                True: Laconic's lines on sys.stdout (rank 0); False: silent; or a text stream
    examples           how many examples a micro-batch's loss averages, to weigh the logged loss (default 1:
                       every micro-batch's mean weighs the same); step(examples=) for one micro-batch
    stop_every_step    True: a signal stops the run at the very next step, the ranks agreeing on it after
                       every step (an all-reduce each); False (default): as the trainer, every few steps
                       where agreeing is slow beside a step (within about a second of steps)
    tensorboard        None; True: TensorBoard events of every metrics record in OUT/tensorboard; a folder;
                       or the script's writer (torch's SummaryWriter): live, from rank 0 (laconic.tensorboard)
    """

    def __init__(self, model, recipe, overrides=None, out=None, resume=None, optimizer=None, eval_fn=None,
                 flops_per_example=None, log=True, examples=None, stop_every_step=False, tensorboard=None):
        if not isinstance(model, torch.nn.Module):
            raise laconic.Error(f"laconic.torch.Sync: model: expected a torch.nn.Module, got {type(model).__name__}")
        self.model = model
        self._optimizer = optimizer
        self._params, names, frozen, device = _trainable_parameters(model)
        stream = sys.stdout if log is True else (log or None)
        recipe = os.fspath(recipe)
        out = "" if out is None else os.fspath(out)
        elastic, out, resume = _elastic_from_environment(recipe, out, resume)
        self.out = out or None
        store, store_name = _torchrun_store()
        self._tensorboard = _record_writer(tensorboard, out)
        try:
            self._session = _laconic.Session(
                recipe=recipe, overrides=_override_list(overrides), out=out,
                tensors=[(n, list(p.shape)) for n, p in zip(names, self._params)],
                resume="" if resume is None else str(resume), log=stream,
                evaluate=None if eval_fn is None else self._evaluator(eval_fn),
                save_files=self._save_files if out else None, flops_per_example=float(flops_per_example or 0),
                stop_on_signals=True, agree_every_step=bool(stop_every_step), elastic=elastic,
                cuda_index=_cuda_index(device), store=store, store_name=store_name, on_record=self._record)
        except _laconic.RunFinished as finished:
            # resume="auto" on a run that had finished: nothing to train, nothing written (the
            # trainer's line); the run's weights are its last checkpoint's (trainer export).
            if stream is not None:
                print(f"laconic: {finished}", file=stream)
            self._finished_before()
            return
        if tensorboard is None and self._session.tensorboard:  # the recipe's train.tensorboard = true
            self._tensorboard = _record_writer(True, out)
        if self._session.rank == 0 and stream is not None:
            _print_notes(recipe, frozen, stream)
        self._bind_store()
        self._read_run_shape(examples)
        self.first_step = self._session.start()  # rank 0's parameters everywhere, or the checkpoint's
        self.resumed_from = self._session.resumed_from or None
        self._load_torch_state(optimizer)
        self.step_count = self.first_step  # optimizer steps done
        self.done = self.step_count >= self.steps
        self._micro = 0
        self._loss_sum = 0.0
        self._loss_count = 0.0
        self._summary = None
        self._hook_accumulators()
        if not self.done:
            self._session.begin_step(self.step_count)

    # ---- the step ----

    def step(self, optimizer=None, loss=None, examples=None):
        """After a backward: counts the micro-batch; on the last of train.grad_accum, reduces,
        runs optimizer.step() and the strategy's sync. Returns True when the optimizer stepped."""
        if self._summary is not None or self.done:
            raise laconic.Error(f"laconic.torch.Sync.step: the run's {self.steps} steps are done (train.steps): "
                                "stop the loop at sync.done, or raise train.steps")
        optimizer = optimizer or self._optimizer
        if optimizer is None:
            raise laconic.Error("laconic.torch.Sync.step: expected the torch optimizer (sync.step(optimizer, loss=loss))")
        if self._optimizer is None or self._torch_state is not None:
            self._optimizer = optimizer
        if self._torch_state is not None:  # resumed: the optimizer's state from the checkpoint
            if "optimizer" in self._torch_state:
                optimizer.load_state_dict(self._torch_state["optimizer"])
            self._torch_state = None
        if loss is not None:
            n = float(examples) if examples else (self._examples or 1.0)
            self._loss_sum += float(loss.detach() if torch.is_tensor(loss) else loss) * n
            self._loss_count += n
        self._micro += 1
        if self._micro < self._accum:
            return False
        self._micro = 0
        self._claim_grads()
        lr = optimizer.param_groups[0].get("lr", float("nan")) if optimizer.param_groups else float("nan")
        stepped = self._session.reduce(self._loss_sum, self._loss_count, float(lr))
        if stepped:
            self._session.optimizer_begin()
            optimizer.step()
            self._session.updated()
        why = self._session.end_step()
        self.step_count += 1
        self._loss_sum = self._loss_count = 0.0
        self._reset_ready()
        if why or self.step_count >= self.steps:
            self.done = True
            self._finish(why)
        else:
            self._session.begin_step(self.step_count)
        return stepped

    def finish(self):
        """Drains syncs in flight, writes the last checkpoint and summary.json (rank 0 replays a
        [network]); returns the run as a laconic.Run on rank 0 (None on other ranks, without a run
        directory, or when the run stopped before its first metrics record)."""
        if self._summary is None:
            self._finish(0)
        if self._tensorboard is not None:
            self._tensorboard.close()
        # A run stopped before its first record (train.log_every) has no metrics.jsonl to read.
        if not self.out or self.rank != 0 or not os.path.exists(os.path.join(self.out, "metrics.jsonl")):
            return None
        return Run(self.out)


    # ---- internals ----

    def _bind_store(self):
        """The store's two buffers as torch tensors over its memory (DLPack, host or GPU: no copy);
        each parameter (its values copied in) and its gradient become a view."""
        flat = torch.utils.dlpack.from_dlpack(self._session.params())
        gflat = torch.utils.dlpack.from_dlpack(self._session.grads())
        self._offsets, self._grads = [], []
        with torch.no_grad():
            for p, (_, offset, numel) in zip(self._params, self._session.views()):
                view = flat[offset:offset + numel].view(p.shape)
                view.copy_(p.data)
                p.data = view
                g = gflat[offset:offset + numel].view(p.shape)
                p.grad = g
                self._offsets.append(offset)
                self._grads.append(g)

    def _read_run_shape(self, examples):
        """The run's ranks, steps and batch as the session resolved them from the recipe."""
        self.rank = self._session.rank
        self.world_size = self._session.world_size
        self.data_rank = self._session.data_rank
        self.data_world = self._session.data_world
        self.steps = self._session.steps
        self.micro_batch = self._session.micro_batch  # train.micro_batch: the loader's batch per process
        self.grad_accum = self._accum = self._session.grad_accum  # backward passes per optimizer step
        self._examples = float(examples) if examples else None

    def _load_torch_state(self, optimizer):
        """Resumed: the buffers, torch's RNG and the optimizer's state that the checkpoint holds in
        torch's format. Without the optimizer yet, its state waits for the first step()."""
        self._torch_state = None
        if not self.resumed_from:
            return
        path = os.path.join(self.resumed_from, _TORCH_FILE.format(rank=self.rank))
        if not os.path.exists(path):
            return
        self._torch_state = torch.load(path)
        self._load_buffers(self._torch_state.get("buffers", {}))
        if "torch_rng" in self._torch_state:
            torch.set_rng_state(self._torch_state["torch_rng"])
        if optimizer is not None and "optimizer" in self._torch_state:
            optimizer.load_state_dict(self._torch_state["optimizer"])
            self._torch_state = None

    def _hook_accumulators(self):
        """Gradient hooks after accumulation: the store's tail that is final goes to the strategy
        while backward runs on. torch 2.1+ has a hook for it on each parameter
        (register_post_accumulate_grad_hook); torch 1.13 has only the AccumulateGrad node's hook,
        the one DDP's reducer and Horovod use."""
        self._reset_ready()
        self._accumulators = []
        if not self._session.overlap:
            return
        post = hasattr(torch.Tensor, "register_post_accumulate_grad_hook")
        with torch.enable_grad():
            for i, p in enumerate(self._params):
                if post:
                    self._accumulators.append(p.register_post_accumulate_grad_hook(self._hook(i)))
                    continue
                acc = p.expand_as(p).grad_fn.next_functions[0][0]
                acc.register_hook(self._hook(i))
                self._accumulators.append(acc)

    def _reset_ready(self):
        """No gradient final yet: the next step's backward starts."""
        self._ready = [False] * len(self._params)
        self._pending = len(self._params)

    def _finished_before(self):
        self._session = None
        self.rank, self.world_size, self.data_rank, self.data_world = 0, 1, 0, 1
        self.steps = self.first_step = self.step_count = self.micro_batch = 0
        self.grad_accum = 1
        self.resumed_from = None
        self.done = True
        self._summary = {}

    def _finish(self, why):
        self._summary = self._session.finish(why)
        sig = self._summary["stop_signal"]
        if why and why != _laconic.TIME_LIMIT and sig:
            note = (f"stopped by signal {sig} after step {self._summary['steps']}; checkpoint "
                    f"{self._summary['checkpoint'] or '(none)'} (continue with resume=\"auto\")")
            if sig == 2:
                raise KeyboardInterrupt(note)
            print(f"laconic: {note}", file=sys.stderr)
            sys.exit(128 + sig)

    def _hook(self, i):
        def ready(*_):
            if self._micro != self._accum - 1:
                return  # not the step's last micro-batch: gradients are still adding up
            self._claim(i)
            self._ready[i] = True
            moved = False
            while self._pending > 0 and self._ready[self._pending - 1]:
                self._pending -= 1
                moved = True
            if moved:
                self._session.grads_ready(self._offsets[self._pending])
        return ready

    def _claim(self, i):
        """Keeps parameter i's gradient in the store: one set to None or replaced (zero_grad with
        set_to_none, a user's assignment) is copied back and the view restored."""
        p, g = self._params[i], self._grads[i]
        if p.grad is g:
            return
        with torch.no_grad():
            if p.grad is None:
                g.zero_()
            else:
                g.copy_(p.grad)
        p.grad = g

    def _claim_grads(self):
        for i in range(len(self._params)):
            self._claim(i)

    def _record(self, line):
        """Each metrics record (rank 0), to TensorBoard when tensorboard= or the recipe's
        train.tensorboard asks for it (the latter known once the session has read the recipe)."""
        if self._tensorboard is not None:
            self._tensorboard(line)

    def _evaluator(self, eval_fn):
        def evaluate():
            with torch.no_grad():
                r = eval_fn()
            if isinstance(r, tuple):
                loss, acc = r
            else:
                loss, acc = r, None
            return (float(loss), None if acc is None else float(acc))
        return evaluate

    def _buffers(self):
        return {name: b for name, b in self.model.named_buffers()}

    def _load_buffers(self, saved):
        with torch.no_grad():
            for name, b in self._buffers().items():
                if name in saved:
                    b.copy_(saved[name])

    def _save_files(self, directory):
        state = {"buffers": self._buffers(), "torch_rng": torch.get_rng_state()}
        if self._optimizer is not None:
            state["optimizer"] = self._optimizer.state_dict()
        torch.save(state, os.path.join(directory, _TORCH_FILE.format(rank=self.rank)))
