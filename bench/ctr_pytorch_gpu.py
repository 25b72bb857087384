#!/usr/bin/env python3
"""PyTorch reference for `plumb bench ctr --vs-pytorch` on a GPU: the DLRM of
src/models/ctr/ctr.h (Criteo Kaggle configuration) with ONE fused sparse embedding
table and plain SGD, eager or torch.compile, fp32 or bf16 autocast.

Throughput mode (default): reads the batches plumb wrote (--data-file, the
same samples plumb times), keeps them on the device, and times --steps
training steps after --warmup with CUDA events; prints one JSON line
{"samples_per_s": ..., "step_ms": ..., "peak_mem_bytes": ...}.

AUC mode (--auc): trains one pass over --train-file in order (batches of
--batch, lr with linear warm-up), then scores --eval-file and prints
{"auc": ...} (ties by mid-rank).

Model: bottom MLP 13-512-256-64-16 (ReLU after every layer), 26 tables of
ROWS x 16 fused into one nn.Embedding(26*ROWS, 16, sparse=True) with per-table
row offsets, dot interaction of the 27 vectors (351 pairs i > j after the
bottom output: 367 features), top MLP 367-512-256-1, BCEWithLogitsLoss (mean),
SGD. torch.compile compiles the dense part (bottom MLP, interaction, top MLP,
loss); the sparse lookup stays eager because sparse gradients do not go
through AOTAutograd.

File format (written by plumb): b"PLCTR1\\0\\0", int64 n, float32 dense[n,13],
int32 rows[n,26] (row within table), float32 labels[n].
"""
import argparse, json, math, os, sys, time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def read_file(path):
    with open(path, "rb") as f:
        if f.read(8) != b"PLCTR1\0\0":
            raise SystemExit(f"{path}: not a plumb ctr batch file")
        n = int(np.frombuffer(f.read(8), dtype=np.int64)[0])
        dense = np.frombuffer(f.read(n * 13 * 4), dtype=np.float32).reshape(n, 13)
        rows = np.frombuffer(f.read(n * 26 * 4), dtype=np.int32).reshape(n, 26)
        labels = np.frombuffer(f.read(n * 4), dtype=np.float32)
    return dense, rows, labels


class Dense(nn.Module):
    def __init__(self, bottom=(13, 512, 256, 64, 16), top=(367, 512, 256, 1)):
        super().__init__()
        layers = []
        for i in range(len(bottom) - 1):
            layers += [nn.Linear(bottom[i], bottom[i + 1]), nn.ReLU()]
        self.bottom = nn.Sequential(*layers)
        layers = []
        for i in range(len(top) - 1):
            layers.append(nn.Linear(top[i], top[i + 1]))
            if i < len(top) - 2:
                layers.append(nn.ReLU())
        self.top = nn.Sequential(*layers)
        li, lj = torch.tril_indices(27, 27, offset=-1)
        self.register_buffer("li", li)
        self.register_buffer("lj", lj)
        with torch.no_grad():
            for m in self.modules():
                if isinstance(m, nn.Linear):
                    m.weight.normal_(0, math.sqrt(2.0 / (m.in_features + m.out_features)))
                    m.bias.normal_(0, math.sqrt(1.0 / m.out_features))

    def forward(self, dense, e):
        x0 = self.bottom(dense)                              # [B, 16]
        z = torch.cat([x0.unsqueeze(1), e.to(x0.dtype)], 1)  # [B, 27, 16]
        zz = torch.bmm(z, z.transpose(1, 2))                 # [B, 27, 27]
        dots = zz[:, self.li, self.lj]                       # [B, 351]
        return self.top(torch.cat([x0, dots], dim=1)).squeeze(1)


