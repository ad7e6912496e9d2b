#!/usr/bin/env python3
"""The Debian package, end to end on this machine (docs/packaging.md):
 1. tools/build-deb.sh builds it;
 2. `dpkg-deb -c`: every program, the four drop-in libraries in /usr/lib/rnic (nothing beside
    Debian's libibverbs), the unit, the example configuration (a conffile), man pages, docs,
    the Wireshark plugin when the tree has one; `dpkg-deb -f`: the runtime dependencies
    dpkg-shlibdeps found, and not Debian's libibverbs1;
 3. lintian: no error, and only the warnings docs/packaging.md explains (LINTIAN_EXPLAINED);
 4. `apt-get install ./rnic_*.deb` into this system; the installed unit and binaries run the
    service test (check_service.py --installed, which also tries rnic-enable-global in a private
    mount namespace over an overlay of /etc, so the host's loader is never changed);
 5. `apt-get purge`: every file `dpkg -L` listed is gone, and so are /etc/rnic, /var/log/rnic and
    the loader snippet; Debian's libibverbs1 is unchanged throughout (dpkg --verify).
The package is purged again however the test ends.
Usage: check_deb.py SOURCE_DIR DEB_BUILD_DIR TESTBED"""
import hashlib
import glob
import os
import subprocess
import sys

source, deb_dir, testbed = map(os.path.abspath, sys.argv[1:4])
here = os.path.dirname(os.path.abspath(__file__))
failures = []
checks = 0
# lintian's warnings docs/packaging.md ("lintian") explains; any other warning, or an error, fails.
LINTIAN_EXPLAINED = {
    "maintainer-script-calls-systemctl",  # no debhelper: postinst/prerm/postrm call systemctl themselves
    "maintscript-calls-ldconfig",         # postrm reruns ldconfig after removing the opt-in's link
}

def check(ok, what):
    global checks
    checks += 1
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        failures.append(what)
    return ok


