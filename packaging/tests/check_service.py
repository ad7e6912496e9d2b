#!/usr/bin/env python3
"""rnicd@.service as far as this machine allows (systemd is not PID 1 in CI):
 1. `systemd-analyze verify` of the unit (its ExecStart pointed at the build's rnicd, man pages
    not looked up): no error, no warning;
 2. the daemon started from a configuration file by the unit's own ExecStart line (read from the
    unit file, %i the instance, /etc/rnic the test's directory), inside a namespace test bed,
    with only the capabilities of the unit's CapabilityBoundingSet and NoNewPrivileges, its
    stderr a stand-in for the journal (JOURNAL_STREAM): Debian's ibv_rc_pingpong through rnic-run
    between it and a second rnicd; SIGTERM stops it with status 0 and a complete capture, and
    its log lines carry syslog priorities;
 3. the same line with a bad configuration: exit 2 naming the file and line; without each of
    CAP_NET_RAW, CAP_NET_ADMIN, CAP_IPC_LOCK it cannot open its port; without CAP_SYS_NICE it
    runs without SCHED_FIFO.
Usage: check_service.py UNIT TESTBED RNICD RNIC_RUN RNIC_PCAP [--installed]
(--installed: the unit and binaries are the installed package's, verified as installed.)"""
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time

unit_path, testbed, rnicd, rnic_run, rnic_pcap = map(os.path.abspath, sys.argv[1:6])
installed = "--installed" in sys.argv[6:]
env = dict(os.environ, RNIC_TESTBED=os.environ.get("RNIC_TESTBED", "pk"),
           RNIC_TESTBED_DIR=os.environ.get("RNIC_TESTBED_DIR", "/tmp/pk"),
           RNIC_TESTBED_NET=os.environ.get("RNIC_TESTBED_NET", "10.86.0"))
state = env["RNIC_TESTBED_DIR"]
failures = []
checks = 0


def check(ok, what):
    global checks
    checks += 1
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        failures.append(what)
    return ok


def run(cmd, timeout=60, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=kw.pop("env", env), **kw)


def unit_values(path):
    """Key -> list of values of the unit file's [Service] section (continuation lines joined)."""
    values, section = {}, None
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line[0] in "#;":
                continue
            if line.startswith("["):
                section = line
                continue
            key, _, value = line.partition("=")
            values.setdefault((section, key.strip()), []).append(value.strip())
    return values


if os.geteuid() != 0:
    print("skipped: needs root (namespaces)")
    sys.exit(77)

unit = unit_values(unit_path)
exec_start = unit[("[Service]", "ExecStart")][-1]
caps = unit[("[Service]", "CapabilityBoundingSet")][-1].split()
check(exec_start.startswith("/usr/bin/rnicd --config /etc/rnic/%i.conf"), f"ExecStart is rnicd --config: {exec_start}")

# 1. systemd-analyze verify.
analyze = shutil.which("systemd-analyze")
if check(analyze is not None, "systemd-analyze is installed (tools/setup.sh installs systemd)"):
    if installed:
        r = run([analyze, "verify", "rnicd@pk.service"])
    else:
        tmp = os.path.join(state + "-unit")
        os.makedirs(tmp, exist_ok=True)
        with open(unit_path) as f:
            text = f.read().replace("/usr/bin/rnicd", rnicd)
        with open(os.path.join(tmp, "rnicd@.service"), "w") as f:
            f.write(text)
        r = run([analyze, "verify", "--man=no", os.path.join(tmp, "rnicd@pk.service")])
    out = (r.stdout + r.stderr).strip()
    check(r.returncode == 0 and not out, f"systemd-analyze verify: no error, no warning ({out or 'clean'})")

# The daemon's command line, from the unit.
confdir = os.path.join(state + "-etc")
os.makedirs(confdir, exist_ok=True)


def command_for(instance):
    words = shlex.split(exec_start.replace("%i", instance))
    words[0] = rnicd
    return [w.replace("/etc/rnic/", confdir + "/") if w.startswith("/etc/rnic/") else w for w in words]


def setpriv(bounding):
    spec = ",".join(["-all"] + ["+" + c.lower().removeprefix("cap_") for c in bounding])
    prefix = ["setpriv", f"--bounding-set={spec}", "--inh-caps=-all"]
    if unit.get(("[Service]", "NoNewPrivileges"), ["no"])[-1] == "yes":
        prefix.append("--no-new-privs")
    return prefix + ["--"]


