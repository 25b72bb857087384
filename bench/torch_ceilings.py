#!/usr/bin/env python3
"""The device ceilings measured through PyTorch, the same way `plumb bench
ceilings` measures them: D2D copy (bytes read + written) and GEMM TFLOP/s
per precision (bf16, fp16, fp32, tf32; row-major C[M,N] = A[M,K] B[K,N]) on
uniform [0,1) inputs, one warm-up, a batch size R so one batch lasts about
--target-ms, --repeats batches timed with CUDA events, the median batch.

With --plumb JSON (plumb bench ceilings --json output) it prints both side
by side with the ratio plumb / PyTorch and writes it all to --json."""
import argparse, json, statistics, sys, math

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default="8192x8192x8192,32768x512x367,2048x1024x1024",
                    help="GEMM shapes MxNxK (default: %(default)s)")
    ap.add_argument("--dtypes", default="bf16,fp16,fp32,tf32", help="precisions (default: %(default)s)")
    ap.add_argument("--copy-mib", type=int, default=2048, help="copy size in MiB (default: %(default)s)")
    ap.add_argument("--repeats", type=int, default=10, help="timed batches (default: %(default)s)")
    ap.add_argument("--target-ms", type=float, default=20.0, help="batch length in ms (default: %(default)s)")
    ap.add_argument("--plumb", help="plumb bench ceilings --json file to compare with")
    ap.add_argument("--json", help="write PyTorch figures (and the comparison) here")
    ap.add_argument("--reuse", help="compare against the PyTorch figures of an earlier --json instead of measuring")
    a = ap.parse_args()
    if a.reuse:
        with open(a.reuse) as f:
            out = json.load(f)
        rows = out["results"]
        return compare(a, out, rows)
    import torch
    if not torch.cuda.is_available():
        print("torch_ceilings: torch sees no GPU", file=sys.stderr)
        return 3
    dev = torch.device("cuda")

    def time_batches(fn):
        fn(); torch.cuda.synchronize()
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record(); fn(); e1.record(); e1.synchronize()
        one = e0.elapsed_time(e1)
        R = max(1, min(100000, math.ceil(a.target_ms / one))) if one > 0 else 1
        ts = []
        for _ in range(a.repeats):
            e0.record()
            for _ in range(R):
                fn()
            e1.record(); e1.synchronize()
            ts.append(e0.elapsed_time(e1))
        ts.sort()
        return ts[a.repeats // 2] / R, R

    rows = []
    if a.copy_mib > 0:
        n = a.copy_mib << 20
        src = torch.rand(n // 4, device=dev)
        dst = torch.empty_like(src)
        ms, R = time_batches(lambda: dst.copy_(src))
        rows.append({"kind": "copy", "bytes_each_way": n, "ms": ms, "batch": R, "gbps": 2 * n / (ms * 1e-3) / 1e9})
        del src, dst
    dt = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32, "tf32": torch.float32}
    for shape in a.shapes.split(","):
        m, n, k = (int(x) for x in shape.split("x"))
        for p in a.dtypes.split(","):
            torch.backends.cuda.matmul.allow_tf32 = p == "tf32"
            # fp32 accumulation for half inputs, like plumb (no reduced-precision reductions)
            torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
            torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
            A = torch.rand(m, k, device=dev).to(dt[p])
            B = torch.rand(k, n, device=dev).to(dt[p])
            C = torch.empty(m, n, device=dev, dtype=dt[p])
            ms, R = time_batches(lambda: torch.matmul(A, B, out=C))
            rows.append({"kind": "gemm", "dtype": p, "m": m, "n": n, "k": k, "ms": ms, "batch": R,
                         "tflops": 2.0 * m * n * k / (ms * 1e-3) / 1e12})
            del A, B, C
    torch.backends.cuda.matmul.allow_tf32 = False
    out = {"schema": "plumb.torch_ceilings/1", "torch": torch.__version__, "cuda": torch.version.cuda,
           "name": torch.cuda.get_device_name(0), "results": rows}
    return compare(a, out, rows)


def compare(a, out, rows):

    def key(r):
        return ("copy",) if r["kind"] == "copy" else ("gemm", r["dtype"], r["m"], r["n"], r["k"])
    if a.plumb:
        with open(a.plumb) as f:
            pl = {key(r): r for r in json.load(f)["results"]}
        print(f"{'what':8} {'shape':20} {'plumb':>12} {'PyTorch':>12} {'ratio':>7}  unit")
        cmp = []
        for r in rows:
            q = pl.get(key(r))
            if not q:
                continue
            if r["kind"] == "copy":
                name, shape, unit, field = "copy", "D2D", "GB/s", "gbps"
            else:
                name, shape, unit, field = r["dtype"], f"{r['m']}x{r['n']}x{r['k']}", "TFLOP/s", "tflops"
            pv = q[field] if q else float("nan")
            ratio = pv / r[field] if q else float("nan")
            cmp.append({"what": name, "shape": shape, "unit": unit, "plumb": pv, "torch": r[field], "ratio": ratio})
            print(f"{name:8} {shape:20} {pv:12.1f} {r[field]:12.1f} {ratio:7.3f}  {unit}")
        out["comparison"] = cmp
        worst = min((c["ratio"] for c in cmp if c["ratio"] == c["ratio"]), default=float("nan"))
        out["worst_ratio"] = worst
        print(f"worst plumb/PyTorch ratio: {worst:.3f} (goal >= 0.95)")
    else:
        for r in rows:
            if r["kind"] == "copy":
                print(f"copy     D2D                  {r['gbps']:10.1f} GB/s")
            else:
                print(f"{r['dtype']:8} {r['m']}x{r['n']}x{r['k']:<10} {r['tflops']:10.1f} TFLOP/s")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0

if __name__ == "__main__":
    sys.exit(main())
