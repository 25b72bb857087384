#!/usr/bin/env python3
"""PyTorch reference for `plumb bench gpt --vs-pytorch`: GPT-2 as plumb's gpt
(src/models/gpt/gpt.h: pre-LayerNorm blocks, tanh-GELU, tied output weights,
vocabulary padded for the GEMMs) trained the way teams train it on one GPU:
flash attention through F.scaled_dot_product_attention (is_causal), fused
AdamW (0.9, 0.95; weight decay 0.1 on matrices), bf16 autocast, gradient
clipping at 1.0, eager or torch.compile.

Times --steps training steps after --warmup (CUDA events on a GPU, the wall
clock on the cpu) and prints one JSON line:
  {"tokens_per_s", "step_ms", "peak_mem_bytes", "loss_first", "loss_last",
   "val_loss", "mode", "precision", "device", "torch", "sdpa", "fused_adamw"}.
The learning rate is --lr, after a linear warmup over the first --lr-warmup
steps (lr (i + 1) / W at step i, as plumb's trainer and llm.c do); --seed
seeds the initialisation. --val-tokens FILE: after training, the mean loss
over the first --val-batches batches of B x T targets of that llm.c token
file (batch b row r: tokens [(bB + r) T, (bB + r + 1) T], the next tokens its
targets; plumb's validation windows and llm.c's val loader alike), null
without it.
Tokens: --tokens FILE reads an llm.c token file (plumb can write the batches
it times; 256 int32 header, magic 20240520, then uint16 tokens) and takes
consecutive windows of T+1 tokens; otherwise synthetic tokens from torch's
generator (seed 0). The same batches every run, so the loss after the
budget is comparable between runs and with plumb's.

  python3 bench/gpt_pytorch.py --preset gpt2-124m --batch 16 --seq 1024 --device cuda --mode compile
  python3 bench/gpt_pytorch.py --preset gpt-tiny --batch 4 --seq 64 --device cpu --steps 3   # a check that it runs
"""
import argparse
import json
import math
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

PRESETS = {
    "gpt-tiny": dict(n_layer=2, n_head=4, n_embd=64, block_size=64, vocab=256, vocab_padded=256),
    "gpt2-124m": dict(n_layer=12, n_head=12, n_embd=768, block_size=1024, vocab=50257, vocab_padded=50304),
}
HAVE_SDPA = hasattr(F, "scaled_dot_product_attention")


class Block(nn.Module):
    def __init__(self, C, NH):
        super().__init__()
        self.NH = NH
        self.ln_1 = nn.LayerNorm(C, eps=1e-5)
        self.c_attn = nn.Linear(C, 3 * C)
        self.c_proj = nn.Linear(C, C)
        self.ln_2 = nn.LayerNorm(C, eps=1e-5)
        self.c_fc = nn.Linear(C, 4 * C)
        self.mlp_proj = nn.Linear(4 * C, C)

    def attention(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q = q.view(B, T, self.NH, C // self.NH).transpose(1, 2)
        k = k.view(B, T, self.NH, C // self.NH).transpose(1, 2)
        v = v.view(B, T, self.NH, C // self.NH).transpose(1, 2)
        if HAVE_SDPA:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:  # torch < 2.0: the same causal softmax, materialised
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            mask = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
            y = att.masked_fill(~mask, float("-inf")).softmax(dim=-1) @ v
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))

    def forward(self, x):
        x = x + self.attention(self.ln_1(x))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        C = c["n_embd"]
        self.wte = nn.Embedding(c["vocab_padded"], C)
        self.wpe = nn.Embedding(c["block_size"], C)
        self.h = nn.ModuleList([Block(C, c["n_head"]) for _ in range(c["n_layer"])])
        self.ln_f = nn.LayerNorm(C, eps=1e-5)
        res = 0.02 / math.sqrt(2 * c["n_layer"])
        for name, p in self.named_parameters():  # GPT-2 init
            if p.dim() >= 2:
                nn.init.normal_(p, 0.0, res if name.endswith("c_proj.weight") or name.endswith("mlp_proj.weight") else 0.02)
            elif name.endswith("bias"):
                nn.init.zeros_(p)
        with torch.no_grad():
            self.wte.weight[c["vocab"]:] = 0

    def forward(self, idx, targets):
        T = idx.size(1)
        x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
        for b in self.h:
            x = b(x)
        logits = F.linear(self.ln_f(x), self.wte.weight)[..., : self.c["vocab"]]  # tied, padding rows dropped
        return F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), targets.reshape(-1), ignore_index=-1)


def token_file(path, need):
    """the uint16 tokens of an llm.c token file as int64, at least need of them"""
    with open(path, "rb") as f:
        head = torch.frombuffer(bytearray(f.read(1024)), dtype=torch.int32)
        if int(head[0]) != 20240520 or int(head[1]) != 1:
            sys.exit("%s: magic %d version %d (expected 20240520, 1)" % (path, int(head[0]), int(head[1])))
        cnt = int(head[2])
        raw = f.read(2 * cnt)
    if len(raw) != 2 * cnt:
        sys.exit("%s: truncated (expected %d tokens)" % (path, cnt))
    tok = torch.frombuffer(bytearray(raw), dtype=torch.int16).to(torch.int64) & 0xFFFF
    if tok.numel() < need:
        sys.exit("%s: %d tokens, expected at least %d" % (path, tok.numel(), need))
    return tok


