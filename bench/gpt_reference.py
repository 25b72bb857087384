#!/usr/bin/env python3
"""gpt-tiny in PyTorch (cpu, fp32): the reference state plumb's gpt is checked
against (llm.c's test_gpt2 idea). Writes one file with the inputs, the
initial parameters, the logits, the loss, every parameter gradient, and the
losses of 10 AdamW steps; tests/test_gpt_reference.c loads it and compares
plumb's fast cpu path (and the GPU path on a GPU host).

    python3 bench/gpt_reference.py [--text FILE] [--out bench/gpt_tiny_reference.bin]

The model is plumb's gpt-tiny (src/models/gpt/gpt.h): 2 pre-LayerNorm
blocks, 4 heads, width 64, context 64, vocabulary 256 (bytes), tanh-GELU,
LayerNorm eps 1e-5, output weights tied to the token embedding. Its
parameters are GPT-2's init drawn from torch's generator (seed 0) and then
rounded to bf16, so that the file can hold them in 2 bytes each exactly
(the model computes in fp32). Inputs: B=4 sequences of T=32 bytes of the
text file from offset 0 (tokens) and the next bytes (targets).

The 10 steps: AdamW (lr 1e-3, betas (0.9, 0.95), eps 1e-8), weight decay 0.1
on the matrices (parameters of 2 or more dimensions) and none on biases and
LayerNorm parameters, gradient clipping at global norm 1.0
(torch.nn.utils.clip_grad_norm_), the same batch every step; losses[i] is
the loss before update i.

File format ("PLUMBGPTREF1"): the line b"PLUMBGPTREF1\\n", one line of JSON
(utf-8) ending in b"\\n", then the payload. The JSON holds "config" (n_layer,
n_head, n_embd, block_size, vocab, vocab_padded), "B", "T", "optimizer"
(lr, beta1, beta2, eps, weight_decay, clip, steps), "torch" (version),
"source" (file, offset) and "tensors": a list of {"name", "dtype" ("i32",
"f32" or "bf16"; little endian), "shape", "offset" (bytes from the start of
the payload), "nbytes"}. Tensor names: "tokens" [B,T], "targets" [B,T],
"param:NAME" and "grad:NAME" for every parameter (plumb's tensor names,
PyTorch [out, in] layout), "logits" [B,T,V], "loss" [1], "losses" [steps].
"""
import argparse
import json
import math
import os
import struct
import sys

import torch
import torch.nn.functional as F

CFG = dict(n_layer=2, n_head=4, n_embd=64, block_size=64, vocab=256, vocab_padded=256)
B, T = 4, 32
OPT = dict(lr=1e-3, beta1=0.9, beta2=0.95, eps=1e-8, weight_decay=0.1, clip=1.0, steps=10)


def param_shapes(c):
    """plumb's tensor list (names and shapes), in layout order."""
    C, L = c["n_embd"], c["n_layer"]
    out = [("wte", (c["vocab_padded"], C)), ("wpe", (c["block_size"], C))]
    for l in range(L):
        p = "h.%d." % l
        out += [(p + "ln_1.weight", (C,)), (p + "ln_1.bias", (C,)),
                (p + "attn.c_attn.weight", (3 * C, C)), (p + "attn.c_attn.bias", (3 * C,)),
                (p + "attn.c_proj.weight", (C, C)), (p + "attn.c_proj.bias", (C,)),
                (p + "ln_2.weight", (C,)), (p + "ln_2.bias", (C,)),
                (p + "mlp.c_fc.weight", (4 * C, C)), (p + "mlp.c_fc.bias", (4 * C,)),
                (p + "mlp.c_proj.weight", (C, 4 * C)), (p + "mlp.c_proj.bias", (C,))]
    out += [("ln_f.weight", (C,)), ("ln_f.bias", (C,))]
    return out


def gpt2_init(c, gen):
    params = {}
    res_std = 0.02 / math.sqrt(2 * c["n_layer"])
    for name, shape in param_shapes(c):
        if len(shape) == 2:
            std = res_std if name.endswith("c_proj.weight") else 0.02
            t = torch.randn(shape, generator=gen, dtype=torch.float32) * std
            if name == "wte":
                t[c["vocab"]:] = 0.0
        elif name.endswith(".weight") and ".ln_" in "." + name:
            t = torch.ones(shape)
        else:
            t = torch.zeros(shape)
        # bf16 values held in fp32: the file stores them exactly in 2 bytes
        params[name] = t.to(torch.bfloat16).to(torch.float32).requires_grad_(True)
    return params


