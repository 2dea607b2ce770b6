#!/usr/bin/env python3
"""ccscope's transformer (`ccscope train --model transformer`) in PyTorch.

`ccscope train --model transformer --strategy single --export DIR` writes
model.json, initial_parameters.f32 (the flat vector in transformer.h's
order), sequences.i64 ([samples x (seq_len + 1)] tokens: inputs, and the same
shifted by one as targets) and batches.i64 (every step's global batch of
sample indices). This module builds the same model from that vector
(`build_model`) and trains it on the same batches with the same optimizer,
gradient accumulation and clipping (`train`), returning the loss of every
step; compare_with_pytorch.py imports it. Run alone it compares with a
ccscope steps CSV (`--csv` of the same run):

    ccscope train --model transformer --strategy single --export DIR --csv steps.csv
    python3 pytorch_transformer.py DIR --ccscope-csv steps.csv

The model: token and learned position embeddings; pre-LayerNorm blocks
(x + proj(causal attention(ln1(x))), x + fc2(gelu(fc1(ln2(x)))), GELU exact,
LayerNorm eps 1e-5); final LayerNorm; an untied LM head without bias; the
cross-entropy's mean over every token of the global batch.
"""
from __future__ import annotations

import argparse
import csv
import json
import math
import sys
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn


class Block(nn.Module):
    def __init__(self, hidden: int, heads: int, ffn: int):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(hidden, eps=1e-5)
        self.qkv = nn.Linear(hidden, 3 * hidden)  # rows: Q, then K, then V (heads in order)
        self.proj = nn.Linear(hidden, hidden)
        self.ln2 = nn.LayerNorm(hidden, eps=1e-5)
        self.fc1 = nn.Linear(hidden, ffn)
        self.fc2 = nn.Linear(ffn, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, h = x.shape
        d = h // self.heads
        q, k, v = self.qkv(self.ln1(x)).split(h, dim=-1)
        q, k, v = (t.view(b, s, self.heads, d).transpose(1, 2) for t in (q, k, v))
        scores = q @ k.transpose(-2, -1) / math.sqrt(d)
        mask = torch.ones(s, s, dtype=torch.bool, device=x.device).triu(1)
        probs = scores.masked_fill(mask, float("-inf")).softmax(dim=-1)
        attn = (probs @ v).transpose(1, 2).reshape(b, s, h)
        x = x + self.proj(attn)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class Transformer(nn.Module):
    def __init__(self, vocab: int, seq_len: int, hidden: int, heads: int, layers: int, ffn: int):
        super().__init__()
        self.tok_emb = nn.Embedding(vocab, hidden)
        self.pos_emb = nn.Parameter(torch.zeros(seq_len, hidden))
        self.blocks = nn.ModuleList(Block(hidden, heads, ffn) for _ in range(layers))
        self.lnf = nn.LayerNorm(hidden, eps=1e-5)
        self.head = nn.Linear(hidden, vocab, bias=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.tok_emb(tokens) + self.pos_emb[: tokens.shape[1]]
        for block in self.blocks:
            x = block(x)
        return self.head(self.lnf(x))

    def flat_order(self) -> list[torch.Tensor]:
        """The parameters in the order of ccscope's flat vector (transformer.h)."""
        order = [self.tok_emb.weight, self.pos_emb]
        for b in self.blocks:
            order += [b.ln1.weight, b.ln1.bias, b.qkv.weight, b.qkv.bias, b.proj.weight,
                      b.proj.bias, b.ln2.weight, b.ln2.bias, b.fc1.weight, b.fc1.bias,
                      b.fc2.weight, b.fc2.bias]
        return order + [self.lnf.weight, self.lnf.bias, self.head.weight]


def build_model(config: dict, flat: np.ndarray, dtype=torch.float32) -> Transformer:
    """The module of model.json's shape holding the exported flat vector."""
    model = Transformer(config["vocab"], config["seq_len"], config["hidden"], config["heads"],
                        config["layers"], config["ffn"]).to(dtype)
    at = 0
    with torch.no_grad():
        for p in model.flat_order():
            n = p.numel()
            p.copy_(torch.from_numpy(np.asarray(flat[at:at + n])).view_as(p).to(dtype))
            at += n
    if at != len(flat):
        raise ValueError(f"the export holds {len(flat)} parameters, the model {at}")
    return model


def load_export(directory) -> tuple[dict, np.ndarray, np.ndarray, np.ndarray]:
    """model.json, the flat parameters, the sequences and the batches of an export."""
    d = Path(directory)
    config = json.loads((d / "model.json").read_text())
    if config.get("model") != "transformer":
        raise ValueError(f"{d}: not a transformer export (model.json has no \"model\": "
                         "\"transformer\")")
    flat = np.fromfile(d / "initial_parameters.f32", dtype=np.float32)
    sequences = np.fromfile(d / "sequences.i64", dtype=np.int64).reshape(
        config["samples"], config["seq_len"] + 1)
    batches = np.fromfile(d / "batches.i64", dtype=np.int64).reshape(
        config["steps"], config["global_batch"])
    return config, flat, sequences, batches


def make_optimizer(config: dict, parameters) -> torch.optim.Optimizer:
    o = config["optimizer"]
    if o["kind"] == "sgd":
        return torch.optim.SGD(parameters, lr=o["lr"], momentum=o["momentum"],
                               weight_decay=o["weight_decay"])
    cls = torch.optim.AdamW if o["kind"] == "adamw" else torch.optim.Adam
    return cls(parameters, lr=o["lr"], betas=(o["beta1"], o["beta2"]), eps=o["eps"],
               weight_decay=o["weight_decay"])


def train(config: dict, flat: np.ndarray, sequences: np.ndarray, batches: np.ndarray,
          dtype=torch.float32) -> list[float]:
    """Every step's loss: the global batch in config's micro-batches (their
    gradients summed, each micro-batch's loss over the global batch's tokens),
    clip_grad_norm_ when grad_clip is set, one optimizer step."""
    model = build_model(config, flat, dtype)
    optimizer = make_optimizer(config, model.parameters())
    data = torch.from_numpy(sequences)
    micro = config.get("micro_batches", 1)
    tokens_per_step = config["global_batch"] * config["seq_len"]
    losses = []
    for rows in batches:
        optimizer.zero_grad()
        total = 0.0
        for chunk in np.array_split(rows, micro):
            seqs = data[torch.from_numpy(chunk)]
            logits = model(seqs[:, :-1])
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), seqs[:, 1:].reshape(-1),
                                   reduction="sum") / tokens_per_step
            loss.backward()
            total += loss.item()
        if config.get("grad_clip"):
            nn.utils.clip_grad_norm_(model.parameters(), config["grad_clip"])
        optimizer.step()
        losses.append(total)
    return losses


