#!/usr/bin/python3
"""Checks that Debian's unmodified rdma binaries load against the drop-in directory.

For every ELF program of the packages below it runs `ldd -r` with LD_LIBRARY_PATH set to
the drop-in directory (verbs_shim/lib of the build tree) and requires that
  * every library the program needs that the directory provides resolves to the directory
    (libmlx5.so.1, libefa.so.1, librdmacm.so.1 today; libibverbs.so.1 once the shim exists),
  * the loader reports no "undefined symbol" and no "version `X' not found" line at all,
    i.e. every symbol and version node the program imports is there.
Then it runs each perftest benchmark with --help and requires its usage text, which
proves the loader is satisfied for real (ldd only traces).

Exit 0 pass, 1 failure (each reason printed), 77 skip (packages not installed)."""
import argparse
import os
import re
import subprocess
import sys

PACKAGES = ("perftest", "ibverbs-utils", "rdmacm-utils")
PERFTEST_HELP = ("ib_write_bw", "ib_send_lat", "ib_atomic_bw", "ib_read_bw", "ib_send_bw",
                 "ib_write_lat", "ib_read_lat", "ib_atomic_lat")
PROBLEM = re.compile(r"undefined symbol|symbol .* not found|version `[^']*' not found|not found")


def package_programs(pkg):
    out = subprocess.run(["dpkg", "-L", pkg], capture_output=True, text=True)
    if out.returncode != 0:
        return None
    progs = []
    for path in out.stdout.split():
        if path.startswith("/usr/bin/") and os.path.isfile(path):
            with open(path, "rb") as f:
                if f.read(4) == b"\x7fELF":
                    progs.append(path)
    return sorted(progs)


def needed(prog):
    out = subprocess.run(["readelf", "-d", prog], capture_output=True, text=True, check=True)
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lib-dir", required=True, help="the drop-in directory (build/verbs_shim/lib)")
    args = ap.parse_args()
    lib_dir = os.path.realpath(args.lib_dir)
    ours = {n for n in os.listdir(lib_dir) if re.fullmatch(r"lib[\w-]+\.so\.\d+", n)}
    if not ours:
        print(f"FAIL: no drop-in libraries in {lib_dir}")
        return 1
    env = dict(os.environ, LD_LIBRARY_PATH=lib_dir)
    env.pop("LD_PRELOAD", None)

    programs = []
    for pkg in PACKAGES:
        progs = package_programs(pkg)
        if progs is None:
            print(f"SKIP: package {pkg} is not installed (tools/setup.sh installs it)")
            return 77
        programs += progs

    failures = []
    checked = 0
    for prog in programs:
        want = [lib for lib in needed(prog) if lib in ours]
        if not want:
            continue
        checked += 1
        res = subprocess.run(["ldd", "-r", prog], capture_output=True, text=True, env=env)
        text = res.stdout + res.stderr
        for line in text.splitlines():
            if PROBLEM.search(line):
                failures.append(f"{prog}: {line.strip()}")
        for lib in want:
            m = re.search(rf"^\s*{re.escape(lib)} => (\S+)", text, re.M)
            where = os.path.realpath(m.group(1)) if m else None
            if where is None or os.path.dirname(where) != lib_dir:
                failures.append(f"{prog}: {lib} resolves to {where}, not to {lib_dir}")
        if res.returncode != 0 and not failures:
            failures.append(f"{prog}: ldd -r exited {res.returncode}: {text.strip()}")

    for name in PERFTEST_HELP:
        prog = f"/usr/bin/{name}"
        if prog not in programs:
            failures.append(f"{prog}: not installed by perftest")
            continue
        res = subprocess.run([prog, "--help"], capture_output=True, text=True, env=env,
                             timeout=20)
        text = res.stdout + res.stderr
        if "Usage:" not in text or "error while loading shared libraries" in text:
            failures.append(f"{prog} --help: no usage text (exit {res.returncode}): "
                            f"{text.strip()[:300]}")

    for f in failures:
        print("FAIL:", f)
    print(f"{checked} programs linked against {sorted(ours)} checked with ldd -r, "
          f"{len(PERFTEST_HELP)} perftest --help runs, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
