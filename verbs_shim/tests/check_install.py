#!/usr/bin/env python3
"""`cmake --install` and the installed rnic-run, away from the build tree:
 1. installs the build into a fresh temporary prefix and checks the layout: exactly the four
    drop-in libraries in lib/rnic (no development links), rnic-run, rnic-sysfs, rnicd, rnicctl
    and rnic-pcap in bin, an rnic-run that does not name the build tree;
 2. brings up a test bed whose daemon is the *installed* rnicd, and runs Debian's ibv_devices
    and ibv_devinfo -v through the *installed* rnic-run: the device, its GUID and GID 0
    (::ffff:<IPv4>, RoCE v2) must appear, and ldd must resolve every drop-in library a perftest
    binary needs from the prefix;
 3. removes the prefix (and checks it is gone).
Every step is bounded in time. Usage: check_install.py CMAKE BUILD_DIR TESTBED"""
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile

cmake, build_dir, testbed = sys.argv[1:4]
name = f"rnicin{os.getpid() % 10000}"
state = f"/tmp/{name}"
bed_env = dict(os.environ, RNIC_TESTBED=name, RNIC_TESTBED_DIR=state, RNIC_TESTBED_NET="10.86.0")
failures = []
checks = 0

DROPINS = ["libibverbs.so.1", "libmlx5.so.1", "libefa.so.1", "librdmacm.so.1"]
PROGRAMS = ["rnic-run", "rnic-sysfs", "rnicd", "rnicctl", "rnic-pcap"]


def check(ok, what):
    global checks
    checks += 1
    print(f"{'ok  ' if ok else 'FAIL'} {what}", flush=True)
    if not ok:
        failures.append(what)
    return ok


def run(args, timeout=60, env=None):
    print("$ " + " ".join(args), flush=True)
    r = subprocess.run(args, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL,
                       env=env if env is not None else os.environ)
    return r


def soname(path):
    r = run(["readelf", "-d", path], timeout=30)
    m = re.search(r"\(SONAME\)\s+Library soname: \[([^\]]+)\]", r.stdout)
    return m.group(1) if m else None


class Stop(Exception):
    """A step the later ones depend on failed (already counted)."""


prefix = tempfile.mkdtemp(prefix="rnic-install-")
try:
    # DESTDIR from the caller's environment would put the files somewhere else.
    install_env = {k: v for k, v in os.environ.items() if k != "DESTDIR"}
    r = run([cmake, "--install", build_dir, "--prefix", prefix], timeout=120, env=install_env)
    if not check(r.returncode == 0, f"cmake --install --prefix {prefix}"):
        print((r.stdout + r.stderr)[-3000:], flush=True)
        raise Stop

    libdir = os.path.join(prefix, "lib", "rnic")
    present = sorted(os.listdir(libdir)) if os.path.isdir(libdir) else []
    # Only the names the loader asks for: a libibverbs.so link would let a build link against
    # the drop-in instead of rdma-core's library.
    check(present == sorted(DROPINS), f"lib/rnic holds exactly {sorted(DROPINS)} (found {present})")
    for lib in DROPINS:
        path = os.path.join(libdir, lib)
        if os.path.isfile(path):
            check(soname(path) == lib, f"lib/rnic/{lib} has SONAME {lib}")
    for program in PROGRAMS:
        path = os.path.join(prefix, "bin", program)
        mode = os.stat(path).st_mode if os.path.exists(path) else 0
        check(stat.S_ISREG(mode) and os.access(path, os.X_OK), f"bin/{program} is an executable file")
    rnic_run = os.path.join(prefix, "bin", "rnic-run")
    with open(rnic_run) as f:
        check(os.path.realpath(build_dir) not in f.read(), "the installed rnic-run does not name the build tree")

    # The loader, through the installed rnic-run, finds every drop-in in the prefix.
    r = run([rnic_run, "ldd", "/usr/bin/ib_write_bw"], timeout=30)
    for lib in DROPINS:
        check(re.search(rf"^\s*{re.escape(lib)} => {re.escape(os.path.join(libdir, lib))} ", r.stdout, re.M)
              is not None, f"ldd ib_write_bw under the installed rnic-run: {lib} from lib/rnic")

    # Through a symlink elsewhere (/usr/local/bin/rnic-run -> <prefix>/bin/rnic-run), rnic-run still
    # finds the libraries next to its real location.
    link = os.path.join(prefix, "elsewhere", "rnic-run")
    os.makedirs(os.path.dirname(link))
    os.symlink(rnic_run, link)
    r = run([link, "ldd", "/usr/bin/ib_write_bw"], timeout=30)
    check(re.search(rf"^\s*libibverbs\.so\.1 => {re.escape(os.path.join(libdir, 'libibverbs.so.1'))} ", r.stdout, re.M)
          is not None, "rnic-run through a symlink in another directory: libibverbs.so.1 from lib/rnic")

    # The installed daemon on a test bed, the installed rnic-run in front of Debian's tools.
    r = run([testbed, "up", "--daemons", "a", "--rnicd", os.path.join(prefix, "bin", "rnicd")], timeout=60,
            env=bed_env)
    if not check(r.returncode == 0, "test bed up with the installed rnicd"):
        print((r.stdout + r.stderr)[-3000:], flush=True)
        raise Stop
    with open(f"{state}/env") as f:
        bed = dict(kv.split("=", 1) for kv in f.read().split())
    run_dir = f"{state}/run-a"

    r = run([rnic_run, "--run-dir", run_dir, "ibv_devices"], timeout=30)
    m = re.search(r"^\s+rnic0\s+([0-9a-f]{16})$", r.stdout, re.M)
    if not check(r.returncode == 0 and m is not None, "ibv_devices lists rnic0 and its GUID"):
        print((r.stdout + r.stderr)[-2000:], flush=True)
    guid = m.group(1) if m else None

    r = run([rnic_run, "--run-dir", run_dir, "ibv_devinfo", "-v", "-d", "rnic0"], timeout=30)
    out = r.stdout
    ok = check(r.returncode == 0 and re.search(r"^hca_id:\s+rnic0$", out, re.M) is not None,
               "ibv_devinfo -v -d rnic0 answers for rnic0")
    ok &= check(re.search(rf"GID\[\s*0\]:\s+::ffff:{re.escape(bed['ip_a'])}, RoCE v2$", out, re.M) is not None,
                f"ibv_devinfo: GID[0] ::ffff:{bed['ip_a']}, RoCE v2")
    node_guid = re.search(r"node_guid:\s+([0-9a-f:]+)", out)
    ok &= check(guid is not None and node_guid is not None and node_guid.group(1).replace(":", "") == guid,
                "ibv_devinfo's node_guid is the GUID ibv_devices printed")
    if not ok:
        print((out + r.stderr)[-3000:], flush=True)
except Stop:
    pass
except Exception as e:  # a step that times out or a bed that does not come up is a failure, with its reason
    failures.append(repr(e))
finally:
    subprocess.run([testbed, "down"], env=bed_env, capture_output=True, timeout=60)
    shutil.rmtree(prefix, ignore_errors=True)
    check(not os.path.exists(prefix), f"temporary prefix {prefix} removed")
    if not failures:  # the bed's daemon log stays for a failed run
        shutil.rmtree(state, ignore_errors=True)

print(f"{checks} checks; " + ("FAILED: " + "; ".join(failures) if failures else "the installed tree works"))
sys.exit(1 if failures else 0)