def batches(args, c, device, n):
    """n batches of (tokens, targets) [B, T] on the device"""
    B, T = args.batch, args.seq
    if args.tokens:
        tok = token_file(args.tokens, n * B * T + 1)
    else:
        g = torch.Generator().manual_seed(0)
        tok = torch.randint(0, c["vocab"], (n * B * T + 1,), generator=g)
    out = []
    for i in range(n):
        w = tok[i * B * T: (i + 1) * B * T + 1]
        out.append((w[:-1].view(B, T).to(device), w[1:].view(B, T).to(device)))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--preset", default="gpt2-124m", choices=sorted(PRESETS))
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=0, help="sequence length (0: the preset's context)")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--precision", default="bf16", choices=["fp32", "bf16"])
    ap.add_argument("--mode", default="eager", choices=["eager", "compile"])
    ap.add_argument("--lr", type=float, default=6e-4)
    ap.add_argument("--tokens", default="", help="an llm.c token file to take the batches from")
    ap.add_argument("--seed", type=int, default=0, help="initialisation seed")
    ap.add_argument("--lr-warmup", type=int, default=0, help="linear learning-rate warmup steps")
    ap.add_argument("--val-tokens", default="", help="an llm.c token file to measure the loss on after training")
    ap.add_argument("--val-batches", type=int, default=4, help="batches of --val-tokens scored")
    a = ap.parse_args()
    c = dict(PRESETS[a.preset])
    a.seq = a.seq or c["block_size"]
    if a.seq > c["block_size"] or a.batch < 1 or a.steps < 1 or a.warmup < 0 or a.lr_warmup < 0 or a.val_batches < 1:
        sys.exit("gpt_pytorch: --seq %d (at most %d), --batch %d, --steps %d, --warmup %d, --lr-warmup %d, "
                 "--val-batches %d" % (a.seq, c["block_size"], a.batch, a.steps, a.warmup, a.lr_warmup, a.val_batches))
    dev = torch.device(a.device)
    cuda = dev.type == "cuda"
    if cuda and not torch.cuda.is_available():
        sys.exit("gpt_pytorch: --device cuda but torch sees no CUDA device")
    torch.manual_seed(a.seed)
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    model = GPT(c).to(dev)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    other = [p for n, p in model.named_parameters() if p.dim() < 2]
    fused = False
    kw = dict(lr=a.lr, betas=(0.9, 0.95), eps=1e-8)
    if cuda:
        try:
            opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": other, "weight_decay": 0.0}],
                                    fused=True, **kw)
            fused = True
        except TypeError:
            pass
    if not fused:
        opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": other, "weight_decay": 0.0}], **kw)
    fwd = model
    if a.mode == "compile":
        if not hasattr(torch, "compile"):
            sys.exit("gpt_pytorch: --mode compile needs torch >= 2.0 (this is %s)" % torch.__version__)
        fwd = torch.compile(model)
    data = batches(a, c, dev, a.warmup + a.steps)
    amp = torch.autocast(device_type=dev.type, dtype=torch.bfloat16, enabled=a.precision == "bf16")

    n_step = [0]

    def step(x, y):
        if a.lr_warmup:  # a float lr (fused AdamW takes it per step without recompiling)
            lr = a.lr * min(1.0, (n_step[0] + 1) / a.lr_warmup)
            for g in opt.param_groups:
                g["lr"] = lr
        n_step[0] += 1
        opt.zero_grad(set_to_none=True)
        with amp:
            loss = fwd(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss

    losses = []
    for i in range(a.warmup):
        losses.append(step(*data[i]).item())
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        t0, t1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        t0.record()
    w0 = time.perf_counter()
    last = first = None
    for i in range(a.steps):
        last = step(*data[a.warmup + i])
        if i == 0:
            first = last.detach()  # read after the timing (no sync inside it)
    if cuda:
        t1.record()
        torch.cuda.synchronize()
        ms = t0.elapsed_time(t1) / a.steps
    else:
        ms = 1e3 * (time.perf_counter() - w0) / a.steps
    if not losses:  # no untimed steps: the first timed one
        losses.append(first.item())
    losses.append(last.item())
    val_loss = None
    if a.val_tokens:
        B, T = a.batch, a.seq
        vt = token_file(a.val_tokens, a.val_batches * B * T + 1)
        model.eval()
        tot = 0.0
        with torch.no_grad(), amp:
            for b in range(a.val_batches):
                w = vt[b * B * T: (b + 1) * B * T + 1]
                tot += model(w[:-1].view(B, T).to(dev), w[1:].view(B, T).to(dev)).item()
        val_loss = tot / a.val_batches
    out = dict(tokens_per_s=a.batch * a.seq / (ms / 1e3), step_ms=ms,
               peak_mem_bytes=torch.cuda.max_memory_allocated() if cuda else 0,
               loss_first=losses[0], loss_last=losses[-1], val_loss=val_loss, seed=a.seed, mode=a.mode, precision=a.precision, device=str(dev),
               torch=torch.__version__, sdpa=HAVE_SDPA, fused_adamw=fused, preset=a.preset, batch=a.batch, seq=a.seq)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