def run(cmd, timeout=120, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


if os.geteuid() != 0:
    print("skipped: needs root (installs the package)")
    sys.exit(77)

APT = ["apt-get", "-y", "-q", "-o", "DPkg::Lock::Timeout=300"]
env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")


def purge():
    if run(["dpkg-query", "-W", "-f=${Status}", "rnic"]).stdout.startswith("install ok"):
        return run(APT + ["purge", "rnic"], timeout=300, env=env)
    return None


# Debian's own libibverbs, which the package must never touch.
debian_verbs = sorted(glob.glob("/usr/lib/x86_64-linux-gnu/libibverbs.so*"))
debian_verbs_sha = {p: sha(p) for p in debian_verbs if os.path.isfile(p)}

r = run([os.path.join(source, "tools", "build-deb.sh"), deb_dir], timeout=3000)
debs = sorted(glob.glob(os.path.join(deb_dir, "rnic_*.deb")))
if not check(r.returncode == 0 and len(debs) == 1, f"tools/build-deb.sh wrote one package ({debs})"):
    print(r.stdout[-3000:], r.stderr[-3000:])
    sys.exit(1)
deb = debs[0]

# 2. Contents and dependencies.
listing = run(["dpkg-deb", "-c", deb]).stdout
paths = {line.split()[5].removeprefix(".") for line in listing.splitlines()}
expected = ["/usr/bin/rnicd", "/usr/bin/rnicctl", "/usr/bin/rnic-pcap", "/usr/bin/rnic-sysfs", "/usr/bin/rnic-run",
            "/usr/sbin/rnic-enable-global", "/usr/lib/rnic/libibverbs.so.1", "/usr/lib/rnic/librdmacm.so.1",
            "/usr/lib/rnic/libmlx5.so.1", "/usr/lib/rnic/libefa.so.1", "/lib/systemd/system/rnicd@.service",
            "/etc/rnic/example.conf", "/usr/share/rnic/00-rnic.conf", "/usr/share/man/man8/rnicd.8.gz",
            "/usr/share/man/man1/rnicctl.1.gz", "/usr/share/man/man1/rnic-pcap.1.gz",
            "/usr/share/man/man1/rnic-run.1.gz", "/usr/share/man/man1/rnic-sysfs.1.gz",
            "/usr/share/man/man8/rnic-enable-global.8.gz", "/usr/share/doc/rnic/copyright",
            "/usr/share/doc/rnic/changelog.gz", "/usr/share/doc/rnic/packaging.md",
            "/usr/share/doc/rnic/examples/example.conf"]
expected += ["/usr/lib/x86_64-linux-gnu/wireshark/plugins/" + os.path.basename(p)
             for p in glob.glob(os.path.join(source, "tools", "wireshark", "*.lua"))]
missing = [p for p in expected if p not in paths]
check(not missing, f"dpkg-deb -c: {len(expected)} expected files present (missing: {missing})")
libs = sorted(p for p in paths if p.startswith("/usr/lib/rnic/") and not p.endswith("/"))
check(libs == sorted(p for p in expected if p.startswith("/usr/lib/rnic/")),
      f"/usr/lib/rnic holds exactly the four drop-ins, no development links ({libs})")
check(not any("libibverbs" in p for p in paths if not p.startswith("/usr/lib/rnic/")),
      "nothing named libibverbs outside /usr/lib/rnic (Debian's stays Debian's)")
stray = [p for p in paths if not p.startswith(("/usr/", "/etc/rnic", "/lib/systemd/system/", "/etc/", "/lib/"))]
check(not stray, f"no file outside /usr, /etc/rnic, /lib/systemd ({stray})")
control = run(["dpkg-deb", "-f", deb, "Depends"]).stdout
depends = [d.strip().split()[0] for d in control.split(",") if d.strip()]
check(all(d in depends for d in ("libc6", "libstdc++6", "libpcap0.8", "librte-net-af-packet23")) and
      any(d.startswith("librte-") and d != "librte-net-af-packet23" for d in depends) and
      "libibverbs1" not in depends,
      f"Depends from dpkg-shlibdeps plus DPDK's af_packet plugin, not libibverbs1: {control.strip()}")
r = run(["sh", "-c", f"dpkg-deb --ctrl-tarfile {deb} | tar -xO ./conffiles"])
check(r.stdout.split() == ["/etc/rnic/example.conf"], f"conffiles: {r.stdout.split()}")

# 3. lintian.
r = run(["lintian", "--no-tag-display-limit", "--display-info", deb], timeout=600)
tags = [line for line in r.stdout.splitlines() if line[:2] in ("E:", "W:", "I:")]
for t in tags:
    print("  lintian:", t)
errors = [t for t in tags if t.startswith("E:")]
warnings = [t for t in tags if t.startswith("W:")]
unexplained = [t for t in warnings if t.split()[2] not in LINTIAN_EXPLAINED]
check(r.returncode in (0, 1) and tags is not None, f"lintian ran (status {r.returncode})")
check(not errors, f"lintian: no error ({errors})")
check(not unexplained, f"lintian: every warning explained in docs/packaging.md ({unexplained})")

# 4. Install, the service from the installed files, 5. purge.
before_dirs = set()
installed_files = []
try:
    if purge() is not None:
        print("note: an earlier rnic package was installed; purged it first")
    r = run(APT + ["install", "--no-install-recommends", deb], timeout=600, env=env)
    if not check(r.returncode == 0, "apt-get install ./rnic_*.deb"):
        print(r.stdout[-2000:], r.stderr[-2000:])
        raise SystemExit
    newly = [line for line in r.stdout.splitlines() if line.startswith("Setting up ")]
    check(all(" rnic " in line for line in newly), f"nothing else to install on this machine ({newly})")
    installed_files = run(["dpkg", "-L", "rnic"]).stdout.split()
    check(all(os.path.lexists(p) for p in installed_files), f"dpkg -L rnic: {len(installed_files)} paths, all present")
    r = run(["/usr/bin/rnicd", "--help"])
    man = run(["sh", "-c", "zcat /usr/share/man/man8/rnicd.8.gz"]).stdout
    check(r.returncode == 0 and "--config FILE" in r.stdout and "\\-\\-config FILE" in man,
          "the installed rnicd --help and man rnicd agree (--config)")
    r = run([sys.executable, os.path.join(here, "check_service.py"), "/lib/systemd/system/rnicd@.service", testbed,
             "/usr/bin/rnicd", "/usr/bin/rnic-run", "/usr/bin/rnic-pcap", "--installed"], timeout=600)
    print(r.stdout, r.stderr[-2000:])
    check(r.returncode == 0, "the installed service: check_service.py --installed")
finally:
    r = purge()
    if r is not None:
        check(r.returncode == 0, "apt-get purge rnic")
    left = [p for p in installed_files if os.path.lexists(p) and not os.path.isdir(p)]
    left_dirs = [p for p in installed_files if os.path.isdir(p) and "rnic" in p]
    check(not left and not left_dirs, f"purged: no file of dpkg -L left ({left + left_dirs})")
    for p in ("/etc/rnic", "/var/log/rnic", "/etc/ld.so.conf.d/00-rnic.conf", "/usr/lib/rnic"):
        check(not os.path.lexists(p), f"purged: {p} is gone")
    check({p: sha(p) for p in debian_verbs if os.path.isfile(p)} == debian_verbs_sha and
          run(["dpkg", "--verify", "libibverbs1"]).stdout == "",
          "Debian's libibverbs1 untouched (same files, dpkg --verify clean)")
    r = run(["ldconfig", "-p"])
    check("/usr/lib/rnic" not in r.stdout, "the loader's cache does not name /usr/lib/rnic")

print(f"{checks} checks; " + ("FAILED: " + "; ".join(failures) if failures else "the package works"))
sys.exit(1 if failures else 0)
