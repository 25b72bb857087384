#!/usr/bin/env python3
"""Mutation checks: every claim a test makes is checked by a break it catches.

tests/mutants.txt lists mutations, one block each:

    == name (what the break is)          "== [sample] name" marks CI's sample
    file: src/dev/cpu_op_reduce.c
    find: for (int j = 0; i < n; i++, j++) a[j] += x[i];
    repl:
    test: build/plumb-tests numerics_fast_sum

`find` must occur exactly once in the file; `repl` replaces it (\\n, \\t and
\\\\ are escapes in both; an empty repl deletes). `test` is a shell command run
in the scratch tree's root, the same environment as tests/run.sh gives its
scripts (PLUMB, PLUMB_BUILD, PLUMB_ROOT, the Open MPI settings); it must exit
non-zero with the mutation in place ("caught") and zero without it (checked
once per distinct command first, so a test that fails anyway catches
nothing).

Each mutation is applied in a scratch copy of the tree (the tracked and
untracked-but-not-ignored files, copied into build-mut/tree with their
times, the build folder seeded from build/ so the first build is
incremental), built there (make: only what the mutation touches is rebuilt),
tested, and restored. Prints "caught" or "SURVIVED" per mutant and a summary
line; exits 1 if any survived, its text was not found exactly once, it did
not build, or a test failed without a mutation.

Environment: MUTANTS_SAMPLE=N runs only the first N mutants marked [sample]
(CI); MUTANTS_ONLY=SUBSTRING those whose name contains it; MUTANTS_TIMEOUT
(seconds, default 1200) bounds each test run, a run past it counts as caught
(a hang is a failure) and is reported as such.
Usage: tests/mutants.py [LIST]   (make mutants)
"""
import os
import shutil
import signal
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIST = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "tests", "mutants.txt")
SCRATCH = os.path.join(ROOT, "build-mut")
TREE = os.path.join(SCRATCH, "tree")
TIMEOUT = float(os.environ.get("MUTANTS_TIMEOUT", "1200"))


def unescape(s):
    out, i = [], 0
    while i < len(s):
        c = s[i]
        if c == "\\" and i + 1 < len(s):
            n = s[i + 1]
            out.append({"n": "\n", "t": "\t", "\\": "\\"}.get(n, "\\" + n))
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def parse(path):
    muts, cur = [], None
    for lineno, raw in enumerate(open(path, encoding="utf-8"), 1):
        line = raw.rstrip("\n")
        if line.startswith("== "):
            name = line[3:].strip()
            sample = name.startswith("[sample]")
            if sample:
                name = name[len("[sample]"):].strip()
            cur = {"name": name, "sample": sample, "line": lineno}
            muts.append(cur)
            continue
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        key, sep, val = line.partition(":")
        if cur is None or not sep or key not in ("file", "find", "repl", "test"):
            sys.exit("%s:%d: expected '== name' or 'file:|find:|repl:|test: value', got %r" % (path, lineno, line))
        cur[key] = unescape(val[1:] if val.startswith(" ") else val)
    for m in muts:
        for k in ("file", "find", "repl", "test"):
            if k not in m:
                sys.exit("%s:%d: mutant '%s' has no %s:" % (path, m["line"], m["name"], k))
        if not m["find"]:
            sys.exit("%s:%d: mutant '%s': empty find:" % (path, m["line"], m["name"]))
    return muts


