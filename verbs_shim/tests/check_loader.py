#!/usr/bin/python3
"""Checks that Debian's unmodified rdma binaries load against the drop-in directory.

For every ELF program of the packages below it runs `ldd -r` with LD_LIBRARY_PATH set to
the drop-in directory (verbs_shim/lib of the build tree) and requires that
  * every library the program needs that the directory provides resolves to the directory
    (libmlx5.so.1, libefa.so.1, librdmacm.so.1 today; libibverbs.so.1 once the shim exists),
  * the loader reports no "undefined symbol" and no "version `X' not found" line at all,
    i.e. every symbol and version node the program imports is there.
Then it runs each perftest benchmark with --help and requires its usage text, which
proves the loader is satisfied for real (ldd only traces). Last, every drop-in (libibverbs.so.1,
libmlx5.so.1, libefa.so.1, librdmacm.so.1) must export exactly what Debian's library of that
name does: the same defined dynamic symbols at the same versions, default (@@) or not (@)
(`nm -D --defined-only --with-symbol-versions`), and the same version nodes with the same
parents, so a BIND_NOW program, a Python extension (dlopen binds everything) or an rdma-core
provider library finds each symbol it names. The consumers' side of the same: every rdma-core
provider of ibverbs-providers (libmlx5-rdmav34.so, librxe-rdmav34.so, ... which import ~60
IBVERBS_PRIVATE_34 symbols) is dlopened with LD_BIND_NOW=1 against the directory, binding all
its imports at once, and must load with our libibverbs.so.1 under it.

Exit 0 pass, 1 failure (each reason printed), 77 skip (packages not installed)."""
import argparse
import os
import re
import subprocess
import sys

PACKAGES = ("perftest", "ibverbs-utils", "rdmacm-utils")
PERFTEST_HELP = ("ib_write_bw", "ib_send_lat", "ib_atomic_bw", "ib_read_bw", "ib_send_bw",
                 "ib_write_lat", "ib_read_lat", "ib_atomic_lat")
# Drop-ins whose export list is rdma-core's own, symbol for symbol: all of them.
EXACT_EXPORTS = ("libibverbs.so.1", "libmlx5.so.1", "libefa.so.1", "librdmacm.so.1")
SYSTEM_LIB_DIR = "/usr/lib/x86_64-linux-gnu"
PROVIDER_DIR = SYSTEM_LIB_DIR + "/libibverbs"
# dlopens one library with every symbol bound now and names the libibverbs.so.1 it got.
DLOPEN_NOW = ("import ctypes, sys; ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_GLOBAL); "
              "print(sorted({l.split()[-1] for l in open('/proc/self/maps') if 'libibverbs.so' in l}))")
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


def defined_symbols(lib):
    out = subprocess.run(["nm", "-D", "--defined-only", "--with-symbol-versions", lib],
                         capture_output=True, text=True, check=True)
    return {line.split()[-1] for line in out.stdout.splitlines() if line.strip()}


def version_definitions(lib):
    """[(node, parent or None)] from objdump -p, the file's own name (index 1) left out."""
    out = subprocess.run(["objdump", "-p", lib], capture_output=True, text=True, check=True)
    nodes, inside = [], False
    for line in out.stdout.splitlines():
        if line.startswith("Version definitions:"):
            inside = True
            continue
        if inside:
            if not line.strip() or line.startswith("Version References"):
                break
            fields = line.split()
            if line.startswith("\t") or line.startswith(" "):
                if nodes:
                    nodes[-1] = (nodes[-1][0], fields[0])
            elif len(fields) == 4 and fields[1] != "0x01":
                nodes.append((fields[3], None))
    return nodes


def providers_load(lib_dir, env):
    """rdma-core's provider plugins, each dlopened with LD_BIND_NOW against lib_dir."""
    out = subprocess.run(["dpkg", "-L", "ibverbs-providers"], capture_output=True, text=True)
    if out.returncode != 0:
        return None, []
    plugins = sorted(p for p in out.stdout.split()
                     if p.startswith(PROVIDER_DIR + "/") and p.endswith("-rdmav34.so"))
    problems = []
    if not plugins:
        problems.append(f"ibverbs-providers installs no *-rdmav34.so in {PROVIDER_DIR}")
    ours = os.path.join(lib_dir, "libibverbs.so.1")
    for plugin in plugins:
        res = subprocess.run([sys.executable, "-c", DLOPEN_NOW, plugin], capture_output=True, text=True,
                             env=dict(env, LD_BIND_NOW="1"), timeout=30)
        text = (res.stdout + res.stderr).strip()
        if res.returncode != 0 or text.splitlines()[-1:] != [repr([ours])]:
            last = text.splitlines()[-1] if text else f"exit {res.returncode}"
            problems.append(f"{plugin} with LD_BIND_NOW=1: {last}")
    return len(plugins), problems


def compare_exports(name, ours, theirs):
    problems = []
    mine, debian = defined_symbols(ours), defined_symbols(theirs)
    for sym in sorted(debian - mine):
        problems.append(f"{name}: {sym} missing (Debian's {theirs} defines it)")
    for sym in sorted(mine - debian):
        problems.append(f"{name}: {sym} exported but not by Debian's {theirs}")
    if version_definitions(ours) != version_definitions(theirs):
        problems.append(f"{name}: version nodes {version_definitions(ours)} differ from Debian's "
                        f"{version_definitions(theirs)}")
    return problems, len(debian)


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

    provider_count, problems = providers_load(lib_dir, env)
    if provider_count is None:
        print("SKIP: package ibverbs-providers is not installed (tools/setup.sh installs it)")
        return 77
    failures += problems

    exact = []
    for name in EXACT_EXPORTS:
        theirs = os.path.join(SYSTEM_LIB_DIR, name)
        if name not in ours or not os.path.exists(theirs):
            failures.append(f"{name}: not in {lib_dir}" if name not in ours else
                            f"{theirs}: not installed (its package is in tools/setup.sh)")
            continue
        problems, count = compare_exports(name, os.path.join(lib_dir, name), theirs)
        failures += problems
        exact.append(f"{name} ({count} symbols)")

    for f in failures:
        print("FAIL:", f)
    print(f"{checked} programs linked against {sorted(ours)} checked with ldd -r, "
          f"{len(PERFTEST_HELP)} perftest --help runs, {provider_count} rdma-core providers loaded with "
          f"LD_BIND_NOW, exports identical to Debian's: "
          f"{', '.join(exact) or 'none'}, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