daemon = None
server = None
try:
    r = run([testbed, "up", "--daemons", "both", "--one-run-dir", "--rnicd", rnicd], timeout=90)
    if not check(r.returncode == 0, "test bed up (two rnicd)"):
        print(r.stdout, r.stderr)
        raise SystemExit
    bed = dict(kv.split("=", 1) for line in open(os.path.join(state, "env")) for kv in line.split())
    # Replace the bed's rnicd on A by one started from the unit's line.
    pid = int(open(os.path.join(state, "rnicd-a.pid")).read())
    os.kill(pid, signal.SIGTERM)
    for _ in range(100):
        if not os.path.exists(f"/proc/{pid}"):
            break
        time.sleep(0.1)
    os.unlink(os.path.join(state, "rnicd-a.pid"))
    capture = os.path.join(state, "service.pcap")
    conf = os.path.join(confdir, "pk.conf")
    with open(conf, "w") as f:
        f.write(f"# rnicd@pk, as /etc/rnic/pk.conf would be\niface = {bed['if_a']}\nip = {bed['ip_a']}/24\n"
                f"name = rnic0\nrun-dir = {bed['run_dir']}\npcap = {capture}\nlog-level = info\n")
    log_path = os.path.join(state, "service.log")
    log = open(log_path, "w")
    st = os.fstat(log.fileno())
    # systemd hands a service's stderr to the journal and says so in JOURNAL_STREAM.
    denv = dict(env, JOURNAL_STREAM=f"{st.st_dev}:{st.st_ino}")
    cmd = ["ip", "netns", "exec", bed["ns_a"]] + setpriv(caps) + command_for("pk")
    print("starting:", " ".join(cmd), flush=True)
    daemon = subprocess.Popen(cmd, stdout=log, stderr=log, env=denv)
    sock = os.path.join(bed["run_dir"], "rnic0.sock")
    for _ in range(100):
        if os.path.exists(sock) or daemon.poll() is not None:
            break
        time.sleep(0.1)
    if not check(os.path.exists(sock), "the unit's ExecStart brought rnic0 up from the configuration file"):
        log.flush()
        print(open(log_path).read())
        raise SystemExit

    # Debian's ibv_rc_pingpong through rnic-run: server on the service's rnic0, client on rnic1.
    def pingpong(*extra):
        return ["ip", "netns", "exec", bed["ns_a"], rnic_run, "--run-dir", bed["run_dir"], "timeout", "60",
                "ibv_rc_pingpong", "-g", "0", "-p", "18555", "-s", "4096", "-n", "20", "-c", *extra]
    server = subprocess.Popen(pingpong("-d", "rnic0"), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, env=env)
    for _ in range(100):
        if ":18555" in run(["ip", "netns", "exec", bed["ns_a"], "ss", "-Hltn"]).stdout or server.poll() is not None:
            break
        time.sleep(0.1)
    client = run(pingpong("-d", "rnic1", "127.0.0.1"), timeout=90)
    server_out = server.communicate(timeout=60)[0]
    check(client.returncode == 0 and server.returncode == 0 and "iters" in client.stdout + client.stderr,
          f"ibv_rc_pingpong between the service's rnic0 and rnic1 (client {client.returncode}, "
          f"server {server.returncode})")
    if client.returncode or server.returncode:
        print(client.stdout, client.stderr, server_out)
    server = None

    if installed:
        # rnic-enable-global on a private overlay of /etc (the host's loader cache never changes):
        # Debian's ibv_devices, without rnic-run, then loads /usr/lib/rnic's libibverbs and sees
        # both devices; `off` gives it Debian's library back.
        ov = state + "-overlay"
        os.makedirs(ov + "/u", exist_ok=True)
        os.makedirs(ov + "/w", exist_ok=True)
        script = (f"mount --make-rprivate / && mount -t overlay overlay -o lowerdir=/etc,upperdir={ov}/u,"
                  f"workdir={ov}/w /etc && rnic-enable-global on >/dev/null && "
                  "ldd /usr/bin/ibv_devices | grep libibverbs.so.1 && "
                  f"RNIC_RUN_DIR={bed['run_dir']} ibv_devices && rnic-enable-global off >/dev/null && "
                  "ldd /usr/bin/ibv_devices | grep libibverbs.so.1")
        r = run(["ip", "netns", "exec", bed["ns_a"], "unshare", "-m", "sh", "-c", script], timeout=60)
        out = r.stdout.splitlines()
        check(r.returncode == 0 and "/usr/lib/rnic/libibverbs.so.1" in out[0] and
              any("rnic0" in l for l in out) and any("rnic1" in l for l in out) and
              "/usr/lib/rnic" not in out[-1],
              "rnic-enable-global on: Debian's ibv_devices, without rnic-run, lists rnic0 and rnic1; off: "
              "Debian's libibverbs again")
        if r.returncode:
            print(r.stdout, r.stderr)
        shutil.rmtree(ov, ignore_errors=True)
        check(not os.path.lexists("/etc/ld.so.conf.d/00-rnic.conf"), "the host's own /etc was never changed")

    # systemctl stop: SIGTERM. Status 0 and the capture flushed whole.
    daemon.send_signal(signal.SIGTERM)
    try:
        rc = daemon.wait(timeout=15)
    except subprocess.TimeoutExpired:
        rc = None
    daemon = None
    log.close()
    text = open(log_path).read()
    check(rc == 0, f"SIGTERM: rnicd exits with status 0 (got {rc})")
    lines = [l for l in text.splitlines() if l.strip()]
    check(lines and all(l[:3] in ("<2>", "<3>", "<4>", "<6>", "<7>") for l in lines if l.startswith("<")) and
          any(l.startswith("<6>rnicd up: rnic0") for l in lines),
          "the journal sees syslog priorities (<6>rnicd up: ...) and no time stamps of ours")
    check("SCHED_FIFO refused" not in text and "refused" not in text,
          "the bounding set's capabilities suffice (no SCHED_FIFO or other refusal in the log)")
    frames = None
    for l in lines:
        if "(rnic0 capture: " in l:
            frames = int(l.split("(rnic0 capture: ")[1].split()[0])
    r = run([rnic_pcap, "--json", capture])
    counted = json.loads(r.stdout)["files"][0] if r.stdout.startswith("{") else {}
    check(r.returncode == 0 and frames and counted.get("rocev2") == frames and counted.get("icrc_ok") == frames,
          f"the capture is complete after SIGTERM: the log says {frames} frames, rnic-pcap reads "
          f"{counted.get('rocev2')} RoCEv2 frames, {counted.get('icrc_ok')} with a good ICRC")
    if not failures:
        pass
    else:
        print(text)

    # A bad configuration: exit 2, the file and line named, no restart loop (RestartPreventExitStatus=2).
    with open(os.path.join(confdir, "pkbad.conf"), "w") as f:
        f.write(f"iface = {bed['if_a']}\nip = {bed['ip_a']}/24\nspin-us = forever\n")
    r = run(["ip", "netns", "exec", bed["ns_a"]] + setpriv(caps) + command_for("pkbad"), timeout=30)
    check(r.returncode == 2 and os.path.join(confdir, "pkbad.conf") + ":3: --spin-us wants" in r.stderr,
          f"a bad configuration: exit 2 naming file and line ({r.stderr.splitlines()[0] if r.stderr else ''})")
    prevent = unit.get(("[Service]", "RestartPreventExitStatus"), [""])[-1].split()
    check("2" in prevent, "the unit does not restart on a usage error (RestartPreventExitStatus=2)")

    # Each start-up capability is needed, not decoration: without it the port does not open
    # (status 1), and without CAP_SYS_NICE --sched fifo falls back with a warning.
    for cap in ("CAP_NET_RAW", "CAP_NET_ADMIN", "CAP_IPC_LOCK", "CAP_SYS_NICE"):
        r = run(["ip", "netns", "exec", bed["ns_a"], "timeout", "5"] + setpriv([c for c in caps if c != cap]) +
                command_for("pk"), timeout=30)
        if cap == "CAP_SYS_NICE":
            check(r.returncode == 124 and "SCHED_FIFO refused" in r.stderr,
                  f"without {cap}: rnicd runs, SCHED_FIFO refused (status {r.returncode})")
        else:
            check(cap in caps and r.returncode == 1, f"without {cap} rnicd cannot start its port (status {r.returncode})")
finally:
    for p in (server, daemon):
        if p is not None and p.poll() is None:
            p.kill()
            p.wait()
    run([testbed, "down"], timeout=60)
    shutil.rmtree(confdir, ignore_errors=True)
    shutil.rmtree(state + "-unit", ignore_errors=True)

print(f"{checks} checks; " + ("FAILED: " + "; ".join(failures) if failures else "the service works"))
sys.exit(1 if failures else 0)