def forward(p, c, idx, targets):
    Bn, Tn = idx.shape
    C, NH = c["n_embd"], c["n_head"]
    HS = C // NH
    x = p["wte"][idx] + p["wpe"][:Tn]
    mask = torch.ones(Tn, Tn, dtype=torch.bool).tril()
    for l in range(c["n_layer"]):
        q = "h.%d." % l
        h = F.layer_norm(x, (C,), p[q + "ln_1.weight"], p[q + "ln_1.bias"], 1e-5)
        qkv = F.linear(h, p[q + "attn.c_attn.weight"], p[q + "attn.c_attn.bias"])
        qq, kk, vv = qkv.split(C, dim=2)
        qq = qq.view(Bn, Tn, NH, HS).transpose(1, 2)
        kk = kk.view(Bn, Tn, NH, HS).transpose(1, 2)
        vv = vv.view(Bn, Tn, NH, HS).transpose(1, 2)
        att = (qq @ kk.transpose(-2, -1)) * (1.0 / math.sqrt(HS))
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        y = (att @ vv).transpose(1, 2).contiguous().view(Bn, Tn, C)
        x = x + F.linear(y, p[q + "attn.c_proj.weight"], p[q + "attn.c_proj.bias"])
        h = F.layer_norm(x, (C,), p[q + "ln_2.weight"], p[q + "ln_2.bias"], 1e-5)
        h = F.gelu(F.linear(h, p[q + "mlp.c_fc.weight"], p[q + "mlp.c_fc.bias"]), approximate="tanh")
        x = x + F.linear(h, p[q + "mlp.c_proj.weight"], p[q + "mlp.c_proj.bias"])
    x = F.layer_norm(x, (C,), p["ln_f.weight"], p["ln_f.bias"], 1e-5)
    logits = F.linear(x, p["wte"][: c["vocab"]])
    loss = F.cross_entropy(logits.view(-1, c["vocab"]), targets.view(-1), ignore_index=-1)
    return logits, loss


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--text", default="/usr/share/common-licenses/GPL-3")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "gpt_tiny_reference.bin"))
    a = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)  # one order of summation: the file is the same on every run
    data = open(a.text, "rb").read()
    if len(data) < B * T + 1:
        sys.exit("gpt_reference: %s has %d bytes, expected at least %d" % (a.text, len(data), B * T + 1))
    buf = torch.tensor(list(data[: B * T + 1]), dtype=torch.int64)
    idx, tgt = buf[:-1].view(B, T), buf[1:].view(B, T)
    gen = torch.Generator().manual_seed(0)
    p = gpt2_init(CFG, gen)
    init = {k: v.detach().clone() for k, v in p.items()}

    logits, loss = forward(p, CFG, idx, tgt)
    loss.backward()
    grads = {k: v.grad.detach().clone() for k, v in p.items()}

    # 10 AdamW steps with clipping, from the same init
    for v in p.values():
        v.grad = None
    decay = [v for k, v in p.items() if v.dim() >= 2]
    nodecay = [v for k, v in p.items() if v.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": OPT["weight_decay"]},
                             {"params": nodecay, "weight_decay": 0.0}],
                            lr=OPT["lr"], betas=(OPT["beta1"], OPT["beta2"]), eps=OPT["eps"])
    losses = []
    for step in range(OPT["steps"]):
        opt.zero_grad(set_to_none=True)
        _, l = forward(p, CFG, idx, tgt)
        l.backward()
        torch.nn.utils.clip_grad_norm_(list(p.values()), OPT["clip"])
        opt.step()
        losses.append(l.item())
        print("step %d loss %.6f" % (step, l.item()))

    tensors, blobs, off = [], [], 0

    def add(name, t, dtype):
        nonlocal off
        t = t.detach().contiguous()
        if dtype == "bf16":
            raw = t.to(torch.bfloat16).view(torch.int16).numpy().astype("<i2").tobytes()
        elif dtype == "f32":
            raw = t.to(torch.float32).numpy().astype("<f4").tobytes()
        else:
            raw = t.to(torch.int32).numpy().astype("<i4").tobytes()
        tensors.append(dict(name=name, dtype=dtype, shape=list(t.shape), offset=off, nbytes=len(raw)))
        blobs.append(raw)
        off += len(raw)

    add("tokens", idx, "i32")
    add("targets", tgt, "i32")
    for name, _ in param_shapes(CFG):
        add("param:" + name, init[name], "bf16")
    for name, _ in param_shapes(CFG):
        add("grad:" + name, grads[name], "f32")
    add("logits", logits, "f32")
    add("loss", loss.detach().view(1), "f32")
    add("losses", torch.tensor(losses), "f32")
    head = dict(config=CFG, B=B, T=T, optimizer=OPT, torch=torch.__version__,
                source=dict(file=os.path.basename(a.text), offset=0), tensors=tensors)
    with open(a.out, "wb") as f:
        f.write(b"PLUMBGPTREF1\n")
        f.write(json.dumps(head, sort_keys=True).encode() + b"\n")
        for b in blobs:
            f.write(b)
    print("loss %.6f; wrote %s (%d bytes)" % (loss.item(), a.out, os.path.getsize(a.out)))


if __name__ == "__main__":
    main()
