#!/usr/bin/env python3
"""rdma_cm between rnicd and Linux Soft-RoCE (rdma_rxe), both directions.

The bed of run_interop.py (interop_bed.py: one qemu VM with rdma_rxe and the kernel's rdma_cm,
one rnicd on a bridge in a private namespace). The VM runs Debian's rdmacm-utils and perftest
over Debian's librdmacm; the host runs the same binaries through rnic-run (our libibverbs and
librdmacm over rnicd). Phases, in order, one VM boot:
  reference  rxe against rxe inside the VM (both ends on rxe0): every tool once, and connects to
             a port nobody listens on, whose event, status and exit status are what the reject
             phase expects of rnicd
  wire       rnicd's CM driven through its control protocol (tests/system/raw_cm_client.py, no
             library) against the VM's tools: REQ/REP/RTU with private data and DREQ/DREP both
             ways, SIDR both ways, a consumer REJ with private data to rxe
  tools      rping (-V, payload pattern checked on both sides), ucmatose, udaddy, rstream (-T v:
             data verified), ib_send_bw -R; each with the VM as server and as client
  reject     connects to a port nobody listens on, both directions: the same event and status as
             rxe reports against rxe, the same exit status
  kill       the VM's program killed (SIGTERM) in mid-connection: our program sees DISCONNECTED
             and ends within a bound, both directions
  loss       2% of the RoCEv2 frames to and from rnicd dropped in the bridge: ucmatose and rping
             both ways; the CM MADs resent by each side counted (capture and rnicd's cm_mads_resent)
Every capture (the bridge's per phase, rnicd's own) must pass rnic-pcap and tshark
(check_tshark_decode.py) with its CM MADs decoded, rnicd's frames must follow rxe's conventions
(interop_frames.py), and each run's MAD exchange is listed from the bridge capture.

Usage: run_interop_cm.py --rnicd PATH --rnic-run PATH --rnic-pcap PATH --rnicctl PATH
                         [--workdir DIR] [--cache DIR] [--phases a,b] [--only REGEX] [--budget S]
                         [--markdown FILE] [--summary-first]
(tools/interop.sh cm fills in the first four from build/.)
Exit 0 all passed, 1 a failure, 77 this machine cannot run the VM."""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "system"))
import cm_captures  # noqa: E402
import interop_bed as bedlib  # noqa: E402
import interop_frames  # noqa: E402

PHASES = ("reference", "wire", "tools", "reject", "kill", "loss")
PERFTEST_OK = r"^\s*\d+\s+\d+\s+[0-9.]+\s+[0-9.]+\s+[0-9.]+"
BAD_WORDS = ("mismatch", "verification failed", "Failed", "failed", "Couldn't", "couldn't", "Unable",
             "error", "ERROR")
UDADDY_PORT = 7174  # udaddy has no port option: rdma_cm's default port
PERFTEST_RACE = r"Event: RDMA_CM_EVENT_REJECTED; error: 8\."  # see the ib_send_bw Tool
# Runs of a program that lost its own race before the test gives up. Three were lost in a row
# once (stop 26's suite, the VM under TCG slow while the rest of the suite ran): each loss costs
# 1-3 s, and a run that fails for any other reason is not repeated.
RACE_ATTEMPTS = 6

# The VM runs the server in the background, says when rdma_cm lists its listening id (so the
# client does not connect too early), then waits for it: the job's status is the program's.
VM_SERVER = """{cmd} &
p=$!
i=0
while [ $i -lt 300 ] && kill -0 $p 2>/dev/null; do
  if rdma res show cm_id 2>/dev/null | grep -Eq "state LISTEN .*src-addr [^ ]*:{port} "; then
    : > {marker}; break
  fi
  sleep 0.1; i=$((i+1))
done
wait $p"""


def rping_payload_problems(text, prefix, count, size):
    """rping -v prints each buffer after the round trip; rping fills it with 'rdma-ping-N: '
    and then ASCII 65..122 cyclically from 65 + N mod 58, NUL last. Checks every line."""
    lines = re.findall(rf"^{prefix}rdma-ping-(\d+): (.*)$", text, re.M)
    problems = []
    if len(lines) != count:
        problems.append(f"{len(lines)} '{prefix}' lines, {count} expected")
    for n, body in lines:
        want_len = size - 1 - len(f"rdma-ping-{n}: ")
        c = 65 + int(n) % 58
        want = []
        for _ in range(want_len):
            want.append(chr(c))
            c = 65 if c == 122 else c + 1
        want = "".join(want)
        if body != want:
            # A program killed on timeout loses what stdio had not flushed: its last line is cut.
            # (The VM's shell may append its "Terminated" to that cut line.)
            seen = body.removesuffix("Terminated")
            cut = (n, body) == lines[-1] and len(seen) < want_len and want.startswith(seen)
            problems.append(f"ping {n}: output cut off after {len(seen)} of {want_len} bytes" if cut else
                            f"ping {n}: payload differs from rping's pattern ({len(body)} of {want_len} bytes)")
            break
    return problems


class Tool:
    """One program run as server on one side and client on the other. Commands are format
    strings: {port}, {bind} (the server side's address), {server} (the address the client
    dials), {dev}."""

    def __init__(self, name, server, client, check, timeout=60, port=None, race=None):
        self.name, self.server, self.client, self.check = name, server, client, check
        self.timeout, self.port = timeout, port
        self.race = race  # output of a known race in the program itself: the run is repeated


def status_is(text, word="return status 0"):
    return [] if word in text else [f"no '{word}'"]


