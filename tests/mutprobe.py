#!/usr/bin/env python3
"""Random mutation probe: proposes mutants for tests/mutants.py to run.

tests/mutants.txt holds mutants someone chose; this finds the lines nobody
chose. It picks N random one-line mutations of the given C files (a
comparison, an off-by-one, an operator, a fused multiply-add split, a
statement deleted) and prints them in tests/mutants.txt's format, each with
the test command given, for tests/mutants.py to apply in its scratch tree:

    tests/mutprobe.py --test 'build/plumb-tests resnet' --n 40 --seed 7 \\
        src/models/resnet/resnet.c src/dev/cpu_train_conv.c > /tmp/probe.txt
    tests/mutants.py /tmp/probe.txt

A survivor is a lead, not a verdict: many are equivalent (an extra empty
loop pass) or memory errors that only `make asan` sees. The real ones get a
test that fails with them and a block in tests/mutants.txt (docs/HACKING.md,
"Mutation checks"). Only lines that occur once in their file are proposed
(mutants.py's `find` must be unique); comments, preprocessor lines and
lines with string literals are skipped.
"""
import argparse
import random
import re
import sys

OPS = [
    (r" < ", " <= "), (r" <= ", " < "), (r" > ", " >= "), (r" >= ", " > "),
    (r" \+ 1\b", " + 2"), (r" - 1\b", ""), (r" \+ ", " - "), (r" - ", " + "), (r" \* ", " + "),
    (r"\+\+", "--"), (r" && ", " || "), (r" \|\| ", " && "), (r" == ", " != "), (r" != ", " == "),
    (r"\bfmaf\(([^,]+), ([^,]+), ", r"(\1) * (\2) + ("),
]


def candidates(path):
    text = open(path).read()
    lines = text.split("\n")
    out, in_comment = [], False
    for i, l in enumerate(lines):
        s = l.strip()
        if in_comment:
            in_comment = "*/" not in s
            continue
        if s.startswith("/*") and "*/" not in s:
            in_comment = True
            continue
        if not s or s.startswith(("//", "*", "/*", "#")) or '"' in s or text.count(l + "\n") != 1:
            continue
        for pat, rep in OPS:
            for m in re.finditer(pat, l):
                out.append((i, l[:m.start()] + m.expand(rep) + l[m.end():]))
        if s.endswith(";") and "=" in s and not re.match(r"(return|const|static|struct|int|float|double|size_t)\b", s):
            out.append((i, None))  # the statement deleted
    return lines, out


def esc(s):
    return s.replace("\\", "\\\\")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--test", required=True, help="the command each mutant must make fail (run in the tree's root)")
    ap.add_argument("--n", type=int, default=40, help="mutants to propose (default 40)")
    ap.add_argument("--seed", type=int, default=1, help="which random sample (default 1)")
    ap.add_argument("files", nargs="+", help="C sources, relative to the tree's root")
    a = ap.parse_args()
    pool = []
    for f in a.files:
        try:
            lines, cs = candidates(f)
        except OSError as ex:
            sys.exit(f"mutprobe: {f}: {ex.strerror}")
        pool += [(f, lines, i, new) for i, new in cs]
    if not pool:
        sys.exit("mutprobe: no line to mutate in " + " ".join(a.files))
    random.Random(a.seed).shuffle(pool)
    print(f"# tests/mutprobe.py --n {a.n} --seed {a.seed}: {min(a.n, len(pool))} of {len(pool)} candidates")
    for f, lines, i, new in pool[: a.n]:
        old = lines[i]
        print(f"\n== probe {f}:{i + 1}\nfile: {f}\nfind: {esc(old)}\\n\nrepl: {esc(new) + chr(92) + 'n' if new is not None else ''}\ntest: {a.test}")


if __name__ == "__main__":
    main()
