#!/usr/bin/env python3
"""PyTorch time to quality for `plumb bench ctr --to-auc X`: the DLRM of
bench/ctr_pytorch_gpu.py (the same model, one fused sparse table, plain SGD
with linear lr warm-up, fp32 or bf16 autocast, eager or torch.compile),
trained by its own loop until the AUC on a fixed eval set reaches --target,
evaluating every --eval-every steps.

Data: the samples plumb trains on (--train-file, the synthetic teacher's
train split in index order; --eval-file, the eval split), in plumb's batch
file format (b"PLCTR1\\0\\0", int64 n, float32 dense[n,13], int32 rows[n,26],
float32 labels[n]). The training loop reads them through a torch DataLoader:
a Dataset of whole shuffled batches (a fresh permutation per epoch, gathered
in the worker), --workers worker processes, pinned memory, copies to the GPU
with non_blocking=True. Eval: the whole eval set on the device, AUC with
ties by mid-rank (as plumb's eval).

Prints one JSON line: reached (bool), reached_s (wall seconds from the first
batch request to the end of the eval that reached the target, evals
included), steps, samples, eval_s, setup_s, auc (the last eval), and the
settings.
"""
import argparse, json, math, sys, time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

sys.path.insert(0, __file__.rsplit("/", 1)[0] if "/" in __file__ else ".")
from ctr_pytorch_gpu import Dense, loss_of, read_file  # noqa: E402  (the same model)


class Batches(Dataset):
    """Batch i of an epoch: samples perm[i*B:(i+1)*B] (drop the last partial)."""

    def __init__(self, dense, rows, labels, batch, seed):
        self.d, self.r, self.l = dense, rows, labels
        self.batch, self.seed, self.epoch = batch, seed, 0
        self.nb = dense.shape[0] // batch
        self.perm = None

    def set_epoch(self, ep):
        self.epoch = ep
        g = torch.Generator().manual_seed(self.seed * 1000003 + ep)
        self.perm = torch.randperm(self.d.shape[0], generator=g)

    def __len__(self):
        return self.nb

    def __getitem__(self, i):
        ix = self.perm[i * self.batch:(i + 1) * self.batch]
        return self.d[ix], self.r[ix], self.l[ix]


def auc_of(scores, labels):
    """AUC with ties by mid-rank, on the device (float64)."""
    order = torch.argsort(scores)
    s, y = scores[order], labels[order].double()
    _, inv, counts = torch.unique_consecutive(s, return_inverse=True, return_counts=True)
    ends = torch.cumsum(counts, 0).double()
    mid = ends - (counts.double() - 1) / 2
    ranks = mid[inv]
    npos = y.sum()
    nneg = y.numel() - npos
    return float(((ranks * y).sum() - npos * (npos + 1) / 2) / (npos * nneg))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--train-file", required=True)
    ap.add_argument("--eval-file", required=True)
    ap.add_argument("--init-file", help="initial parameters from plumb (tensor order)")
    ap.add_argument("--rows", type=int, default=1000000)
    ap.add_argument("--batch", type=int, default=2048)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--warmup", type=int, default=100, help="linear lr warm-up steps")
    ap.add_argument("--target", type=float, required=True, help="eval AUC to reach")
    ap.add_argument("--eval-every", type=int, default=500)
    ap.add_argument("--max-steps", type=int, default=20000)
    ap.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    ap.add_argument("--mode", choices=["eager", "compile"], default="eager")
    ap.add_argument("--workers", type=int, default=4, help="DataLoader worker processes")
    ap.add_argument("--seed", type=int, default=21)
    ap.add_argument("--device", default="cuda")
    a = ap.parse_args()
    if a.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("no CUDA device for the PyTorch reference")
    t_setup = time.perf_counter()
    dev = torch.device(a.device)
    torch.manual_seed(a.seed)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    T, D = 26, 16
    emb = nn.Embedding(T * a.rows, D, sparse=True).to(dev)
    offsets = torch.arange(T, dtype=torch.int64, device=dev) * a.rows
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
    step_fn = torch.compile(loss_of) if a.mode == "compile" else loss_of
    amp = torch.autocast(dev.type, dtype=torch.bfloat16, enabled=a.precision == "bf16")
    d, r, l = read_file(a.train_file)
    ds = Batches(torch.from_numpy(d.copy()), torch.from_numpy(r.astype(np.int64)), torch.from_numpy(l.copy()),
                 a.batch, a.seed)
    ed, er, el = read_file(a.eval_file)
    ed_t = torch.from_numpy(ed.copy()).to(dev)
    er_t = torch.from_numpy(er.astype(np.int64)).to(dev) + offsets
    el_t = torch.from_numpy(el.copy()).to(dev)
    setup_s = time.perf_counter() - t_setup

    def evaluate():
        out = []
        with torch.no_grad(), amp:
            for i in range(0, ed_t.shape[0], 65536):
                out.append(dense_mod(ed_t[i:i + 65536], emb(er_t[i:i + 65536])).float())
        return auc_of(torch.cat(out).double(), el_t)

    step, eval_s, auc, reached = 0, 0.0, float("nan"), False
    t0 = time.perf_counter()
    epoch = 0
    while step < a.max_steps and not reached:
        ds.set_epoch(epoch)
        dl = DataLoader(ds, batch_size=None, shuffle=False, num_workers=a.workers, pin_memory=dev.type == "cuda",
                        prefetch_factor=4 if a.workers > 0 else None)
        for bd, br, bl in dl:
            bd = bd.to(dev, non_blocking=True)
            br = br.to(dev, non_blocking=True)
            bl = bl.to(dev, non_blocking=True)
            lr = a.lr * (step + 1) / a.warmup if step < a.warmup else a.lr
            for g in opt.param_groups:
                g["lr"] = lr
            e = emb(br + offsets)
            with amp:
                loss = step_fn(dense_mod, bd, e, bl)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            if step % a.eval_every == 0:
                te = time.perf_counter()
                auc = evaluate()  # reads the scores back: synchronises
                eval_s += time.perf_counter() - te
                if auc >= a.target:
                    reached = True
                    break
            if step >= a.max_steps:
                break
        epoch += 1
    reached_s = time.perf_counter() - t0
    print(json.dumps({"reached": reached, "reached_s": reached_s, "steps": step, "samples": step * a.batch,
                      "eval_s": eval_s, "setup_s": setup_s, "auc": auc, "target": a.target, "batch": a.batch,
                      "lr": a.lr, "warmup": a.warmup, "precision": a.precision, "mode": a.mode,
                      "workers": a.workers, "torch": torch.__version__}))


if __name__ == "__main__":
    main()
