#!/usr/bin/env python3
"""PyTorch side of `plumb bench resnet --vs-pytorch`: the same ResNets as
src/models/resnet (torchvision's architecture, defined here so no torchvision
is needed), trained with SGD (momentum 0.9, weight decay 5e-4) and softmax
cross-entropy on synthetic data already on the device, channels_last, in
fp32, or bf16 / fp16 autocast (fp16 with a GradScaler), eager and/or
torch.compile. Prints one JSON object per (precision, mode) on stdout:

  {"impl": "pytorch", "model": ..., "batch": ..., "precision": ..., "mode":
   "eager"|"compile", "images_per_s": ..., "step_ms": ..., "peak_mem_mb": ...}

  python3 bench/resnet_torch.py --model resnet50 --batch 256 --precision bf16
  python3 bench/resnet_torch.py --model resnet-tiny --batch 8 --device cpu --steps 3 --warmup 1
"""
import argparse
import json
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

# name: (stem, block, blocks per stage, widths, stem width, image side, classes); as resnet.h's presets
PRESETS = {
    "resnet-tiny": ("cifar", "basic", [1, 1, 1], [8, 16, 32], 8, 32, 10),
    "resnet18": ("cifar", "basic", [2, 2, 2, 2], [64, 128, 256, 512], 64, 32, 10),
    "resnet50-cifar": ("cifar", "bottleneck", [3, 4, 6, 3], [64, 128, 256, 512], 64, 32, 10),
    "resnet50": ("imagenet", "bottleneck", [3, 4, 6, 3], [64, 128, 256, 512], 64, 224, 1000),
    "resnet152": ("imagenet", "bottleneck", [3, 8, 36, 3], [64, 128, 256, 512], 64, 224, 1000),
}


class Basic(nn.Module):
    expansion = 1

    def __init__(self, cin, planes, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = None
        if stride != 1 or cin != planes:
            self.downsample = nn.Sequential(nn.Conv2d(cin, planes, 1, stride, bias=False), nn.BatchNorm2d(planes))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + (x if self.downsample is None else self.downsample(x)))


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, cin, planes, stride):
        super().__init__()
        cout = planes * 4
        self.conv1 = nn.Conv2d(cin, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride, 1, bias=False)  # the stride on the 3x3 ("v1.5")
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, cout, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return F.relu(out + (x if self.downsample is None else self.downsample(x)))


class ResNet(nn.Module):
    def __init__(self, stem, block, blocks, widths, stem_width, classes):
        super().__init__()
        B = Basic if block == "basic" else Bottleneck
        if stem == "imagenet":
            self.conv1 = nn.Conv2d(3, stem_width, 7, 2, 3, bias=False)
            self.pool = nn.MaxPool2d(3, 2, 1)
        else:
            self.conv1 = nn.Conv2d(3, stem_width, 3, 1, 1, bias=False)
            self.pool = nn.Identity()
        self.bn1 = nn.BatchNorm2d(stem_width)
        layers, cin = [], stem_width
        for s, (n, w) in enumerate(zip(blocks, widths)):
            for j in range(n):
                layers.append(B(cin, w, 2 if s > 0 and j == 0 else 1))
                cin = w * B.expansion
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(cin, classes)
        for m in self.modules():  # torchvision's init
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)

    def forward(self, x):
        x = self.pool(F.relu(self.bn1(self.conv1(x))))
        x = self.layers(x)
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def run(args, precision, mode, dev):
    stem, block, blocks, widths, sw, side, classes = PRESETS[args.model]
    torch.manual_seed(0)
    model = ResNet(stem, block, blocks, widths, sw, classes).to(dev).to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
    x = torch.randn(args.batch, 3, side, side, device=dev).to(memory_format=torch.channels_last)
    y = torch.randint(0, classes, (args.batch,), device=dev)
    amp = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
    if hasattr(torch, "amp") and hasattr(torch.amp, "GradScaler"):  # PyTorch >= 2.3
        scaler = torch.amp.GradScaler(dev.type, enabled=precision == "fp16")
    else:
        scaler = torch.cuda.amp.GradScaler(enabled=precision == "fp16" and dev.type == "cuda")

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast(dev.type, dtype=amp, enabled=amp is not None):
            loss = F.cross_entropy(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        return loss

    if mode == "compile" and not hasattr(torch, "compile"):
        return {"impl": "pytorch", "torch": torch.__version__, "model": args.model, "batch": args.batch,
                "precision": precision, "mode": mode, "skipped": "torch.compile needs PyTorch 2"}
    fn = torch.compile(step) if mode == "compile" else step
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    for _ in range(args.warmup):
        fn()
    sync()
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    for _ in range(args.steps):
        loss = fn()
    sync()
    dt = (time.perf_counter() - t0) / args.steps
    peak = torch.cuda.max_memory_allocated() / 2**20 if dev.type == "cuda" else float("nan")
    return {"impl": "pytorch", "torch": torch.__version__, "model": args.model, "batch": args.batch,
            "precision": precision, "mode": mode, "images_per_s": args.batch / dt, "step_ms": 1e3 * dt,
            "peak_mem_mb": peak, "loss": float(loss), "device": str(dev)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="resnet50", choices=sorted(PRESETS))
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--precision", default="bf16", help="comma list of fp32, bf16, fp16")
    ap.add_argument("--modes", default="eager,compile", help="comma list of eager, compile")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--device", default="cuda")
    args = ap.parse_args()
    dev = torch.device(args.device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        sys.exit("resnet_torch.py: --device cuda but torch.cuda.is_available() is False")
    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = False  # plumb's fp32 is fp32 (TF32 off unless asked)
    torch.backends.cudnn.allow_tf32 = False
    for p in args.precision.split(","):
        if p not in ("fp32", "bf16", "fp16"):
            sys.exit(f"resnet_torch.py: --precision {p}: expected fp32, bf16 or fp16")
        for m in args.modes.split(","):
            if m not in ("eager", "compile"):
                sys.exit(f"resnet_torch.py: --modes {m}: expected eager or compile")
            print(json.dumps(run(args, p, m, dev)), flush=True)


if __name__ == "__main__":
    main()