def tools():
    def rping(count, size):
        def check(srv, cli):
            return (rping_payload_problems(cli, "ping data: ", count, size)
                    + rping_payload_problems(srv, "server ping data: ", count, size))
        return Tool(f"rping -S {size} -C {count}", f"rping -s -a {{bind}} -p {{port}} -v -V -S {size} -C {count}",
                    f"rping -c -a {{server}} -p {{port}} -v -V -S {size} -C {count}", check)

    def rstream(size, count, mode):
        def check(srv, cli):
            got = [ln for ln in cli.splitlines() if re.match(r"^custom\s", ln)]
            return [] if got else ["no 'custom' result line from the client"]
        opts = f"-S {size} -C {count} -T {mode} -T v"
        return Tool(f"rstream {opts}", f"rstream -b {{bind}} -p {{port}} {opts}",
                    f"rstream -s {{server}} -p {{port}} {opts}", check)

    def perftest(srv, cli):
        return [] if re.search(PERFTEST_OK, cli, re.M) and re.search(PERFTEST_OK, srv, re.M) else \
            ["no result line on both sides"]

    return [
        rping(20, 64),
        rping(5, 65535),
        Tool("ucmatose -c 10 -C 10", "ucmatose -b {bind} -p {port} -c 10 -C 10",
             "ucmatose -s {server} -p {port} -c 10 -C 10",
             lambda s, c: status_is(s) + status_is(c) + status_is(c, "data transfers complete")),
        Tool("udaddy -c 4 -C 10", "udaddy -b {bind} -c 4 -C 10", "udaddy -s {server} -c 4 -C 10",
             lambda s, c: status_is(s) + status_is(c) + status_is(c, "data transfers complete"), port=UDADDY_PORT),
        rstream(4096, 100, "b"),
        rstream(65536, 20, "n"),
        # perftest -R connects twice on one port: once to exchange parameters, then the data
        # QP, without waiting for the server to listen again. When the VM (TCG) is slower to
        # listen than our client to connect, the REQ gets REJ 8 and perftest 4.5-0.17's retry
        # reuses the ids it just destroyed (a crash; perftest 23.04 reallocates them).
        Tool("ib_send_bw -R -n 50", "ib_send_bw -d {dev} -R -F -n 50 -p {port}",
             "ib_send_bw -d {dev} -R -F -n 50 -p {port} {server}", perftest, timeout=90,
             race=PERFTEST_RACE),
    ]


# A connect to a port nobody listens on: the line each program prints for the event, its exit.
REJECT_PROBES = [
    ("rping", "rping -c -a {server} -p {port} -C 1", r"cma event (RDMA_CM_EVENT_\w+), error (-?\d+)"),
    ("ucmatose", "ucmatose -s {server} -p {port} -c 1", r"event: (RDMA_CM_EVENT_\w+), error: (-?\d+)"),
    ("udaddy", "udaddy -s {server} -c 1", r"event: (RDMA_CM_EVENT_\w+), error: (-?\d+)"),
]


class HostProgram:
    """A program on rnicd's side, through rnic-run, its stdout and stderr in files (a pipe nobody
    reads while the VM side runs would stall rping -v printing 64 KiB lines)."""

    def __init__(self, argv, base):
        self.paths = (base + ".out", base + ".err")
        with open(self.paths[0], "w") as out, open(self.paths[1], "w") as err:
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err)
        self.pid = self.proc.pid

    def poll(self):
        return self.proc.poll()

    def finish(self, timeout):
        """(exit status, stdout then stderr); past `timeout` SIGTERM (which `timeout` passes on
        to the program), then SIGKILL."""
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        text = ""
        for path in self.paths:
            with open(path, errors="replace") as f:
                text += f.read()
        return self.proc.returncode, text


