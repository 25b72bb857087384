#!/usr/bin/env python3
"""PyTorch reference for bench/ctr_cpu: the DLRM of src/models/ctr/ctr.h (Criteo Kaggle
configuration) with ONE fused sparse embedding table and plain SGD, fp32, on
the CPU. Prints one JSON line: {"samples_per_s": ..., ...}.

Model: bottom MLP 13-512-256-64-16 (ReLU after every layer), 26 tables of
ROWS x 16 fused into one nn.Embedding(26*ROWS, 16, sparse=True) with per-table
row offsets, dot interaction of the 27 vectors (351 pairs i > j after the
bottom output: 367 features), top MLP 367-512-256-1, BCEWithLogitsLoss, SGD.
Inputs: random dense features log(1+x)-like in [0, 3), uniform random rows.
The step timed is zero_grad + forward + loss + backward + SGD step.
"""
import argparse, json, math, statistics, time

import torch
import torch.nn as nn


class DLRM(nn.Module):
    def __init__(self, rows, dim=16, bottom=(13, 512, 256, 64, 16), top=(367, 512, 256, 1)):
        super().__init__()
        self.T = 26
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
        self.emb = nn.Embedding(self.T * rows, dim, sparse=True)
        self.register_buffer("offsets", torch.arange(self.T, dtype=torch.int64) * rows)
        F = self.T + 1
        li, lj = torch.tril_indices(F, F, offset=-1)
        self.register_buffer("li", li)
        self.register_buffer("lj", lj)
        # the init of ctr_init (src/models/ctr/ctr.h)
        with torch.no_grad():
            for m in self.modules():
                if isinstance(m, nn.Linear):
                    m.weight.normal_(0, math.sqrt(2.0 / (m.in_features + m.out_features)))
                    m.bias.normal_(0, math.sqrt(1.0 / m.out_features))
            b = math.sqrt(1.0 / rows)
            self.emb.weight.uniform_(-b, b)

    def forward(self, dense, sparse):
        x0 = self.bottom(dense)                              # [B, 16]
        e = self.emb(sparse + self.offsets)                  # [B, 26, 16]
        z = torch.cat([x0.unsqueeze(1), e], dim=1)           # [B, 27, 16]
        zz = torch.bmm(z, z.transpose(1, 2))                 # [B, 27, 27]
        dots = zz[:, self.li, self.lj]                       # [B, 351]
        return self.top(torch.cat([x0, dots], dim=1)).squeeze(1)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1000000, help="rows per table (default 1000000)")
    ap.add_argument("--batch", type=int, default=2048, help="batch size (default 2048)")
    ap.add_argument("--steps", type=int, default=20, help="timed steps (default 20)")
    ap.add_argument("--warmup", type=int, default=3, help="untimed steps first (default 3)")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (default 0 = all cores)")
    ap.add_argument("--lr", type=float, default=0.1, help="SGD learning rate (default 0.1)")
    a = ap.parse_args()
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    model = DLRM(a.rows)
    opt = torch.optim.SGD(model.parameters(), lr=a.lr)
    lossf = nn.BCEWithLogitsLoss()
    nb = 4  # distinct batches cycled
    dense = [torch.rand(a.batch, 13) * 3 for _ in range(nb)]
    sparse = [torch.randint(0, a.rows, (a.batch, 26), dtype=torch.int64) for _ in range(nb)]
    labels = [(torch.rand(a.batch) < 0.25).float() for _ in range(nb)]

    def step(i):
        opt.zero_grad(set_to_none=True)
        loss = lossf(model(dense[i % nb], sparse[i % nb]), labels[i % nb])
        loss.backward()
        opt.step()
        return loss.item()

    for i in range(a.warmup):
        step(i)
    times = []
    for i in range(a.steps):
        t0 = time.perf_counter()
        last = step(i)
        times.append(time.perf_counter() - t0)
    dt = sum(times)
    med = statistics.median(times)
    # samples_per_s from the median step time (robust on a shared machine),
    # samples_per_s_mean from the total; the same definitions as build/bench/ctr_cpu
    print(json.dumps({"impl": "pytorch", "torch": torch.__version__, "threads": torch.get_num_threads(),
                      "batch": a.batch, "rows": a.rows, "steps": a.steps, "seconds": dt,
                      "median_step_s": med, "samples_per_s": a.batch / med,
                      "samples_per_s_mean": a.batch * a.steps / dt, "last_loss": last}))


if __name__ == "__main__":
    main()
