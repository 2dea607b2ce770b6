#!/usr/bin/env python3
"""Compares ccscope's training probe (`ccscope train`) with PyTorch.

1. Losses: `ccscope train --strategy single --export DIR` (or ddp/zero1-3
   under mpiexec with --loss-strategy) writes the model, its initial
   parameters, the data and every step's global batch; PyTorch trains the same
   nn.Linear stack from the same weights on the same batches with the same
   optimizer, gradient accumulation (the micro-batches' mean) and clipping
   (clip_grad_norm_), and the two loss curves are compared step by step (exit 1
   past --tolerance). PyTorch in float64 runs beside them: how far PyTorch's own
   float32 curve strays from it is the size of float32 rounding. With relu, a
   hidden unit's input within float32's rounding of 0 (a "kink") lets float32
   runs take either branch and part by chance; the comparison names the first
   such step and holds the curves to the tolerance up to it. --matrix runs
   every strategy against PyTorch with weight decay, accumulation and active
   clipping, alone and together (tanh: no kinks, so the whole curve counts).
2. Speed: PyTorch DistributedDataParallel on CPU over gloo (one process and
   one thread per rank, default 25 MB buckets), its steps timed normally and
   under ddp.no_sync() (the compute-only step) in turn, alternated with
   `mpiexec -n RANKS ccscope train --strategy ddp --threads 1` (and
   --no-overlap) on the same shape; medians of per-step times (the slowest
   rank's) after a warm-up.

--selftest replaces ccscope with a fabricated export and a NumPy reference
trainer (losses) and times PyTorch alone, so the PyTorch half runs without the
binary. Run through the `compare-with-pytorch` wrapper beside this file, which
finds (or installs) torch and pins one BLAS thread per process.
"""
from __future__ import annotations

import argparse
import contextlib
import csv
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

try:  # --help works without them
    import numpy as np
    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp
    import torch.nn.functional as F
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel as DDP
except ImportError:  # pragma: no cover - the wrapper checks first
    np = torch = None

REPO = Path(__file__).resolve().parents[2]
PROG = "compare-with-pytorch"
STRATEGIES = ["single", "ddp", "zero1", "zero2", "zero3", "tp", "pp", "3d"]
# A ReLU input closer to 0 than this fraction of its layer's rms may take the
# other branch in float32 (ccscope's reference64.cpp uses the same margin).
KINK_FRACTION = 1e-6


# ---------------------------------------------------------------- arguments

def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog=PROG,
        description="Compare ccscope train with PyTorch: loss curves (single process) and "
        "DDP step times (gloo, one thread per rank).",
        epilog="--install (read by the compare-with-pytorch wrapper): create the venv "
        "$CCSCOPE_TORCH_VENV (default /work/venv-torch) and install torch (CPU) into it first.",
    )
    p.add_argument("--ccscope", help="the ccscope binary (default: $CCSCOPE, then build*/app/ccscope "
                   "under the repository)")
    p.add_argument("--mpiexec", default=None,
                   help="the MPI launcher command (default: mpiexec, with --allow-run-as-root "
                   "for Open MPI as root)")
    p.add_argument("--selftest", action="store_true",
                   help="no ccscope: a fabricated export and a NumPy reference trainer stand in "
                   "for it, and only PyTorch is timed")
    p.add_argument("--skip-loss", action="store_true", help="no loss comparison")
    p.add_argument("--skip-speed", action="store_true", help="no speed comparison")
    p.add_argument("--workdir", help="keep exports and CSVs here (default: a temporary folder)")

    g = p.add_argument_group("loss comparison (PyTorch trains one process on each global batch)")
    g.add_argument("--loss-strategy", default="single", choices=STRATEGIES,
                   help="ccscope's strategy (default single; others run under mpiexec)")
    g.add_argument("--matrix", action="store_true",
                   help="every strategy x (weight decay, micro-batches, clipping, all three) "
                   "against PyTorch, tanh, AdamW; one row each")
    g.add_argument("--loss-ranks", type=int, default=2, help="ranks for a strategy other than single")
    g.add_argument("--steps", type=int, default=100, help="training steps (default 100)")
    g.add_argument("--loss-width", type=int, default=256)
    g.add_argument("--loss-depth", type=int, default=4)
    g.add_argument("--loss-batch", type=int, default=64, help="global batch")
    g.add_argument("--optimizer", choices=["sgd", "adam", "adamw"], default="sgd")
    g.add_argument("--activation", choices=["relu", "tanh"], default=None,
                   help="default: ccscope's (relu)")
    g.add_argument("--lr", type=float, default=None, help="default: ccscope's")
    g.add_argument("--momentum", type=float, default=None, help="SGD; default: ccscope's")
    g.add_argument("--weight-decay", type=float, default=None, help="default: ccscope's")
    g.add_argument("--seed", type=int, default=None, help="default: ccscope's")
    g.add_argument("--micro-batches", type=int, default=None,
                   help="gradient accumulation steps (default: ccscope's, 1)")
    g.add_argument("--grad-clip", type=float, default=None,
                   help="max global gradient norm (default: none)")
    g.add_argument("--tolerance", type=float, default=1e-4,
                   help="largest allowed relative loss difference (default 1e-4)")
    g.add_argument("--show", type=int, default=10, help="loss rows to print (default 10)")

    g = p.add_argument_group("speed comparison (DDP, SGD with momentum)")
    g.add_argument("--width", type=int, default=1024)
    g.add_argument("--depth", type=int, default=8)
    g.add_argument("--global-batch", type=int, default=128)
    g.add_argument("--ranks", type=int, default=2)
    g.add_argument("--threads", type=int, default=1, help="threads per rank (default 1)")
    g.add_argument("--time-steps", type=int, default=30, help="timed steps after the warm-up")
    g.add_argument("--warmup", type=int, default=5, help="untimed steps first (default 5)")
    g.add_argument("--rounds", type=int, default=2,
                   help="PyTorch/ccscope alternations (default 2); medians over all of them")
    g.add_argument("--speed-lr", type=float, default=0.01)
    g.add_argument("--speed-momentum", type=float, default=0.9)
    g.add_argument("--timeout", type=float, default=900, help="seconds per ccscope run")
    return p.parse_args(argv)