class Runner:
    def __init__(self, a):
        self.a = a
        self.bed = bedlib.Bed(a.workdir, a.rnicd, log=self.say)
        self.port = 20000 + os.getpid() % 12000
        self.results, self.failures, self.failure_details, self.log = [], [], [], []
        self.deadline = time.monotonic() + a.budget
        self.last_counters = {}
        self.races = 0  # runs repeated for a race inside the program under test (Tool.race)
        self.linux_hangs = 0  # loss runs whose only fault was a DREQ Linux never resends
        self.programs = 0  # names the host programs' output files and the VM's stderr files
        os.makedirs(os.path.join(a.workdir, "host"), exist_ok=True)
        self.mads_by_label = {}  # run label -> its exchanges as the bridge saw them
        self.reference = {}  # reject probe name -> (event, status, exit status) rxe gave against rxe
        self.runs = []  # (port, label, wall-clock ns at its start): each run's MADs in the captures

    def say(self, text):
        if self.a.summary_first:
            self.log.append(text)
        else:
            print(text, flush=True)

    def add_run(self, port, label):
        self.runs.append((port, label, time.time_ns()))

    def next_port(self):
        self.port += 1
        return self.port

    # rnicd's CM counters that say something went off the plain path; each run reports how they
    # moved since the run before (runs do not overlap).
    NOTABLE = ("cm_mads_resent", "cm_duplicates", "cm_unmatched_mads", "cm_bad_mads", "cm_send_timeouts",
               "cm_requests_dropped", "cm_outbound_dropped", "gsi_bad", "gsi_unresolved")

    def notable_counters(self):
        if not self.bed.rnicd_proc or self.bed.rnicd_proc.poll() is not None:
            return {}
        now = self.cm_counters()
        moved = {k: now.get(k, 0) - self.last_counters.get(k, 0) for k in self.NOTABLE
                 if now.get(k, 0) != self.last_counters.get(k, 0)}
        self.last_counters = now
        return moved

    def record(self, phase, name, direction, ok, secs, detail, **extra):
        moved = self.notable_counters()
        if moved:
            extra["rnicd_counters"] = moved
            detail += f" [rnicd {', '.join(f'{k} +{v}' for k, v in moved.items())}]"
        detail = "\n".join(ln if len(ln) <= 400 else ln[:200] + f" ...({len(ln)} chars)... " + ln[-100:]
                           for ln in detail.splitlines())
        self.results.append({"phase": phase, "scenario": name, "direction": direction, "ok": ok,
                             "seconds": round(secs, 1), "detail": detail, **extra})
        sid = f"{phase}: {name}" + (f" [{direction}]" if direction else "")
        if ok:
            self.say(f"ok   {sid} ({secs:.1f} s) {detail}")
        else:
            self.failures.append(sid)
            self.failure_details.append(f"FAIL {sid} ({secs:.1f} s)\n{detail}")
            self.say(self.failure_details[-1])

    def selected(self, name):
        return not self.a.only or re.search(self.a.only, name)

    def in_budget(self, phase, name, direction=""):
        """False, with the run recorded as failed, once --budget seconds are spent: the CTest
        timeout must find the bed torn down and the results written."""
        if time.monotonic() < self.deadline:
            return True
        self.record(phase, name, direction, False, 0, f"not run: the time budget of {self.a.budget:.0f} s is spent")
        return False

    # ---- the two sides ---------------------------------------------------------------------
    def host_popen(self, cmd, timeout):
        self.programs += 1
        argv = self.bed.host_cmd(["timeout", "-k", "3", str(timeout), self.a.rnic_run, *cmd.split()])
        return HostProgram(argv, os.path.join(self.a.workdir, "host", f"p{self.programs:04d}"))

    def vm_cmd(self, cmd, timeout):
        """`cmd` for a VM shell, bounded, its stderr after its stdout (one file would interleave
        them inside rping's 64 KiB lines), its exit status kept."""
        self.programs += 1
        err = f"/tmp/stderr.{self.programs}"
        return f"( timeout {timeout} {cmd} 2>{err}; r=$?; cat {err}; rm -f {err}; exit $r )"

    def rnicctl(self, *args):
        r = subprocess.run([self.a.rnicctl, "--run-dir", self.bed.run_dir, "--json", *args], capture_output=True,
                           text=True, timeout=15)
        return json.loads(r.stdout) if r.returncode == 0 and r.stdout.strip() else None

    def host_ids(self):
        return self.rnicctl("cm") or []

    def host_listening(self, port):
        return any(i.get("state") == "LISTEN" and str(i.get("src", "")).endswith(f":{port}") for i in self.host_ids())

    def host_established(self, port):
        return any(i.get("ib_state") == "ESTABLISHED" and (str(i.get("src", "")).endswith(f":{port}")
                                                            or str(i.get("dst", "")).endswith(f":{port}"))
                   for i in self.host_ids())

    def cm_counters(self):
        c = self.rnicctl("stat") or {}
        return {k: v for k, v in c.items() if k.startswith(("cm_", "gsi_"))}

    def vm_cm_counters(self):
        """The kernel CM's counters of rxe0's port (ib_cm's sysfs: cm_tx_msgs, cm_tx_retries,
        cm_rx_msgs, cm_rx_duplicates, each per message), as {"cm_tx_retries/req": n, ...}."""
        rc, out = self.bed.vm_run("cd /sys/class/infiniband/rxe0/ports/1 && for d in cm_tx_msgs cm_tx_retries "
                                  "cm_rx_msgs cm_rx_duplicates; do for f in $d/*; do echo \"$f $(cat $f)\"; done; done",
                                  timeout=20)
        pairs = (ln.split() for ln in out.splitlines())
        return {p[0]: int(p[1]) for p in pairs if len(p) == 2} if rc == 0 else {}

    def vm_server(self, cmd, port, timeout):
        """Starts `cmd` in the VM; returns (job, listening?) once rdma_cm lists it (bounded)."""
        tag = f"listen.{self.bed.jobs + 1}"
        job = self.bed.vm_job(VM_SERVER.format(cmd=self.vm_cmd(cmd, timeout), port=port, marker=f"/host/{tag}"))
        marker = os.path.join(self.bed.jobdir, tag)
        end = time.monotonic() + 30
        while not os.path.exists(marker) and job.rc() is None and time.monotonic() < end:
            time.sleep(0.05)
        return job, os.path.exists(marker)

    def run_pair(self, server_cmd, client_cmd, port, direction, timeout, server_grace=None):
        """Server on one side, client on the other: (server rc, client rc, server out, client out).
        rc None: did not end in time. `server_grace`: how long our server may take to end once the
        VM's client ended well (default: the whole timeout again)."""
        vm_side = {"bind": "$RXE_IP", "server": bedlib.RNIC_IP, "dev": "rxe0", "port": port}
        host_side = {"bind": bedlib.RNIC_IP, "server": bedlib.VM_IP, "dev": "rnic0", "port": port}
        if direction == "vm-server":
            job, up = self.vm_server(server_cmd.format(**vm_side), port, timeout)
            if not up:
                job.kill()
                job.wait(5)
                return job.rc(), None, job.output() + "\n(not listening within 30 s)", ""
            host = self.host_popen(client_cmd.format(**host_side), timeout)
            crc, cout = host.finish(timeout + 10)
            src = job.wait(timeout + 10 if crc == 0 else 5)  # a server whose client failed may wait forever
            if src is None:
                job.kill()
                job.wait(5)
            return src, crc, job.output(), cout
        host = self.host_popen(server_cmd.format(**host_side), timeout)
        end = time.monotonic() + 30
        while host.poll() is None and not self.host_listening(port) and time.monotonic() < end:
            time.sleep(0.1)
        if host.poll() is not None or not self.host_listening(port):
            rc, out = host.finish(0)
            return rc, None, out + "\n(not listening within 30 s)", ""
        job = self.bed.vm_job(self.vm_cmd(client_cmd.format(**vm_side), timeout))
        crc = job.wait(timeout + 10)
        if crc is None:
            job.kill()
            job.wait(5)
        src, sout = host.finish((server_grace or timeout + 10) if crc == 0 else 5)
        return src, crc, sout, job.output()

    # ---- phases ----------------------------------------------------------------------------
    def phase_reference(self):
        """Both ends in the VM over rxe0: the VM side works on its own, and what rxe reports."""
        for t in tools():
            if not self.selected(t.name) or not self.in_budget("reference", t.name, "rxe-rxe"):
                continue
            port = t.port or self.next_port()
            v = {"bind": "$RXE_IP", "server": "$RXE_IP", "dev": "rxe0", "port": port}
            server = VM_SERVER.format(cmd=f"{self.vm_cmd(t.server.format(**v), t.timeout)} > /tmp/server.{port}",
                                      port=port, marker=f"/tmp/listen.{port}")
            script = (f"(\n{server}\necho \"server rc $?\" >> /tmp/server.{port}\n) &\ns=$!\n"
                      f"i=0; while [ ! -e /tmp/listen.{port} ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done\n"
                      f"{self.vm_cmd(t.client.format(**v), t.timeout)}; echo \"client rc $?\"\nwait $s\n"
                      f"echo '--- server'; cat /tmp/server.{port}; rm -f /tmp/server.{port} /tmp/listen.{port}")
            t0 = time.monotonic()
            rc, out = self.bed.vm_run(script, timeout=2 * t.timeout + 20)
            cli, _, srv = out.partition("--- server")
            problems = t.check(srv, cli)
            ok = rc == 0 and "client rc 0" in cli and "server rc 0" in srv and not problems
            self.record("reference", t.name, "rxe-rxe", ok, time.monotonic() - t0,
                        "server and client rc 0, data checked" if ok else f"job rc {rc}, {problems}\n{out[-3000:]}")
        for name, cmd, pattern in REJECT_PROBES:
            if not self.in_budget("reference", f"{name}: no listener", "rxe-rxe"):
                continue
            port = UDADDY_PORT if name == "udaddy" else self.next_port()
            t0 = time.monotonic()
            rc, out = self.bed.vm_run(f"{self.vm_cmd(cmd.format(server='$RXE_IP', port=port), 30)}; echo \"rc $?\"", 45)
            m = re.search(pattern, out)
            code = re.search(r"^rc (\d+)$", out, re.M)
            if m and code:
                self.reference[name] = (m.group(1), int(m.group(2)), int(code.group(1)))
            self.record("reference", f"{name}: no listener", "rxe-rxe", name in self.reference, time.monotonic() - t0,
                        f"{self.reference[name]}" if name in self.reference else out[-1500:])

    def phase_tools(self):
        for t in tools():
            if not self.selected(t.name):
                continue
            for direction in ("vm-server", "vm-client"):
                if not self.in_budget("tools", t.name, direction):
                    continue
                t0 = time.monotonic()
                for attempt in range(1, RACE_ATTEMPTS + 1):
                    port = t.port or self.next_port()
                    self.add_run(port, f"{t.name} [{direction}]" + (f" attempt {attempt}" if attempt > 1 else ""))
                    src, crc, sout, cout = self.run_pair(t.server, t.client, port, direction, t.timeout)
                    problems = t.check(sout, cout)
                    bad = [w for w in BAD_WORDS if w in sout + cout]
                    ok = src == 0 and crc == 0 and not problems and not bad
                    if ok or not t.race or not re.search(t.race, sout + cout):
                        break
                    self.say(f"     {t.name} [{direction}]: the program's own race (attempt {attempt}), again")
                    self.races += 1
                detail = ("server and client rc 0, data checked" + (f" (attempt {attempt})" if attempt > 1 else "")
                          if ok else
                          f"server rc {src}, client rc {crc}, {problems} {bad}\n--- server\n{sout[-2500:]}\n"
                          f"--- client\n{cout[-2500:]}")
                self.record("tools", t.name, direction, ok, time.monotonic() - t0, detail, port=port, attempts=attempt)

    def phase_reject(self):
        for name, cmd, pattern in REJECT_PROBES:
            if not self.selected(name):
                continue
            want = self.reference.get(name)
            for direction in ("vm-server", "vm-client"):
                if not self.in_budget("reject", f"{name}: no listener", direction):
                    continue
                port = UDADDY_PORT if name == "udaddy" else self.next_port()
                self.add_run(port, f"{name}: no listener [{direction}]")
                t0 = time.monotonic()
                if direction == "vm-server":  # our client dials the VM, where nothing listens
                    rc, out = self.host_popen(cmd.format(server=bedlib.VM_IP, port=port), 30).finish(40)
                else:
                    rc, out = self.bed.vm_run(f"{self.vm_cmd(cmd.format(server=bedlib.RNIC_IP, port=port), 30)}; "
                                              "echo \"rc $?\"", 45)
                    code = re.search(r"^rc (\d+)$", out, re.M)
                    rc = int(code.group(1)) if code else None
                m = re.search(pattern, out)
                got = (m.group(1), int(m.group(2)), rc) if m else (None, None, rc)
                ok = want is not None and got == want
                self.record("reject", f"{name}: no listener", direction, ok, time.monotonic() - t0,
                            f"{got[0]} status {got[1]}, exit {got[2]} (rxe against rxe: {want})" +
                            ("" if ok else f"\n{out[-1500:]}"), port=port)

    def phase_kill(self):
        """The VM's end goes away in mid-connection; our program must stop within a bound, not
        hang. Killed: rping without a count runs until one end goes; the VM's kernel sends the
        DREQ when the process dies, our end must see DISCONNECTED. Link cut: every frame to and
        from rnicd dropped in the bridge, then the VM's program killed behind it; nothing more
        arrives, so our end has only its own work requests: ib_send_bw -R -b (both ends keep
        SENDs outstanding) must end with a completion error once the QP's retries run out. (A
        program waiting for a message with nothing outstanding would wait forever on any RNIC:
        RC has no keepalive, rping's ends take turns.)"""
        runs = (("rping: VM end killed", "killed", 30, "rping -s -a {bind} -p {port} -V",
                 "rping -c -a {server} -p {port} -V"),
                ("ib_send_bw -R -b: link cut", "link cut", 90, "ib_send_bw -d {dev} -R -F -b -D 120 -p {port}",
                 "ib_send_bw -d {dev} -R -F -b -D 120 -p {port} {server}"))
        for name, how, bound, server, client in runs:
            for direction in ("vm-server", "vm-client"):
                if not self.selected(name) or not self.in_budget("kill", name, direction):
                    continue
                for attempt in range(1, RACE_ATTEMPTS + 1):
                    if self.kill_run(name, how, bound, server, client, direction, attempt):
                        break
                    self.say(f"     {name} [{direction}]: perftest's own race (attempt {attempt}), again")
                    self.races += 1
        self.idle_peer_run()

    def idle_peer_run(self):
        """The case RC cannot see: our rping server waits for the VM client's next message with
        nothing in flight. The VM's rping is frozen (SIGSTOP: rxe, in its kernel, still answers),
        so the connection idles: rnicd probes the silent peer and rxe's MAD layer answers, 20 s
        without a false alarm. Then the link is cut: the probes go unanswered and our server must
        get DISCONNECTED (docs/rdma_cm.md, "Beyond Linux") within 30 s."""
        name, direction = "rping: VM client frozen 20 s, then link cut", "vm-client"
        if not self.selected(name) or not self.in_budget("kill", name, direction):
            return
        port = self.next_port()
        self.add_run(port, f"{name} [{direction}]")
        t0 = time.monotonic()
        host = self.host_popen(f"rping -s -a {bedlib.RNIC_IP} -p {port} -V", 300)
        end = time.monotonic() + 30
        while host.poll() is None and not self.host_listening(port) and time.monotonic() < end:
            time.sleep(0.1)
        job = self.bed.vm_job(self.vm_cmd(f"rping -c -a {bedlib.RNIC_IP} -p {port} -V", 300))
        end = time.monotonic() + 30
        while host.poll() is None and not self.host_established(port) and time.monotonic() < end:
            time.sleep(0.1)
        time.sleep(1.0)
        established = host.poll() is None and self.host_established(port)
        pgid = None
        if os.path.exists(job.base + ".pid"):
            with open(job.base + ".pid") as f:
                pgid = f.read().strip()
        if pgid:
            self.bed.vm_run(f"kill -STOP -- -{pgid}", timeout=20)
        before = self.cm_counters()
        time.sleep(20)
        idle_ok = host.poll() is None
        mid = self.cm_counters()
        answered = mid.get("cm_keepalive_answers", 0) - before.get("cm_keepalive_answers", 0)
        self.bed.cut(True)
        cut = time.monotonic()
        try:
            rc, out = host.finish(40)
        finally:
            self.bed.cut(False)
        took = time.monotonic() - cut
        if pgid:
            self.bed.vm_run(f"kill -KILL -- -{pgid}", timeout=20)
        job.wait(10)
        after = self.cm_counters()
        lost = after.get("cm_peers_lost", 0) - mid.get("cm_peers_lost", 0)
        told = "DISCONNECT" in out
        ok = established and bool(pgid) and idle_ok and answered > 0 and took < 30 and told and lost == 1
        self.record("kill", name, direction, ok, time.monotonic() - t0,
                    f"idle 20 s: {answered} probes answered by rxe, our server {'still waiting' if idle_ok else 'gone'}; "
                    f"link cut: DISCONNECTED {'seen' if told else 'not seen'}, exit {rc} {took:.1f} s after, "
                    f"peers lost {lost}" + ("" if ok else f" (established {established}, pgid {pgid})\n--- ours\n"
                                                         f"{out[-2000:]}\n--- VM\n{job.output()[-1500:]}"), port=port)

    def kill_run(self, name, how, bound, server, client, direction, attempt):
        """One run; False when perftest lost its own connect race before anything was killed."""
        port = self.next_port()
        self.add_run(port, f"{name} [{direction}]")
        vm_side = {"bind": "$RXE_IP", "server": bedlib.RNIC_IP, "dev": "rxe0", "port": port}
        host_side = {"bind": bedlib.RNIC_IP, "server": bedlib.VM_IP, "dev": "rnic0", "port": port}
        t0 = time.monotonic()
        if direction == "vm-server":
            job, up = self.vm_server(server.format(**vm_side), port, 300)
            host = self.host_popen(client.format(**host_side), 300) if up else None
        else:
            host = self.host_popen(server.format(**host_side), 300)
            end = time.monotonic() + 30
            while host.poll() is None and not self.host_listening(port) and time.monotonic() < end:
                time.sleep(0.1)
            job = self.bed.vm_job(self.vm_cmd(client.format(**vm_side), 300))
        end = time.monotonic() + 30
        while host and host.poll() is None and not self.host_established(port) and time.monotonic() < end:
            time.sleep(0.1)
        time.sleep(2.0)  # traffic flows (perftest connects twice: its data QP comes second)
        established = host is not None and host.poll() is None and self.host_established(port)
        if not established and host is not None and host.poll() is not None and attempt < 3:
            rc, out = host.finish(0)
            if re.search(PERFTEST_RACE, out):
                job.kill()
                job.wait(10)
                return False
        if how == "link cut":
            self.bed.cut(True)
        job.kill()
        gone = time.monotonic()
        try:
            rc, out = host.finish(bound) if host else (None, "")
        finally:
            if how == "link cut":
                self.bed.cut(False)
        took = time.monotonic() - gone
        job.wait(10)
        ended = rc is not None and took < bound
        said = [ln.strip() for ln in out.splitlines()
                if re.search(r"EVENT|event|[Cc]ompletion|error|status", ln) and ln.strip()]
        ok = established and ended and (("DISCONNECT" in out) if how == "killed" else bool(said))
        self.record("kill", name, direction, ok, time.monotonic() - t0,
                    f"our end stopped {took:.2f} s after (exit {rc}): {' / '.join(said[:3]) or out[-300:]}"
                    + (f" (attempt {attempt})" if attempt > 1 else "")
                    + ("" if ok else f" (established {established})\n--- ours\n{out[-2000:]}\n--- VM\n"
                       f"{job.output()[-1500:]}"), port=port)
        return True

    def phase_loss(self):
        """Enough connections that some MADs are lost both ways: ucmatose connects 20 at once,
        rping a few times; each round both directions. Rounds repeat (at most 3) until rnicd
        and rxe have each resent a MAD on timeout."""
        before, vm_before = self.cm_counters(), self.vm_cm_counters()
        t_phase = time.monotonic()
        loss_tools = [
            Tool("loss 2%: ucmatose -c 20 -C 10", "ucmatose -b {bind} -p {port} -c 20 -C 10",
                 "ucmatose -s {server} -p {port} -c 20 -C 10",
                 lambda s, c: status_is(s) + status_is(c) + status_is(c, "data transfers complete"), timeout=120),
            Tool("loss 2%: rping -S 4000 -C 20", "rping -s -a {bind} -p {port} -v -V -S 4000 -C 20",
                 "rping -c -a {server} -p {port} -v -V -S 4000 -C 20",
                 lambda s, c: rping_payload_problems(c, "ping data: ", 20, 4000)
                 + rping_payload_problems(s, "server ping data: ", 20, 4000), timeout=120),
        ]
        for rnd in range(1, 4):
            for t in loss_tools:
                if not self.selected(t.name):
                    continue
                for direction in ("vm-server", "vm-client"):
                    if not self.in_budget("loss", f"{t.name} (round {rnd})", direction):
                        continue
                    port = self.next_port()
                    self.add_run(port, f"{t.name} [{direction}] round {rnd}")
                    t0 = time.monotonic()
                    run_before, vm_run_before = self.cm_counters(), self.vm_cm_counters()
                    src, crc, sout, cout = self.run_pair(t.server, t.client, port, direction, t.timeout,
                                                         server_grace=30)
                    problems = t.check(sout, cout)
                    ok = src == 0 and crc == 0 and not problems
                    detail = "server and client rc 0, data checked"
                    client_checked = "rping" in t.name and not rping_payload_problems(cout, "ping data: ", 20, 4000)
                    if not ok and client_checked and self.dreq_lost_for_good(direction, crc, run_before,
                                                                             vm_run_before):
                        # Linux's CM stops resending a DREQ when the id is destroyed (cm_destroy_id),
                        # and rping's client destroys it at once: one lost DREQ and our idle server
                        # is never told, as rxe's own server would not be. RC has no keepalive.
                        ok, self.linux_hangs = True, self.linux_hangs + 1
                        detail = ("client rc 0, its data checked; rxe's DREQ lost on the bridge and, its id "
                                  "destroyed, never resent (Linux's cm_destroy_id): our server, idle, was "
                                  f"ended after {30} s as rxe's own would wait (server rc {src})")
                    self.record("loss", f"{t.name} (round {rnd})", direction, ok, time.monotonic() - t0,
                                detail if ok else
                                f"server rc {src}, client rc {crc}, {problems}\n--- server\n{sout[-2500:]}\n"
                                f"--- client\n{cout[-2500:]}", port=port)
            after, vm_after = self.cm_counters(), self.vm_cm_counters()
            ours = after.get("cm_mads_resent", 0) - before.get("cm_mads_resent", 0)
            theirs = sum(v - vm_before.get(k, 0) for k, v in vm_after.items() if k.startswith("cm_tx_retries/"))
            self.say(f"loss round {rnd}: rnicd cm_mads_resent {ours}, rxe cm_tx_retries {theirs}")
            if ours and theirs:
                break
        from_us, to_us = self.bed.loss_counters()
        self.bed.stop_capture()  # complete on disk for the count below
        # A MAD resent between the counters above and the capture's end is in the capture only:
        # the capture must hold at least what was counted before it ended, and at most what was
        # counted after it: a MAD resent past the counted timer path still fails the second bound.
        resent_by_end = self.cm_counters().get("cm_mads_resent", 0) - before.get("cm_mads_resent", 0)
        _, _, packets = cm_captures.mads(self.a.rnic_pcap, self.bed.cap_path)
        _, resent, _ = cm_captures.exchanges(packets)
        delta = lambda a, b: {k: v - b.get(k, 0) for k, v in sorted(a.items()) if v != b.get(k, 0)}  # noqa: E731
        totals = {"rounds": rnd, "frames_dropped_from_rnicd": from_us, "frames_dropped_to_rnicd": to_us,
                  "rnicd_counters": delta(after, before), "rxe_counters": delta(vm_after, vm_before),
                  "capture": cm_captures.summary(packets, bedlib.RNIC_IP, bedlib.VM_IP)}
        self.results.append({"phase": "loss", "scenario": "loss phase totals", **totals})
        self.say(f"loss phase totals: {json.dumps(totals)}")
        seen_ours = cm_captures.resent_total(resent, bedlib.RNIC_IP)
        on_bridge = {who: resent.get(ip, {"timer": {}, "answer": {}})
                     for who, ip in (("rnicd", bedlib.RNIC_IP), ("rxe", bedlib.VM_IP))}
        rxe_retries = {k.split("/")[1]: v for k, v in totals["rxe_counters"].items() if k.startswith("cm_tx_retries/")}
        ok = ours > 0 and theirs > 0 and from_us > 0 and to_us > 0 and ours <= seen_ours <= resent_by_end
        late = f", {resent_by_end - ours} more by the capture's end" if resent_by_end != ours else ""
        self.record("loss", "CM retransmission exercised", "", ok, time.monotonic() - t_phase,
                    f"rnicd resent {ours} MADs on timeout (cm_mads_resent{late}; on the bridge {on_bridge['rnicd']}), "
                    f"rxe's ib_cm counted {theirs} retries {rxe_retries} (on the bridge {on_bridge['rxe']}) in {rnd} "
                    f"round(s); the bridge dropped {from_us} RoCEv2 frames from rnicd and {to_us} to it")

    def dreq_lost_for_good(self, direction, crc, before, vm_before):
        """The run's only fault is the VM's DREQ (its client ended well, its data checked): sent
        once (rxe's ib_cm counted one more DREQ and no retry) and never received by rnicd."""
        if direction != "vm-client" or crc != 0:
            return False
        after, vm_after = self.cm_counters(), self.vm_cm_counters()
        sent = vm_after.get("cm_tx_msgs/dreq", 0) - vm_before.get("cm_tx_msgs/dreq", 0)
        resent = vm_after.get("cm_tx_retries/dreq", 0) - vm_before.get("cm_tx_retries/dreq", 0)
        received = after.get("cm_dreq_received", 0) - before.get("cm_dreq_received", 0)
        return sent == 1 and resent == 0 and received == 0

    def phase_wire(self):
        import cm_wire_checks  # the raw client lives in tests/system
        cm_wire_checks.run(self)

    # ---- captures ------------------------------------------------------------------------------
    def list_exchanges(self, exchanges):
        """Each run's exchanges: those on its port whose first MAD falls between its start and
        the next run's (capture and runner share the host's clock)."""
        starts = sorted(t for _, _, t in self.runs)
        for port, label, t in self.runs:
            later = [x for x in starts if x > t]
            end = later[0] if later else float("inf")
            seq = [e for e in exchanges if e.port == port and t <= e.start_ns < end]
            if not seq:
                continue
            texts = [f"{'rnicd' if e.active == bedlib.RNIC_IP else 'rxe'}: {e.text()}" for e in seq]
            self.say(f"  MADs {label} (port {port}): " + " | ".join(texts[:3])
                     + (f" | ... {len(seq)} exchanges" if len(seq) > 3 else ""))
            self.mads_by_label[label] = texts

    def check_captures(self, captures):
        for pcap in captures:
            rc, failed, packets = cm_captures.mads(self.a.rnic_pcap, pcap)
            exchanges, _, unmatched = cm_captures.exchanges(packets)
            probed, _, _ = cm_captures.probes(packets)
            ok = rc == 0 and not failed and packets and not unmatched
            self.say(f"rnic-pcap {os.path.basename(pcap)}: exit {rc}, {len(packets)} CM MADs decoded, "
                     f"{len(exchanges)} exchanges, {len(unmatched)} unmatched, {len(failed)} failed; "
                     f"rnicd's probes of rxe {probed.get(bedlib.RNIC_IP, {'sent': 0, 'answered': 0})}")
            if not ok:
                self.failures.append(f"rnic-pcap {os.path.basename(pcap)}: exit {rc}, {len(packets)} MADs, "
                                     f"failed {failed[:3]}, unmatched {len(unmatched)}")
            if os.path.basename(pcap).startswith("bridge-"):
                self.list_exchanges(exchanges)
                checked, problems = interop_frames.check_capture(pcap, self.bed.rnicd_mac, bedlib.RNIC_IP,
                                                                 bedlib.VM_IP, bedlib.VM_MAC)
                self.say(f"rxe conventions: {checked} frames rnicd sent checked in {os.path.basename(pcap)}, "
                         f"{len(problems)} problems")
                if problems:
                    self.failures.append(f"conventions {os.path.basename(pcap)}: {problems[:3]}")
        gsi = []
        for pcap in captures:
            gsi.append(os.path.splitext(pcap)[0] + "-mads.pcap")
            cm_captures.write_gsi_pcap(pcap, gsi[-1])
        r = subprocess.run(["/usr/bin/python3", os.path.join(HERE, "..", "system", "check_tshark_decode.py"),
                            self.a.rnic_pcap, *gsi, "--min-frames", "0"], capture_output=True, text=True, timeout=900)
        last = (r.stdout + r.stderr).strip().splitlines()
        self.say(f"tshark/scapy: exit {r.returncode}: {last[-1] if last else ''}")
        if r.returncode != 0:
            self.failures.append("check_tshark_decode: " + " / ".join(last[-5:]))

    def main(self):
        phases = [p for p in PHASES if p in self.a.phases]
        bedlib.Bed.preflight()
        kernel = bedlib.kernel_image()
        t0 = time.monotonic()
        r = subprocess.run([os.path.join(HERE, "vm", "build-initramfs.sh"), self.a.cache], capture_output=True,
                           text=True, timeout=600)
        if r.returncode == 77:
            raise bedlib.Skip(r.stderr.strip())
        if r.returncode != 0:
            raise RuntimeError(f"initramfs: {r.stderr}")
        initrd = r.stdout.strip().splitlines()[-1]
        self.say(f"initramfs {initrd} ({time.monotonic() - t0:.1f} s)")
        self.bed.up(link_mtu=9000)
        captures = []

        def capture(name):
            self.bed.stop_capture()
            captures.append(os.path.join(self.a.workdir, f"bridge-{name}.pcap"))
            self.bed.start_capture(captures[-1])

        capture("main")  # every phase but loss
        captures.append(os.path.join(self.a.workdir, "rnicd.pcap"))
        self.bed.start_rnicd(captures[-1])
        boot = self.bed.start_vm(kernel, initrd, guest_mtu=9000)
        self.say(f"VM up in {boot:.1f} s: rxe0 {self.bed.vm_env}, rnicd {bedlib.RNIC_IP} mac {self.bed.rnicd_mac}")
        for phase in phases:
            if phase == "loss":
                capture("loss")
                self.bed.loss(2)
                try:
                    self.phase_loss()
                finally:
                    self.bed.loss(0)
            else:
                getattr(self, f"phase_{phase}")()
        self.bed.stop_vm()
        rc = self.bed.stop_rnicd()
        if rc != 0:
            self.failures.append(f"rnicd exit status {rc}")
        self.bed.stop_capture()
        self.check_captures([c for c in captures if os.path.exists(c)])