def ccscope_losses(path) -> list[float]:
    """The loss column of a ccscope.train_step/1 CSV, in step order."""
    with open(path, newline="") as f:
        rows = sorted(csv.DictReader(f), key=lambda r: int(r["step"]))
    return [float(r["loss"]) for r in rows]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("export", help="the directory of ccscope train --model transformer --export")
    p.add_argument("--ccscope-csv", help="the same run's --csv: compare its losses")
    p.add_argument("--tolerance", type=float, default=1e-4,
                   help="largest relative loss difference allowed (default 1e-4)")
    a = p.parse_args(argv)
    torch.set_num_threads(1)
    config, flat, sequences, batches = load_export(a.export)
    ours = train(config, flat, sequences, batches)
    exact = train(config, flat, sequences, batches, torch.float64)
    print(f"pytorch float32: first loss {ours[0]:.6g}, last {ours[-1]:.6g} over {len(ours)} steps")
    f32 = max(abs(x - y) / abs(y) for x, y in zip(ours, exact))
    print(f"pytorch float32 vs float64: max relative difference {f32:.3g}")
    if not a.ccscope_csv:
        return 0
    theirs = ccscope_losses(a.ccscope_csv)
    n = min(len(theirs), len(ours))
    diffs = [abs(theirs[i] - ours[i]) / abs(ours[i]) for i in range(n)]
    worst = max(range(n), key=lambda i: diffs[i])
    ok = diffs[worst] <= a.tolerance
    print(f"ccscope vs pytorch over {n} steps: max relative difference {diffs[worst]:.3g} at step "
          f"{worst}, tolerance {a.tolerance:g}: {'equivalent' if ok else 'NOT equivalent'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