def loss_of(dense_mod, dense, e, labels):
    return F.binary_cross_entropy_with_logits(dense_mod(dense, e).float(), labels)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1000000, help="rows per table (default 1000000)")
    ap.add_argument("--batch", type=int, default=2048, help="batch size (default 2048)")
    ap.add_argument("--precision", choices=["fp32", "bf16"], default="fp32", help="fp32 or bf16 autocast (default fp32)")
    ap.add_argument("--mode", choices=["eager", "compile"], default="eager", help="eager or torch.compile (default eager)")
    ap.add_argument("--steps", type=int, default=200, help="timed steps (default 200)")
    ap.add_argument("--warmup", type=int, default=30, help="untimed steps first (default 30)")
    ap.add_argument("--lr", type=float, default=0.1, help="SGD learning rate (default 0.1)")
    ap.add_argument("--data-file", help="batches written by plumb bench ctr (throughput mode)")
    ap.add_argument("--auc", action="store_true", help="AUC mode: train on --train-file, score --eval-file")
    ap.add_argument("--train-file")
    ap.add_argument("--eval-file")
    ap.add_argument("--warmup-lr-steps", dest="warm", type=int, default=100, help="linear lr warm-up steps in AUC mode")
    ap.add_argument("--init-file", help="initial parameters from plumb (tensor order: bottom/top weight, bias; tables)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cuda", help="torch device (default cuda; cpu for a functional check)")
    a = ap.parse_args()
    if a.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("no CUDA device for the PyTorch reference")
    dev = torch.device(a.device)
    torch.manual_seed(a.seed)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    T, D = 26, 16
    emb = nn.Embedding(T * a.rows, D, sparse=True).to(dev)
    with torch.no_grad():
        b = math.sqrt(1.0 / a.rows)
        emb.weight.uniform_(-b, b)
    offsets = (torch.arange(T, dtype=torch.int64, device=dev) * a.rows)
    dense_mod = Dense().to(dev)
    if a.init_file:
        flat = torch.from_numpy(np.fromfile(a.init_file, dtype=np.float32))
        o = 0
        with torch.no_grad():
            for lin in [m for m in dense_mod.modules() if isinstance(m, nn.Linear)]:
                for prm in (lin.weight, lin.bias):
                    k = prm.numel()
                    prm.copy_(flat[o:o + k].view_as(prm))
                    o += k
            k = emb.weight.numel()
            emb.weight.copy_(flat[o:o + k].view_as(emb.weight))
            o += k
        if o != flat.numel():
            raise SystemExit(f"{a.init_file}: {flat.numel()} floats, the model has {o}")
    opt = torch.optim.SGD(list(dense_mod.parameters()) + list(emb.parameters()), lr=a.lr)
    step_fn = loss_of
    if a.mode == "compile":
        step_fn = torch.compile(loss_of)
    amp = torch.autocast(dev.type, dtype=torch.bfloat16, enabled=a.precision == "bf16")

    def train_step(dense, rows, labels):
        e = emb(rows + offsets)
        with amp:
            loss = step_fn(dense_mod, dense, e, labels)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    if a.auc:
        d, r, l = read_file(a.train_file)
        d, r, l = (torch.from_numpy(d.copy()).to(dev), torch.from_numpy(r.astype(np.int64)).to(dev),
                   torch.from_numpy(l.copy()).to(dev))
        n = d.shape[0] // a.batch
        for s in range(n):
            lr = a.lr * (s + 1) / a.warm if s < a.warm else a.lr
            for g in opt.param_groups:
                g["lr"] = lr
            sl = slice(s * a.batch, (s + 1) * a.batch)
            train_step(d[sl], r[sl], l[sl])
        ed, er, el = read_file(a.eval_file)
        scores = []
        with torch.no_grad():
            ed_t, er_t = torch.from_numpy(ed.copy()).to(dev), torch.from_numpy(er.astype(np.int64)).to(dev)
            for i in range(0, ed.shape[0], a.batch):
                e = emb(er_t[i:i + a.batch] + offsets)
                scores.append(torch.sigmoid(dense_mod(ed_t[i:i + a.batch], e).float()).cpu())
        sc = torch.cat(scores).numpy().astype(np.float64)
        from scipy.stats import rankdata
        y = el.astype(np.float64)
        ranks = rankdata(sc)  # mid-ranks for ties
        npos, nneg = y.sum(), len(y) - y.sum()
        auc = (ranks[y == 1].sum() - npos * (npos + 1) / 2) / (npos * nneg)
        print(json.dumps({"auc": float(auc), "steps": n, "batch": a.batch, "torch": torch.__version__}))
        return

    d, r, l = read_file(a.data_file)
    nb = d.shape[0] // a.batch
    if nb < 1:
        raise SystemExit(f"{a.data_file}: fewer samples than one batch of {a.batch}")
    d = torch.from_numpy(d.copy()).to(dev).view(nb, a.batch, 13)
    r = torch.from_numpy(r.astype(np.int64)).to(dev).view(nb, a.batch, 26)
    l = torch.from_numpy(l.copy()).to(dev).view(nb, a.batch)
    for s in range(a.warmup):
        train_step(d[s % nb], r[s % nb], l[s % nb])
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    ev0, ev1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    t0 = time.perf_counter()
    ev0.record()
    for s in range(a.steps):
        loss = train_step(d[s % nb], r[s % nb], l[s % nb])
    ev1.record()
    torch.cuda.synchronize()
    wall = time.perf_counter() - t0
    ms = ev0.elapsed_time(ev1)
    print(json.dumps({
        "samples_per_s": a.batch * a.steps / (ms / 1e3), "step_ms": ms / a.steps, "wall_s": wall,
        "peak_mem_bytes": torch.cuda.max_memory_allocated(), "loss": float(loss.detach()), "mode": a.mode,
        "precision": a.precision, "batch": a.batch, "torch": torch.__version__,
        "device": torch.cuda.get_device_name(0)}))


if __name__ == "__main__":
    main()