def write_markdown(path, results):
    rows = ["| phase | run | VM server, rnicd client (or the one run) | VM client, rnicd server |",
            "| --- | --- | --- | --- |"]
    seen = {}
    for r in results:
        if "direction" not in r:
            continue
        seen.setdefault((r["phase"], r["scenario"]), {})[r["direction"]] = r

    def cell(r):
        if not r:
            return ""
        return (f"pass ({r['seconds']} s)" if r["ok"] else "**FAIL**") + (
            f": {r['detail'].splitlines()[0]}" if r["phase"] in ("reject", "kill") else "")

    for (phase, name), d in seen.items():
        if "rxe-rxe" in d or "" in d:
            one = d.get("rxe-rxe") or d.get("")
            rows.append(f"| {phase} | {name} | {cell(one)}: {one['detail'].splitlines()[0]} | |")
        else:
            rows.append(f"| {phase} | `{name}` | {cell(d.get('vm-server'))} | {cell(d.get('vm-client'))} |")
    with open(path, "w") as f:
        f.write("\n".join(rows) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rnicd", required=True)
    ap.add_argument("--rnic-run", required=True)
    ap.add_argument("--rnic-pcap", required=True)
    ap.add_argument("--rnicctl", required=True)
    ap.add_argument("--workdir", default=f"/tmp/rnic-interop-cm-{os.getpid()}")
    ap.add_argument("--cache", default=os.environ.get("RNIC_INTEROP_CACHE", "/var/tmp/rnic-interop"))
    ap.add_argument("--phases", default=",".join(PHASES), help=f"comma-separated subset of {','.join(PHASES)}")
    ap.add_argument("--only", help="regex over scenario names (tools, reject probes, 'rping: kill', loss tools)")
    ap.add_argument("--budget", type=float, default=420, help="seconds for the runs before the rest is skipped")
    ap.add_argument("--markdown", help="also write the results as a Markdown table (docs/interop.md)")
    ap.add_argument("--summary-first", action="store_true",
                    help="hold the progress lines and print them after the verdict (CTest)")
    a = ap.parse_args()
    a.phases = [p for p in a.phases.split(",") if p]
    unknown = [p for p in a.phases if p not in PHASES]
    if unknown:
        ap.error(f"unknown phases {unknown}")
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda signum, _frame: sys.exit(128 + signum))
    shutil.rmtree(a.workdir, ignore_errors=True)
    os.makedirs(a.workdir)
    runner = Runner(a)
    t0 = time.monotonic()
    try:
        runner.main()
    except bedlib.Skip as e:
        print("\n".join([f"SKIP: {e}"] + runner.log))
        return 77
    except Exception as e:  # a bed that does not come up is a failure, with its reason
        import traceback
        runner.say(traceback.format_exc())
        runner.failures.append(f"{type(e).__name__}: {e}")
    finally:
        runner.bed.down()
    with open(os.path.join(a.workdir, "results.json"), "w") as f:
        json.dump({"runs": runner.results, "mads": runner.mads_by_label}, f, indent=1)
    if a.markdown:
        write_markdown(a.markdown, runner.results)
    passed = sum(1 for r in runner.results if r.get("ok"))
    verdict = [f"interop rdma_cm: {passed} runs passed in {time.monotonic() - t0:.0f} s"
               + (f" ({runner.linux_hangs} with a DREQ Linux never resent)" if runner.linux_hangs else "")
               + f"; captures and results in {a.workdir}"]
    if runner.failures:
        verdict.append("FAILED: " + "; ".join(runner.failures))
        for d in runner.failure_details[:2]:
            lines = d.splitlines()
            verdict += lines[:12] + (["  ..."] + lines[-12:] if len(lines) > 24 else lines[12:])
    if a.summary_first:
        print("\n".join(verdict + ["--- progress ---"] + runner.log + verdict), flush=True)
    else:
        print("\n".join(verdict), flush=True)
    return 1 if runner.failures else 0


if __name__ == "__main__":
    sys.exit(main())