def sync_tree():
    """The scratch copy: tracked + untracked-not-ignored files; a file is
    copied (with its time) only when its bytes differ, so objects built
    from unchanged files stay valid."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, check=True,
                           capture_output=True).stdout.decode().split("\0")
    files = [f for f in files if f and os.path.isfile(os.path.join(ROOT, f))]
    fresh = not os.path.isdir(TREE)
    os.makedirs(TREE, exist_ok=True)
    for f in files:
        src, dst = os.path.join(ROOT, f), os.path.join(TREE, f)
        if os.path.islink(src):
            continue
        if os.path.exists(dst):
            with open(src, "rb") as a, open(dst, "rb") as b:
                if a.read() == b.read():
                    continue
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        if os.path.exists(dst):
            # changed since the last run, or left mutated by a run that was
            # stopped: a fresh time, so what was built from the old text
            # (perhaps a mutant) is built again
            shutil.copy(src, dst)
        else:
            shutil.copy2(src, dst)
    # files gone from the tree (removed or moved since the last run) go from the copy too
    keep = set(files)
    removed = 0
    for dirpath, dirnames, filenames in os.walk(TREE):
        rel = os.path.relpath(dirpath, TREE)
        if rel == "build" or rel.startswith("build" + os.sep) or "node_modules" in rel.split(os.sep):
            dirnames[:] = []
            continue
        dirnames[:] = [d for d in dirnames if not (rel == "." and d == "build") and d != "node_modules"]
        for fn in filenames:
            f = os.path.normpath(os.path.join(rel, fn))
            if f not in keep:
                os.remove(os.path.join(TREE, f))
                removed += 1
    if removed:  # the archive keeps members of removed sources until it is made again
        for lib in ("build/libplumb.a",):
            if os.path.exists(os.path.join(TREE, lib)):
                os.remove(os.path.join(TREE, lib))
    # the browser test's node packages (ignored, installed by scripts/deps.sh): shared, not copied
    nm_src, nm_dst = os.path.join(ROOT, "tests/browser/node_modules"), os.path.join(TREE, "tests/browser/node_modules")
    if os.path.isdir(nm_src) and not os.path.lexists(nm_dst):
        os.symlink(nm_src, nm_dst)
    if fresh and os.path.isdir(os.path.join(ROOT, "build")):
        shutil.copytree(os.path.join(ROOT, "build"), os.path.join(TREE, "build"), symlinks=True, dirs_exist_ok=True)
    # the linked outputs are linked again: a link stopped part way (a run
    # killed) leaves a newer but broken file that make takes as up to date
    for out in ["build/plumb", "build/plumb-tests"] + fake_libs():
        if os.path.lexists(os.path.join(TREE, out)):
            os.remove(os.path.join(TREE, out))


def fake_libs():
    return ["build/tests/libfake_%s.so" % f[5:-2] for f in os.listdir(os.path.join(TREE, "tests"))
            if f.startswith("fake_") and f.endswith(".c")]


def build():
    r = subprocess.run(["make", "-s", "-j2", "BUILD=build", "build/plumb", "build/plumb-tests"] + fake_libs(), cwd=TREE,
                       capture_output=True, text=True)
    return r.returncode == 0, (r.stdout + r.stderr)[-2000:]


def test_env():
    env = dict(os.environ)
    env.update(PLUMB=os.path.join(TREE, "build/plumb"), PLUMB_BUILD=os.path.join(TREE, "build"), PLUMB_ROOT=TREE,
               OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1", OMPI_MCA_btl_vader_single_copy_mechanism="none")
    return env


def run_test(cmd, log):
    t0 = time.monotonic()
    with open(log, "w") as f:
        p = subprocess.Popen(["bash", "-c", cmd], cwd=TREE, env=test_env(), stdout=f, stderr=subprocess.STDOUT,
                             start_new_session=True)
        try:
            rc = p.wait(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)  # the test's whole process group (its own session)
            p.wait()
            rc = "timeout"
    return rc, time.monotonic() - t0


def tail(path, n=8):
    try:
        return "".join(open(path, errors="replace").readlines()[-n:])
    except OSError:
        return ""


def main():
    muts = parse(LIST)
    total = len(muts)
    if os.environ.get("MUTANTS_SAMPLE"):
        k = int(os.environ["MUTANTS_SAMPLE"])
        muts = [m for m in muts if m["sample"]][:k]
    if os.environ.get("MUTANTS_ONLY"):
        muts = [m for m in muts if os.environ["MUTANTS_ONLY"] in m["name"]]
    print("mutants: %d of %d listed in %s; scratch tree %s" % (len(muts), total, os.path.relpath(LIST, ROOT),
                                                               os.path.relpath(TREE, ROOT)), flush=True)
    sync_tree()
    logs = os.path.join(SCRATCH, "logs")
    os.makedirs(logs, exist_ok=True)
    ok, out = build()
    if not ok:
        print("mutants: the unmutated scratch tree does not build:\n" + out)
        return 1
    # every distinct test passes without a mutation, or it proves nothing
    bad_base = set()
    for i, cmd in enumerate(dict.fromkeys(m["test"] for m in muts)):
        rc, dt = run_test(cmd, os.path.join(logs, "baseline-%d.log" % i))
        print("%-9s %s (%.0f s)" % ("baseline" if rc == 0 else "BASELINE", cmd, dt), flush=True)
        if rc != 0:
            bad_base.add(cmd)
            print(tail(os.path.join(logs, "baseline-%d.log" % i)))
    caught = survived = errors = 0
    t_all = time.monotonic()
    for i, m in enumerate(muts):
        tag = "%s (%s)" % (m["name"], m["file"])
        if m["test"] in bad_base:
            errors += 1
            print("ERROR    %s: its test fails without the mutation" % tag, flush=True)
            continue
        path = os.path.join(TREE, m["file"])
        try:
            orig = open(path, encoding="utf-8").read()
        except OSError as ex:
            errors += 1
            print("ERROR    %s: %s" % (tag, ex), flush=True)
            continue
        n = orig.count(m["find"])
        if n != 1:
            errors += 1
            print("ERROR    %s: the text is found %d times (expected exactly once): %r" % (tag, n, m["find"][:80]),
                  flush=True)
            continue
        with open(path, "w", encoding="utf-8") as f:
            f.write(orig.replace(m["find"], m["repl"]))
        try:
            ok, out = build()
            if not ok:
                errors += 1
                print("ERROR    %s: does not build:\n%s" % (tag, out), flush=True)
                continue
            log = os.path.join(logs, "mutant-%02d.log" % i)
            rc, dt = run_test(m["test"], log)
        finally:
            with open(path, "w", encoding="utf-8") as f:
                f.write(orig)
        if rc == 0:
            survived += 1
            print("SURVIVED %s: `%s` passed with the mutation (%.0f s)" % (tag, m["test"], dt), flush=True)
        else:
            caught += 1
            how = "timed out" if rc == "timeout" else "exit %s" % rc
            print("caught   %s: `%s` %s (%.0f s)" % (tag, m["test"], how, dt), flush=True)
    ok, out = build()  # leave the scratch build matching the tree
    print("mutants: %d run, %d caught, %d survived, %d errors (%.0f s)" % (len(muts), caught, survived, errors,
                                                                         time.monotonic() - t_all))
    return 0 if survived == 0 and errors == 0 and caught == len(muts) else 1


if __name__ == "__main__":
    sys.exit(main())