# ---------------------------------------------------------------- ccscope

def find_ccscope(explicit: str | None) -> Path | None:
    """--ccscope, $CCSCOPE, or the newest build*/app/ccscope under the
    repository (then on PATH) that has the train verb."""
    if explicit:
        return Path(explicit)
    if os.environ.get("CCSCOPE"):
        return Path(os.environ["CCSCOPE"])
    candidates = [c for c in REPO.glob("build*/app/ccscope") if c.is_file()]
    candidates.sort(key=lambda c: -c.stat().st_mtime)
    candidates += [Path(c) for c in [shutil.which("ccscope")] if c]
    for c in candidates:
        if os.access(c, os.X_OK) and train_help(c) is not None:
            return c
    return None


def train_help(ccscope: Path) -> str | None:
    """`ccscope train --help`, or None when the binary has no train verb."""
    try:
        r = subprocess.run([str(ccscope), "train", "--help"], capture_output=True, text=True,
                           timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return r.stdout + r.stderr if r.returncode == 0 else None


def mpiexec_command(explicit: str | None, ranks: int) -> list[str]:
    if explicit:
        cmd = explicit.split()
    else:
        cmd = ["mpiexec"]
        version = subprocess.run(["mpiexec", "--version"], capture_output=True, text=True)
        if "Open MPI" in version.stdout + version.stderr and os.geteuid() == 0:
            cmd.append("--allow-run-as-root")
    return cmd + ["-n", str(ranks)]


def run_command(cmd: list[str], timeout: float) -> None:
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    if r.returncode != 0:
        sys.stderr.write(r.stdout + r.stderr)
        raise SystemExit(f"{PROG}: failed ({r.returncode}): {' '.join(cmd)}")


def read_step_csv(path: Path) -> dict[int, dict[str, float]]:
    """Per step: loss, step_s, compute_s, exposed_comm_s, comm_s (the largest over the
    step's rows where each rank writes its own)."""
    steps: dict[int, dict[str, float]] = {}
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            step = int(row["step"])
            merged = steps.setdefault(step, {})
            for key in ("loss", "step_s", "compute_s", "exposed_comm_s", "comm_s"):
                if row.get(key) not in (None, ""):
                    value = float(row[key])
                    merged[key] = max(merged.get(key, value), value)
    return dict(sorted(steps.items()))


# ---------------------------------------------------------------- export

def read_export(d: Path) -> dict:
    meta = json.loads((d / "model.json").read_text())
    w, depth, n = meta["width"], meta["depth"], meta["samples"]
    exp = {"meta": meta}
    exp["params"] = np.fromfile(d / "initial_parameters.f32", dtype="<f4")
    expected = depth * (w * w + w)
    if exp["params"].size != expected:
        raise SystemExit(f"{PROG}: initial_parameters.f32 holds {exp['params'].size} floats, "
                         f"not {expected} ({depth} x ({w}x{w} + {w}))")
    exp["inputs"] = np.fromfile(d / "inputs.f32", dtype="<f4").reshape(n, w)
    exp["targets"] = np.fromfile(d / "targets.f32", dtype="<f4").reshape(n, w)
    exp["batches"] = np.fromfile(d / "batches.i64", dtype="<i8").reshape(
        meta["steps"], meta["global_batch"])
    if exp["batches"].min() < 0 or exp["batches"].max() >= n:
        raise SystemExit(f"{PROG}: batches.i64 indexes outside 0..{n - 1}")
    return exp


def fabricate_export(d: Path, width: int, depth: int, batch: int, steps: int,
                     optimizer: str, activation: str, lr: float | None, seed: int,
                     micro_batches: int = 1, grad_clip: float | None = None) -> None:
    """What `ccscope train --export` writes, from NumPy: nn.Linear-like initial
    weights, a tanh teacher's targets, DistributedSampler-style epochs."""
    rng = np.random.default_rng(seed)
    d.mkdir(parents=True, exist_ok=True)
    samples = 4 * batch
    bound = 1.0 / np.sqrt(width)
    params = np.concatenate([
        np.concatenate([rng.uniform(-bound, bound, width * width), rng.uniform(-bound, bound, width)])
        for _ in range(depth)]).astype("<f4")
    x = rng.uniform(-1, 1, (samples, width)).astype("<f4")
    a = rng.uniform(-1, 1, (width, width)).astype("<f4") * np.float32(bound * 1.7)
    b = rng.uniform(-1, 1, (width, width)).astype("<f4") * np.float32(bound * 1.7)
    t = (np.tanh(x @ a.T) @ b.T).astype("<f4")
    per_epoch = samples // batch
    rows, epoch = [], 0
    while len(rows) < steps:
        perm = np.random.default_rng(seed + epoch).permutation(samples)
        rows += [perm[i * batch:(i + 1) * batch] for i in range(per_epoch)]
        epoch += 1
    batches = np.array(rows[:steps], dtype="<i8")
    opt = {"kind": optimizer, "lr": lr if lr is not None else (0.01 if optimizer == "sgd" else 1e-3),
           "momentum": 0.9, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8,
           "weight_decay": 0.01 if optimizer == "adamw" else 0.0}
    meta = {"width": width, "depth": depth, "activation": activation, "optimizer": opt,
            "global_batch": batch, "micro_batches": micro_batches, "grad_clip": grad_clip,
            "steps": steps, "samples": samples, "seed": seed, "precision": "fp32"}
    (d / "model.json").write_text(json.dumps(meta, indent=1))
    params.tofile(d / "initial_parameters.f32")
    x.tofile(d / "inputs.f32")
    t.tofile(d / "targets.f32")
    batches.tofile(d / "batches.i64")


def numpy_reference_losses(exp: dict) -> list[float]:
    """The probe's arithmetic written out in NumPy float32 (forward, MSE,
    backward, SGD/Adam/AdamW as torch.optim defines them): the selftest's
    stand-in for ccscope's loss curve."""
    meta, o = exp["meta"], exp["meta"]["optimizer"]
    w, depth = meta["width"], meta["depth"]
    f32 = np.float32
    flat = exp["params"].astype(np.float32).copy()
    layers = []
    off = 0
    for _ in range(depth):
        layers.append((slice(off, off + w * w), slice(off + w * w, off + w * w + w)))
        off += w * w + w
    m = np.zeros_like(flat)
    v = np.zeros_like(flat)
    lr, wd = f32(o["lr"]), f32(o.get("weight_decay", 0.0))
    losses = []
    for step, idx in enumerate(exp["batches"], start=1):
        x, t = exp["inputs"][idx], exp["targets"][idx]
        acts, pres = [x], []
        h = x
        for l, (ws, bs) in enumerate(layers):
            y = h @ flat[ws].reshape(w, w).T + flat[bs]
            pres.append(y)
            if l + 1 < depth:
                h = np.maximum(y, f32(0)) if meta["activation"] == "relu" else np.tanh(y)
                acts.append(h)
            else:
                h = y
        diff = h - t
        losses.append(float(np.mean(diff.astype(np.float64) ** 2)))
        grad = np.zeros_like(flat)
        dy = (f32(2.0 / diff.size) * diff).astype(np.float32)
        for l in range(depth - 1, -1, -1):
            ws, bs = layers[l]
            if l + 1 < depth:  # through the nonlinearity after layer l
                dy = dy * (pres[l] > 0) if meta["activation"] == "relu" else dy * (1 - acts[l + 1] ** 2)
            grad[ws] = (dy.T @ acts[l]).ravel()
            grad[bs] = dy.sum(axis=0)
            dy = dy @ flat[ws].reshape(w, w)
        if meta.get("grad_clip"):  # clip_grad_norm_: max_norm / (norm + 1e-6), at most 1
            norm = float(np.sqrt(np.sum(grad.astype(np.float64) ** 2)))
            grad = (grad * f32(min(1.0, meta["grad_clip"] / (norm + 1e-6)))).astype(np.float32)
        if o["kind"] == "sgd":
            g = grad + wd * flat if wd else grad
            m = g.copy() if step == 1 else f32(o["momentum"]) * m + g
            flat -= lr * m
        else:
            b1, b2, eps = f32(o["beta1"]), f32(o["beta2"]), f32(o["eps"])
            g = grad
            if o["kind"] == "adamw":
                flat *= f32(1) - lr * wd
            elif wd:
                g = grad + wd * flat
            m = b1 * m + (f32(1) - b1) * g
            v = b2 * v + (f32(1) - b2) * g * g
            bc1, bc2 = 1 - float(b1) ** step, 1 - float(b2) ** step
            denom = np.sqrt(v) / f32(np.sqrt(bc2)) + eps
            flat -= f32(float(lr) / bc1) * m / denom
    return losses


# ---------------------------------------------------------------- PyTorch model

def build_mlp(width: int, depth: int, activation: str) -> "nn.Sequential":
    layers = []
    for l in range(depth):
        layers.append(nn.Linear(width, width, bias=True))
        if l + 1 < depth:
            layers.append(nn.ReLU() if activation == "relu" else nn.Tanh())
    return nn.Sequential(*layers)


def load_flat(model: "nn.Sequential", flat: "np.ndarray") -> None:
    off = 0
    with torch.no_grad():
        for layer in model:
            if isinstance(layer, nn.Linear):
                for p in (layer.weight, layer.bias):
                    p.copy_(torch.from_numpy(flat[off:off + p.numel()].copy()).view_as(p))
                    off += p.numel()
    assert off == flat.size


def make_optimizer(params, o: dict) -> "torch.optim.Optimizer":
    wd = o.get("weight_decay", 0.0)
    if o["kind"] == "sgd":
        return torch.optim.SGD(params, lr=o["lr"], momentum=o["momentum"], dampening=0,
                               nesterov=False, weight_decay=wd)
    cls = torch.optim.AdamW if o["kind"] == "adamw" else torch.optim.Adam
    return cls(params, lr=o["lr"], betas=(o["beta1"], o["beta2"]), eps=o["eps"], weight_decay=wd)


def torch_losses(exp: dict, dtype=None) -> list[float]:
    """PyTorch's loss at every step, in float32 (or `dtype`: float64 gives the
    reference that shows how far float32 rounding alone moves the curve)."""
    meta = exp["meta"]
    if meta.get("precision", "fp32") != "fp32":
        raise SystemExit(f"{PROG}: only fp32 exports compare (this one is {meta['precision']})")
    return torch_run(exp, dtype)["losses"]


def torch_run(exp: dict, dtype=None) -> dict:
    """PyTorch's losses and, per step, the smallest |ReLU input| relative to its
    layer's rms (inf for tanh): gradient accumulation over the export's
    micro-batches (each micro-batch's mean loss / micro-batches, as a training
    loop with accumulation writes it), then clip_grad_norm_, then the optimizer."""
    meta = exp["meta"]
    dtype = dtype or torch.float32
    micro = int(meta.get("micro_batches", 1))
    clip = meta.get("grad_clip")
    model = build_mlp(meta["width"], meta["depth"], meta["activation"]).to(dtype)
    load_flat(model, exp["params"])
    opt = make_optimizer(model.parameters(), meta["optimizer"])
    inputs = torch.from_numpy(exp["inputs"]).to(dtype)
    targets = torch.from_numpy(exp["targets"]).to(dtype)
    margins: list[float] = []
    hidden = [layer for layer in list(model)[:-1] if isinstance(layer, nn.Linear)]

    def watch(_module, _inputs, out):
        rms = out.detach().pow(2).mean().sqrt().item()
        if rms > 0:
            margins.append(out.detach().abs().min().item() / rms)

    if meta["activation"] == "relu":
        for layer in hidden:
            layer.register_forward_hook(watch)
    losses, kinks = [], []
    for idx in exp["batches"]:
        margins.clear()
        opt.zero_grad()
        total = 0.0
        for part in np.split(idx, micro):
            i = torch.from_numpy(part)
            loss = F.mse_loss(model(inputs[i]), targets[i]) / micro
            loss.backward()
            total += loss.item()
        if clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        losses.append(total)
        kinks.append(min(margins) if margins else float("inf"))
    return {"losses": losses, "kink_margins": kinks}


# ---------------------------------------------------------------- loss comparison

def relative(a: float, b: float) -> float:
    return abs(a - b) / max(abs(b), 1e-30)


def first_kink(margins: list[float]) -> int | None:
    return next((s for s, m in enumerate(margins) if m < KINK_FRACTION), None)


def compare_losses(name: str, theirs: list[float], ours: list[float], exact: list[float],
                   tolerance: float, show: int, kink: int | None = None,
                   kink_margin: float = 0.0) -> bool:
    """Prints the curves side by side; true when `theirs` stays within
    `tolerance` of PyTorch's float32 curve `ours` (up to step `kink`, the
    first ReLU input within float32's rounding of 0, when there is one).
    `exact` (PyTorch in float64) is the yardstick for float32 rounding: how far
    PyTorch's own float32 run strays from it."""
    n = min(len(theirs), len(ours))
    if len(theirs) != len(ours):
        print(f"  note: {name} has {len(theirs)} steps, PyTorch {len(ours)}; comparing {n}")
    rel = [relative(theirs[s], ours[s]) for s in range(n)]
    rows = sorted(set(range(0, n, max(1, n // max(1, show - 1)))) | {n - 1})
    print(f"  {'step':>5} {name:>14} {'pytorch':>14} {'rel diff':>10} {'pytorch fp64':>14}")
    for s in rows:
        print(f"  {s:>5} {theirs[s]:>14.8g} {ours[s]:>14.8g} {rel[s]:>10.2e} {exact[s]:>14.8g}")
    worst = max(range(n), key=lambda s: rel[s])
    ok = rel[worst] <= tolerance
    print(f"  largest relative difference: {rel[worst]:.3e} at step {worst} "
          f"({'within' if ok else 'OVER'} tolerance {tolerance:g})")
    if kink is not None and kink + 1 < n:
        upto = max(range(kink + 1), key=lambda s: rel[s])
        ok = rel[upto] <= tolerance
        print(f"  step {kink}: a ReLU input {kink_margin:.2g} of its layer's rms from 0 (PyTorch "
              "float64), within float32's rounding: float32 runs may take either branch there "
              f"and part by chance; up to it: {rel[upto]:.3e} at step {upto} "
              f"({'within' if ok else 'OVER'} tolerance; rerun with --activation tanh to "
              "compare every step)")
    floor = max(relative(ours[s], exact[s]) for s in range(n))
    off = max(relative(theirs[s], exact[s]) for s in range(n))
    print(f"  against PyTorch in float64: {name} {off:.3e}, PyTorch float32 {floor:.3e} "
          "(float32 rounding alone)")
    return ok


RANKS = {"single": 1, "ddp": 2, "zero1": 2, "zero2": 2, "zero3": 2, "tp": 2, "pp": 2, "3d": 4}


def ccscope_curve(args, ccscope: Path, work: Path, strategy: str, ranks: int,
                  options: dict) -> tuple[dict, list[float]]:
    """Runs `ccscope train` with `options` (flag -> value); returns the export
    (written by a single-rank run of the same options where the strategy has no
    --export: tp, pp, 3d) and the strategy's loss curve."""
    work.mkdir(parents=True, exist_ok=True)
    common = []
    for flag, value in options.items():
        if value is not None:
            common += [flag, str(value)]
    def run(strat: str, n: int, export: bool) -> list[float]:
        csv_path = work / f"{strat}_steps.csv"
        launch = [] if strat == "single" else mpiexec_command(args.mpiexec, n)
        cmd = launch + [str(ccscope), "train", "--strategy", strat, "--print-every", "0",
                        "--csv", str(csv_path)] + common
        if export:
            cmd += ["--export", str(work)]
        print("  " + " ".join(cmd))
        run_command(cmd, args.timeout)
        return [row["loss"] for row in read_step_csv(csv_path).values()]
    exportable = strategy in ("single", "ddp", "zero1", "zero2", "zero3")
    theirs = run(strategy, ranks, exportable)
    if not exportable:
        run("single", 1, True)
    return read_export(work), theirs


def loss_comparison(args, ccscope: Path | None, work: Path) -> bool:
    export = work / "loss_export"
    label = "ccscope"
    if args.selftest:
        fabricate_export(export, args.loss_width, args.loss_depth, args.loss_batch, args.steps,
                         args.optimizer, args.activation or "relu", args.lr, args.seed or 1,
                         args.micro_batches or 1, args.grad_clip)
        exp = read_export(export)
        theirs, label = numpy_reference_losses(exp), "numpy"
    else:
        ranks = 1 if args.loss_strategy == "single" else args.loss_ranks
        exp, theirs = ccscope_curve(args, ccscope, export, args.loss_strategy, ranks, {
            "--steps": args.steps, "--width": args.loss_width, "--depth": args.loss_depth,
            "--global-batch": args.loss_batch, "--optimizer": args.optimizer, "--lr": args.lr,
            "--activation": args.activation, "--momentum": args.momentum,
            "--weight-decay": args.weight_decay, "--seed": args.seed,
            "--micro-batches": args.micro_batches, "--grad-clip": args.grad_clip})
    m = exp["meta"]
    o = m["optimizer"]
    print(f"  model: width {m['width']}, depth {m['depth']}, {m['activation']}, global batch "
          f"{m['global_batch']} in {m.get('micro_batches', 1)} micro-batch(es), {m['samples']} "
          f"samples, {m['steps']} steps, {o['kind']} (lr {o['lr']:g}, momentum "
          f"{o.get('momentum', 0):g}, weight decay {o.get('weight_decay', 0):g}), clipping "
          f"{m.get('grad_clip') or 'off'}")
    t0 = time.perf_counter()
    ours = torch_run(exp)
    print(f"  PyTorch trained {len(ours['losses'])} steps in {time.perf_counter() - t0:.2f} s")
    exact = torch_run(exp, torch.float64)
    kink = first_kink(exact["kink_margins"])
    return compare_losses(label, theirs, ours["losses"], exact["losses"], args.tolerance,
                          args.show, kink, exact["kink_margins"][kink] if kink is not None else 0)


MATRIX_CONFIGS = [
    ("plain", {}),
    ("weight decay 0.1", {"--weight-decay": 0.1}),
    ("2 micro-batches", {"--micro-batches": 2}),
    ("clip 0.01 (active)", {"--grad-clip": 0.01}),
    ("all three", {"--weight-decay": 0.1, "--micro-batches": 2, "--grad-clip": 0.01}),
]


def matrix_comparison(args, ccscope: Path, work: Path) -> bool:
    """Every strategy x configuration against PyTorch float32, one row each:
    AdamW, tanh (no kinks: every step counts), width 64, depth 4, batch 32."""
    strategies = STRATEGIES if args.loss_strategy == "single" else [args.loss_strategy]
    rows, ok = [], True
    for strategy in strategies:
        for label, extra in MATRIX_CONFIGS:
            options = {"--steps": args.steps, "--width": 64, "--depth": 4, "--global-batch": 32,
                       "--optimizer": "adamw", "--lr": args.lr or 0.003, "--activation": "tanh",
                       "--weight-decay": 0, "--seed": args.seed}
            options.update(extra)
            exp, theirs = ccscope_curve(args, ccscope, work / f"{strategy}-{len(rows)}", strategy,
                                        RANKS[strategy], options)
            ours = torch_run(exp)["losses"]
            n = min(len(theirs), len(ours))
            rel = [relative(theirs[i], ours[i]) for i in range(n)]
            worst = max(range(n), key=lambda i: rel[i])
            good = n == len(ours) and rel[worst] <= args.tolerance
            ok = ok and good
            rows.append((strategy, label, rel[worst], worst, good))
    print(f"\n  {'strategy':<8} {'configuration':<20} {'max rel diff':>12} {'at step':>8}")
    for strategy, label, diff, step, good in rows:
        print(f"  {strategy:<8} {label:<20} {diff:>12.3e} {step:>8}  {'ok' if good else 'OVER'}")
    print(f"  tolerance {args.tolerance:g} against PyTorch float32: "
          f"{sum(r[4] for r in rows)} of {len(rows)} within")
    return ok


# ---------------------------------------------------------------- PyTorch DDP timing

def ddp_worker(rank: int, world: int, init_method: str, cfg: dict, out_path: str) -> None:
    torch.set_num_threads(cfg["threads"])
    with contextlib.suppress(RuntimeError):
        torch.set_num_interop_threads(1)
    dist.init_process_group("gloo", init_method=init_method, rank=rank, world_size=world)
    width, depth, batch = cfg["width"], cfg["depth"], cfg["global_batch"]
    torch.manual_seed(cfg["seed"])  # every rank the same; DDP broadcasts rank 0's anyway
    model = build_mlp(width, depth, "relu")
    ddp = DDP(model)  # bucket_cap_mb=25, gradients all-reduced during backward
    opt = torch.optim.SGD(ddp.parameters(), lr=cfg["lr"], momentum=cfg["momentum"])
    samples = 8 * batch
    gen = torch.Generator().manual_seed(cfg["seed"])
    inputs = torch.rand(samples, width, generator=gen) * 2 - 1
    teacher = torch.rand(width, width, generator=gen) * (2 / width ** 0.5) - 1 / width ** 0.5
    targets = torch.tanh(inputs @ teacher.T)
    steps = cfg["warmup"] + cfg["time_steps"]
    rows = torch.stack([torch.randperm(samples, generator=gen)[:batch] for _ in range(steps)])
    local = rows[:, rank::world]  # DistributedSampler's share of each global batch

    def step(s: int, sync: bool) -> None:
        idx = local[s]
        opt.zero_grad()
        with contextlib.nullcontext() if sync else ddp.no_sync():
            loss = F.mse_loss(ddp(inputs[idx]), targets[idx])
            loss.backward()
        opt.step()

    # DDP and no_sync steps interleave, one of each in turn, so that both see
    # the same machine (its load drifts on a shared box).
    times = {mode: [] for mode in cfg["order"]}
    dist.barrier()
    for s in range(steps):
        for mode in cfg["order"]:
            t0 = time.perf_counter()
            step(s, mode == "ddp")
            times[mode].append(time.perf_counter() - t0)
    result = {}
    for mode in cfg["order"]:
        mine = torch.tensor(times[mode][cfg["warmup"]:], dtype=torch.float64)
        every = [torch.zeros_like(mine) for _ in range(world)]
        dist.all_gather(every, mine)
        per_step = torch.stack(every).max(dim=0).values  # a step lasts as long as its slowest rank
        result[mode] = per_step.tolist()
    if rank == 0:
        Path(out_path).write_text(json.dumps(result))
    dist.barrier()
    dist.destroy_process_group()


def time_pytorch(args, work: Path, round_index: int) -> dict:
    order = ("ddp", "no_sync") if round_index % 2 == 0 else ("no_sync", "ddp")
    cfg = {"order": order, "width": args.width, "depth": args.depth,
           "global_batch": args.global_batch,
           "threads": args.threads, "warmup": args.warmup, "time_steps": args.time_steps,
           "lr": args.speed_lr, "momentum": args.speed_momentum, "seed": 1}
    with tempfile.TemporaryDirectory(dir=work) as tmp:
        out = Path(tmp) / "result.json"
        init = "file://" + str(Path(tmp) / "rendezvous")
        mp.spawn(ddp_worker, args=(args.ranks, init, cfg, str(out)), nprocs=args.ranks, join=True)
        r = json.loads(out.read_text())
    return {"pytorch_ddp": r["ddp"], "pytorch_no_sync": r["no_sync"]}  # per-step seconds


def time_ccscope(args, ccscope: Path, work: Path, tag: str, extra: list[str]) -> dict:
    """Per-step seconds after the warm-up: step_s, exposed_comm_s, compute_s."""
    csv_path = work / f"ccscope_ddp_{tag}.csv"
    cmd = mpiexec_command(args.mpiexec, args.ranks) + [
        str(ccscope), "train", "--strategy", "ddp", "--threads", str(args.threads),
        "--steps", str(args.warmup + args.time_steps), "--width", str(args.width),
        "--depth", str(args.depth), "--global-batch", str(args.global_batch),
        "--optimizer", "sgd", "--lr", str(args.speed_lr), "--momentum", str(args.speed_momentum),
        "--print-every", "0", "--csv", str(csv_path)] + extra
    run_command(cmd, args.timeout)
    rows = list(read_step_csv(csv_path).values())[args.warmup:]
    if not rows:
        raise SystemExit(f"{PROG}: {csv_path} has no steps after the warm-up")
    return {key: [r.get(key, float("nan")) for r in rows]
            for key in ("step_s", "exposed_comm_s", "compute_s")}


def speed_round(args, ccscope: Path | None, work: Path, r: int, no_overlap: bool) -> dict:
    """One round: PyTorch (DDP and no_sync) and ccscope (DDP, then --no-overlap),
    in alternating order from round to round. Per-step seconds by series."""
    def pytorch():
        return time_pytorch(args, work, r)

    def ours():
        c = time_ccscope(args, ccscope, work, f"{r}", [])
        got = {"ccscope_ddp": c["step_s"], "ccscope_exposed": c["exposed_comm_s"],
               "ccscope_compute": c["compute_s"]}
        if no_overlap:
            got["ccscope_no_overlap"] = time_ccscope(args, ccscope, work, f"{r}_no_overlap",
                                                     ["--no-overlap"])["step_s"]
        return got

    parts = [pytorch] + ([ours] if ccscope else [])
    row = {}
    for part in (parts if r % 2 == 0 else parts[::-1]):
        row.update(part())
    return row


def speed_comparison(args, ccscope: Path | None, work: Path) -> None:
    help_text = train_help(ccscope) if ccscope else None
    no_overlap = bool(help_text and "--no-overlap" in help_text)
    print(f"  width {args.width}, depth {args.depth}, global batch {args.global_batch} "
          f"({args.global_batch // args.ranks} per rank), SGD momentum {args.speed_momentum:g}, "
          f"{args.ranks} ranks x {args.threads} thread; {args.time_steps} timed steps after "
          f"{args.warmup} warm-up, {args.rounds} rounds alternating PyTorch and ccscope; "
          "medians over all timed steps of all rounds")
    load = os.getloadavg()[0]
    if load > 0.5:
        print(f"  note: 1-minute load average {load:.2f} before timing on {os.cpu_count()} CPUs; "
              "other work shares the cores, so compare the two in the same round")
    series: dict[str, list[float]] = {}
    for r in range(args.rounds):
        row = speed_round(args, ccscope, work, r, no_overlap)
        for key, values in row.items():
            series.setdefault(key, []).extend(values)
        print(f"  round {r + 1} (load {os.getloadavg()[0]:.1f}): " + ", ".join(
            f"{k} {statistics.median(v) * 1e3:.1f} ms" for k, v in row.items()))

    def med(key):
        return statistics.median(series[key])

    ddp, nosync = med("pytorch_ddp"), med("pytorch_no_sync")
    print()
    print(f"  {'PyTorch DDP step':<34} {ddp * 1e3:9.2f} ms")
    print(f"  {'PyTorch no_sync step':<34} {nosync * 1e3:9.2f} ms")
    print(f"  {'PyTorch exposed share':<34} {(ddp - nosync) / ddp:9.1%}   (ddp - no_sync) / ddp")
    if not ccscope:
        print("  (no ccscope: PyTorch alone)")
        return
    step, exposed = med("ccscope_ddp"), med("ccscope_exposed")
    print(f"  {'ccscope DDP step':<34} {step * 1e3:9.2f} ms")
    print(f"  {'ccscope exposed share':<34} {exposed / step:9.1%}   "
          "median exposed_comm_s / median step_s")
    print(f"  {'ccscope compute (its compute_s)':<34} {med('ccscope_compute') * 1e3:9.2f} ms   "
          "beside PyTorch no_sync")
    if no_overlap:
        print(f"  {'ccscope DDP --no-overlap step':<34} {med('ccscope_no_overlap') * 1e3:9.2f} ms")
    else:
        print("  ccscope train has no --no-overlap flag: not timed")
    print(f"  {'ccscope / PyTorch DDP step':<34} {step / ddp:9.3f}")


# ---------------------------------------------------------------- main

def main(argv=None) -> int:
    args = parse_args(argv)
    sys.stdout.reconfigure(line_buffering=True)
    print(f"{PROG}: torch {torch.__version__}, numpy {np.__version__}, "
          f"{os.cpu_count()} CPUs")
    ccscope = None
    if not args.selftest:
        ccscope = find_ccscope(args.ccscope)
        if ccscope is None:
            print(f"{PROG}: no ccscope binary with a train verb (build it, or pass --ccscope "
                  "PATH; --selftest runs the PyTorch side alone)", file=sys.stderr)
            return 2
        if train_help(ccscope) is None:
            print(f"{PROG}: {ccscope} has no train verb", file=sys.stderr)
            return 2
        print(f"{PROG}: ccscope {ccscope}")
    ok = True
    with contextlib.ExitStack() as stack:
        if args.workdir:
            work = Path(args.workdir)
            work.mkdir(parents=True, exist_ok=True)
        else:
            work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="ccscope-vs-torch-")))
        if args.matrix and not args.selftest:
            print("\nloss comparison matrix (AdamW, tanh)")
            ok = matrix_comparison(args, ccscope, work)
        elif not args.skip_loss:
            print("\nloss comparison" + (" (selftest: NumPy reference)" if args.selftest else ""))
            ok = loss_comparison(args, ccscope, work)
        if not args.skip_speed and not args.matrix:
            print("\nspeed comparison (DDP on CPU, gloo)")
            speed_comparison(args, ccscope, work)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
