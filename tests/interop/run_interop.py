#!/usr/bin/env python3
"""Interoperability of rnicd with Linux Soft-RoCE (rdma_rxe), both directions.

One qemu VM (Debian's kernel with rdma_rxe, busybox initramfs built from Debian packages by
vm/build-initramfs.sh) and one rnicd share a bridge in a private namespace (interop_bed.py).
Each scenario runs an unmodified rdma-core / perftest program on both sides, once with the VM
as the server and once as the client; the pingpongs validate the data (-c), rdma_check.c (ours)
validates RDMA WRITE, READ and both atomics (directly and through memory windows of both types).
Phases, in order:
  jumbo   link MTU 9000 (both ports active MTU 4096): the pingpongs at path MTU 1024 and 4096,
          1 B to 64 KiB; perftest send/write/read/atomic bandwidth and write/read latency
  ipv6    the same link, RoCEv2 over IPv6 between the link-local GIDs (ours 1, rxe's 0)
  loss    the same link, 2% of the RoCEv2 frames to and from rnicd dropped in the bridge
          (nftables): RC traffic both ways, data validated
  ecn     the same link, every IPv4 RoCEv2 frame rxe sends to rnicd marked CE in the bridge
          (nftables): rnicd answers rxe with CNPs while checked transfers run both ways; rxe,
          which has no DCQCN, must tolerate them and rnicd's ECT(0) frames (docs/congestion.md)
  mtu1024 link and guest MTU 1500 (active MTU 1024 on both, rnicd restarted): UD and RC at the
          port MTU
At boot, `ibv_devinfo -v` of both sides is compared field by field (devinfo_fidelity.py).
Afterwards every capture (rnicd's own and the bridge's) must pass rnic-pcap, and each frame
rnicd sent must follow the conventions rxe relies on (interop_frames.py).

Usage: run_interop.py --rnicd PATH --rnic-run PATH --rnic-pcap PATH --rdma-check PATH
                      [--workdir DIR] [--cache DIR] [--only REGEX] [--direction vm-server|vm-client|both]
                      [--list] [--budget SECONDS] [--markdown FILE]
(tools/interop.sh fills in the first four from build/.)
Exit 0 all passed, 1 a failure, 77 this machine cannot run the VM (no qemu, no rxe kernel)."""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import interop_bed as bedlib  # noqa: E402
import interop_frames  # noqa: E402
import devinfo_fidelity  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
PINGPONG_OK = r"\d+ iters in [0-9.]+ seconds"
PERFTEST_OK = r"^\s*\d+\s+\d+\s+[0-9.]+\s+[0-9.]+\s+[0-9.]+"
RDMA_CHECK_OK = r"^rdma_check: \d+ iterations .*: data ok$"
BAD_WORDS = ("Failed", "failed", "Couldn't", "couldn't", "error", "Unable", "invalid data")
# ibv_rc_pingpong has no closing handshake: the client leaves once its last completions are in,
# and under loss the ACK of the server's last SEND may be the frame that is lost. The server then
# retries against a QP that is gone: rnicd reports "retry counter exceeded" after retry_cnt
# retries; rxe treats pingpong's retry_cnt 7 as "for ever" and waits until it is killed. Any RNIC
# pair loses this race at the loss rate, so such a run is repeated (bounded); a server that never
# gets its last ACK would lose every attempt.
LAST_ACK_ATTEMPTS = 3
LAST_ACK_GRACE = 20  # seconds a server may still take once its client has finished


class Scenario:
    def __init__(self, phase, name, program, args, success, timeout=40, host_gid="0", vm_gid="$GID",
                 last_ack_race=False):
        self.phase, self.name, self.program, self.args = phase, name, program, args
        self.success, self.timeout = success, timeout
        self.last_ack_race = last_ack_race  # see LAST_ACK_ATTEMPTS
        # GID indexes: ours 0 = ::ffff:<IPv4>, 1 = fe80::; rxe's 0 = fe80::, $GID (1) = IPv4.
        self.host_gid, self.vm_gid = host_gid, vm_gid
        self.gid_flag = "-x" if program.startswith("ib_") else "-g"  # perftest's name for it

    def command(self, dev, gid, port, server=None, path=None):
        """The program's argv; `gid` may be a shell variable for the VM side."""
        argv = [path or self.program, "-d", dev, self.gid_flag, gid, *self.args, "-p", str(port)]
        return argv + ([server] if server else [])


def scenarios():
    out = []
    n = ["-n", "10"]
    for prog in ("ibv_rc_pingpong", "ibv_uc_pingpong", "ibv_srq_pingpong"):
        extra = ["-q", "4"] if prog == "ibv_srq_pingpong" else []
        # 1 B (pad 3), exactly one 4 KiB packet or four 1 KiB ones, one byte more (a 1-byte last
        # packet), 64 KiB (16 or 64 packets).
        for mtu in (1024, 4096):
            for size in (1, 4096, 4097, 65536):
                out.append(Scenario("jumbo", f"{prog} -m {mtu} -s {size}", prog,
                                    ["-m", str(mtu), "-s", str(size), "-c", *n, *extra], PINGPONG_OK))
    for size in (1, 4096):
        out.append(Scenario("jumbo", f"ibv_ud_pingpong -s {size} (MTU 4096)", "ibv_ud_pingpong",
                            ["-s", str(size), "-c", *n], PINGPONG_OK))
    out.append(Scenario("jumbo", "ibv_rc_pingpong -e -s 4096 (completion events)", "ibv_rc_pingpong",
                        ["-e", "-s", "4096", "-c", *n], PINGPONG_OK))
    # WRITE, READ and both atomics with every byte checked on both sides (rdma_check.c).
    for mtu, size in ((1024, 65536), (4096, 65536), (1024, 4097), (4096, 1)):
        out.append(Scenario("jumbo", f"rdma_check -m {mtu} -s {size}", "rdma_check",
                            ["-m", str(mtu), "-s", str(size), *n], RDMA_CHECK_OK))
    # The same through memory windows (rdma_check -w): type 1 bound by ibv_bind_mw and unbound by a
    # zero-length bind, type 2 bound by IBV_WR_BIND_MW and invalidated by the client's
    # SEND_WITH_INV (-w 3: type 2 invalidated by the server's LOCAL_INV); a READ through the dead
    # window must fail with a remote access error.
    for window in (1, 2, 3):
        out.append(Scenario("jumbo", f"rdma_check -w {window} -m 1024 -s 4097 (memory window)", "rdma_check",
                            ["-w", str(window), "-m", "1024", "-s", "4097", *n], RDMA_CHECK_OK))
    # The same through the extended verbs rxe also has: ibv_create_cq_ex with every wc_flags rxe
    # accepts, ibv_create_qp_ex + ibv_wr_*, completions read with ibv_wc_read_*, and a
    # WRITE_WITH_IMM whose receive completion the server checks (rdma_check -x).
    for mtu, size in ((1024, 65536), (4096, 4097)):
        out.append(Scenario("jumbo", f"rdma_check -x -m {mtu} -s {size} (cq_ex, ibv_wr_*)", "rdma_check",
                            ["-x", "-m", str(mtu), "-s", str(size), *n], RDMA_CHECK_OK))
    f = ["-F"]
    out += [
        Scenario("jumbo", "ib_send_bw -s 65536", "ib_send_bw", [*f, "-s", "65536", "-n", "50"], PERFTEST_OK, 60),
        Scenario("jumbo", "ib_write_bw -s 65536", "ib_write_bw", [*f, "-s", "65536", "-n", "50"], PERFTEST_OK, 60),
        Scenario("jumbo", "ib_write_bw -m 1024 -s 8192", "ib_write_bw", [*f, "-m", "1024", "-s", "8192", "-n", "50"],
                 PERFTEST_OK, 60),
        Scenario("jumbo", "ib_read_bw -s 65536", "ib_read_bw", [*f, "-s", "65536", "-n", "50"], PERFTEST_OK, 60),
        Scenario("jumbo", "ib_atomic_bw -A FETCH_AND_ADD", "ib_atomic_bw", [*f, "-A", "FETCH_AND_ADD", "-n", "100"],
                 PERFTEST_OK, 60),
        Scenario("jumbo", "ib_atomic_bw -A CMP_AND_SWAP", "ib_atomic_bw", [*f, "-A", "CMP_AND_SWAP", "-n", "100"],
                 PERFTEST_OK, 60),
        Scenario("jumbo", "ib_write_lat -s 64", "ib_write_lat", [*f, "-s", "64", "-n", "100"], PERFTEST_OK, 60),
        Scenario("jumbo", "ib_read_lat -s 64", "ib_read_lat", [*f, "-s", "64", "-n", "100"], PERFTEST_OK, 60),
        # One receive posted at a time (-r 1) against 8 SENDs in flight (-t 8): RNR NAKs, each
        # followed by a PSN-sequence NAK for the same PSN, which must not cost retry_cnt
        # (docs/transport.md).
        Scenario("jumbo", "ib_send_bw -m 1024 -s 2048 -r 1 -t 8 (RNR rounds)", "ib_send_bw",
                 [*f, "-m", "1024", "-s", "2048", "-n", "200", "-r", "1", "-t", "8"], PERFTEST_OK, 120),
    ]
    # RoCEv2 over IPv6 between the two link-local GIDs.
    v6 = {"host_gid": "1", "vm_gid": "0"}
    out += [
        Scenario("ipv6", "ipv6: ibv_rc_pingpong -m 1024 -s 65536", "ibv_rc_pingpong",
                 ["-m", "1024", "-s", "65536", "-c", *n], PINGPONG_OK, **v6),
        Scenario("ipv6", "ipv6: ibv_ud_pingpong -s 2048", "ibv_ud_pingpong", ["-s", "2048", "-c", *n], PINGPONG_OK,
                 **v6),
        Scenario("ipv6", "ipv6: rdma_check -m 4096 -s 65536", "rdma_check", ["-m", "4096", "-s", "65536", *n],
                 RDMA_CHECK_OK, **v6),
        Scenario("ipv6", "ipv6: ib_write_bw -m 1024 -s 8192", "ib_write_bw",
                 ["-F", "-m", "1024", "-s", "8192", "-n", "50"], PERFTEST_OK, 60, **v6),
    ]
    # 2% loss: enough frames that some are lost in each direction, few outstanding WRs (-t 4)
    # so go-back-N after a loss stays short on TCG.
    out += [
        Scenario("loss", "loss 2%: ibv_rc_pingpong -m 1024 -s 65536", "ibv_rc_pingpong",
                 ["-m", "1024", "-s", "65536", "-c", "-n", "20"], PINGPONG_OK, 120, last_ack_race=True),
        Scenario("loss", "loss 2%: rdma_check -m 1024 -s 65536 (WRITE, READ, atomics)", "rdma_check",
                 ["-m", "1024", "-s", "65536", "-n", "20"], RDMA_CHECK_OK, 120),
        Scenario("loss", "loss 2%: ib_write_bw -m 1024 -s 8192", "ib_write_bw",
                 ["-F", "-m", "1024", "-s", "8192", "-n", "100", "-t", "4"], PERFTEST_OK, 120),
        Scenario("loss", "loss 2%: ib_read_bw -m 1024 -s 8192", "ib_read_bw",
                 ["-F", "-m", "1024", "-s", "8192", "-n", "100", "-t", "4"], PERFTEST_OK, 120),
    ]
    # CE on every frame rxe sends to rnicd: CNPs from rnicd to rxe in both roles (rxe sending
    # WRITEs or READ responses, or only ACKs), data validated.
    out += [
        Scenario("ecn", "ecn: rdma_check -m 1024 -s 65536 (WRITE, READ, atomics)", "rdma_check",
                 ["-m", "1024", "-s", "65536", *n], RDMA_CHECK_OK, 60),
        Scenario("ecn", "ecn: ib_write_bw -m 1024 -s 8192", "ib_write_bw",
                 ["-F", "-m", "1024", "-s", "8192", "-n", "100"], PERFTEST_OK, 60),
        Scenario("ecn", "ecn: ibv_rc_pingpong -m 4096 -s 65536", "ibv_rc_pingpong",
                 ["-m", "4096", "-s", "65536", "-c", *n], PINGPONG_OK),
    ]
    out += [
        Scenario("mtu1024", "ibv_ud_pingpong -s 1024 (MTU 1024)", "ibv_ud_pingpong", ["-s", "1024", "-c", *n],
                 PINGPONG_OK),
        Scenario("mtu1024", "ibv_rc_pingpong -s 65536 (port MTU 1024)", "ibv_rc_pingpong",
                 ["-s", "65536", "-c", *n], PINGPONG_OK),
    ]
    return out


def listening(pid, port):
    """True when process `pid` (in its namespace) has a TCP socket listening on `port`."""
    for name in ("tcp", "tcp6"):
        try:
            with open(f"/proc/{pid}/net/{name}") as f:
                for line in f.readlines()[1:]:
                    local, state = line.split()[1], line.split()[3]
                    if state == "0A" and int(local.split(":")[1], 16) == port:
                        return True
        except OSError:
            pass
    return False


# VM side: start the program, say when its TCP port listens (so the host's client does not dial
# too early), then wait for it.
VM_SERVER = """{cmd} &
p=$!
hex=$(printf '%04X' {port})
i=0
while [ $i -lt 400 ] && kill -0 $p 2>/dev/null; do
  if grep -Eq "^ *[0-9]+: [0-9A-F]+:$hex [0-9A-F]+:0000 0A" /proc/net/tcp /proc/net/tcp6; then
    : > /host/listen.{port}; break
  fi
  sleep 0.05; i=$((i+1))
done
wait $p"""


class Runner:
    def __init__(self, args):
        self.a = args
        self.bed = bedlib.Bed(args.workdir, args.rnicd, log=self.say)
        self.port = 20000 + os.getpid() % 12000
        self.results = []
        self.failures = []
        self.log = []  # --summary-first: the progress lines, printed after the verdict
        self.failure_details = []
        self.deadline = time.monotonic() + args.budget

    def say(self, text):
        if self.a.summary_first:
            self.log.append(text)
        else:
            print(text, flush=True)

    @staticmethod
    def finished(sc, rc, out):
        """A side that exited 0 and printed its success line."""
        return rc == 0 and re.search(sc.success, out, re.M) is not None

    def host(self, argv):
        return self.bed.host_cmd([self.a.rnic_run, *argv])

    def run_pair(self, sc, direction):
        """One scenario in one direction: (ok, seconds, detail, lost_last_ack)."""
        self.port += 1
        port = self.port
        t0 = time.monotonic()
        own = sc.program == "rdma_check"  # ours: the VM runs the copy in its job directory
        vm_cmd = " ".join(sc.command("rxe0", sc.vm_gid, port, None if direction == "vm-server" else bedlib.SIDE_IP,
                                     "/host/rdma_check" if own else None))
        vm_cmd = f"timeout {sc.timeout} {vm_cmd}"
        host_argv = self.host(sc.command("rnic0", sc.host_gid, port, bedlib.VM_IP if direction == "vm-server" else None,
                                         self.a.rdma_check if own else None))
        host_proc = job = None
        try:
            if direction == "vm-server":
                job = self.bed.vm_job(VM_SERVER.format(cmd=vm_cmd, port=port))
                marker = os.path.join(self.bed.jobdir, f"listen.{port}")
                end = time.monotonic() + 30
                while not os.path.exists(marker) and job.rc() is None and time.monotonic() < end:
                    time.sleep(0.05)
                if not os.path.exists(marker):
                    return False, time.monotonic() - t0, f"VM server not listening\n{job.output()[-2000:]}"
                host_proc = subprocess.Popen(host_argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                             stderr=subprocess.STDOUT, text=True)
                host_out, _ = host_proc.communicate(timeout=sc.timeout + 10)
                client_done = self.finished(sc, host_proc.returncode, host_out)
                vm_rc = job.wait(LAST_ACK_GRACE if sc.last_ack_race and client_done else sc.timeout + 10)
                client_out, server_out = host_out, job.output()
            else:
                host_proc = subprocess.Popen(host_argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                             stderr=subprocess.STDOUT, text=True)
                end = time.monotonic() + 20
                while not listening(host_proc.pid, port) and host_proc.poll() is None and time.monotonic() < end:
                    time.sleep(0.05)
                job = self.bed.vm_job(vm_cmd)
                vm_rc = job.wait(sc.timeout + 10)
                host_out, _ = host_proc.communicate(timeout=sc.timeout + 10)
                client_out, server_out = job.output(), host_out
        except subprocess.TimeoutExpired:
            vm_rc = None
            host_proc.kill()
            host_out = host_proc.communicate()[0]
            client_out, server_out = host_out, job.output() if job else ""
        finally:
            if job is not None and job.rc() is None:
                job.kill()
                job.wait(5)
        host_rc = host_proc.returncode if host_proc else None
        elapsed = time.monotonic() - t0
        text = client_out + server_out
        bad = [w for w in BAD_WORDS if w in text]
        ok = vm_rc == 0 and host_rc == 0 and re.search(sc.success, client_out, re.M) and not bad
        summary = [ln.strip() for ln in client_out.splitlines() if re.search(sc.success, ln)]
        detail = summary[-1] if ok and summary else (
            f"vm rc {vm_rc}, host rc {host_rc}, {bad}\n--- client\n{client_out[-2500:]}\n--- server\n"
            f"{server_out[-2500:]}")
        # The client finished cleanly and only the server did not, the way LAST_ACK_ATTEMPTS says.
        client_rc, server_rc = (host_rc, vm_rc) if direction == "vm-server" else (vm_rc, host_rc)
        server_stuck = server_rc in (None, 124, 143) if direction == "vm-server" else (
            "retry counter exceeded" in server_out)
        lost_last_ack = (not ok and sc.last_ack_race and server_stuck and self.finished(sc, client_rc, client_out)
                         and not any(w in client_out for w in BAD_WORDS))
        return bool(ok), elapsed, detail, lost_last_ack

    def run_phase(self, phase, selected):
        for sc in selected:
            if sc.phase != phase:
                continue
            for direction in self.a.directions:
                sid = f"{sc.name} [{direction}]"
                if time.monotonic() > self.deadline:
                    self.failures.append(f"{sid}: not run, time budget of {self.a.budget} s spent")
                    self.results.append({"scenario": sc.name, "direction": direction, "ok": False,
                                         "detail": "not run (time budget)"})
                    continue
                start = time.time()
                for attempt in range(1, LAST_ACK_ATTEMPTS + 1):
                    ok, secs, detail, lost_last_ack = self.run_pair(sc, direction)
                    if not lost_last_ack or attempt == LAST_ACK_ATTEMPTS:
                        break
                    self.say(f"     {sid}: the client finished and the server never got its last ACK "
                             f"(attempt {attempt}, {secs:.1f} s; see LAST_ACK_ATTEMPTS), again")
                self.results.append({"scenario": sc.name, "direction": direction, "ok": ok,
                                     "seconds": round(secs, 1), "detail": detail.splitlines()[0] if ok else detail,
                                     "phase": phase, "start_ns": int(start * 1e9), "end_ns": int(time.time() * 1e9)})
                if ok:
                    self.say(f"ok   {sid} ({secs:.1f} s) {detail}")
                else:
                    self.failures.append(sid)
                    self.failure_details.append(f"FAIL {sid} ({secs:.1f} s)\n{detail}")
                    self.say(self.failure_details[-1])

    def check_pcaps(self, pcaps):
        for pcap in pcaps:
            r = subprocess.run([self.a.rnic_pcap, "--quiet", pcap], capture_output=True, text=True, timeout=300)
            text = (r.stdout + r.stderr).strip()
            roce = re.search(r"(\d+) RoCEv2", text)
            line = [ln for ln in text.splitlines() if "ICRC" in ln or "RoCEv2" in ln]
            self.say(f"rnic-pcap {os.path.basename(pcap)}: exit {r.returncode}; {line[-1] if line else text[-300:]}")
            if r.returncode != 0 or not roce or int(roce.group(1)) == 0:
                self.failures.append(f"rnic-pcap {pcap}: exit {r.returncode}")

    def check_conventions(self, pcap):
        checked, problems = interop_frames.check_capture(pcap, self.bed.rnicd_mac, bedlib.RNIC_IP, bedlib.VM_IP,
                                                         bedlib.VM_MAC)
        self.say(f"rxe conventions: {checked} frames rnicd sent checked in {os.path.basename(pcap)}, "
                 f"{len(problems)} problems")
        for p in problems:
            self.say("  " + p)
        if problems or checked == 0:
            self.failures.append(f"conventions {pcap}: {checked} frames checked, {len(problems)} problems")

    def main(self, selected):
        phases = [p for p in ("jumbo", "ipv6", "loss", "ecn", "mtu1024") if any(s.phase == p for s in selected)]
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
        shutil.copy(self.a.rdma_check, os.path.join(self.bed.jobdir, "rdma_check"))
        captures = []  # bridge captures, one per phase, and rnicd's own, one per daemon run

        def capture(name):
            self.bed.stop_capture()
            captures.append(os.path.join(self.a.workdir, f"bridge-{name}.pcap"))
            self.bed.start_capture(captures[-1])

        capture("jumbo")
        captures.append(os.path.join(self.a.workdir, "rnicd-mtu4096.pcap"))
        self.bed.start_rnicd(captures[-1])
        boot = self.bed.start_vm(kernel, initrd, guest_mtu=9000)
        self.say(f"VM up in {boot:.1f} s: rxe0 {self.bed.vm_env}, rnicd {bedlib.RNIC_IP} mac {self.bed.rnicd_mac}")
        self.compare_devinfo()
        if "jumbo" in phases:
            self.run_phase("jumbo", selected)
        if "ipv6" in phases:
            # rxe's fe80:: GID works once eth0's link-local address has left duplicate address
            # detection (flags 0x80, not tentative 0xc0): before, RTR fails to resolve the peer.
            rc, out = self.bed.vm_run("i=0; while [ $i -lt 100 ] && ! grep -Eq ' 20 80 +eth0$' /proc/net/if_inet6; do "
                                      "sleep 0.1; i=$((i+1)); done; grep ' eth0$' /proc/net/if_inet6; "
                                      "cat /sys/class/infiniband/rxe0/ports/1/gids/0", timeout=30)
            self.say(f"VM IPv6: {' '.join(out.split())} (rc {rc})")
            self.run_phase("ipv6", selected)
        if "loss" in phases:
            capture("loss")
            self.bed.loss(2)
            self.run_phase("loss", selected)
            from_us, to_us = self.bed.loss_counters()
            self.bed.loss(0)
            self.bed.stop_capture()
            self.check_loss(captures[-1], from_us, to_us)
        ecn = None
        if "ecn" in phases:
            capture("ecn")
            ecn = {"bridge": captures[-1], "rnicd": captures[1], "rxe_before": self.rxe_counters()}
            self.bed.mark_ce(True)
            self.run_phase("ecn", selected)
            ecn["marked"] = self.bed.marked_ce()
            self.bed.mark_ce(False)
            ecn["rxe_after"] = self.rxe_counters()
            self.bed.stop_capture()
        if "mtu1024" in phases:
            capture("mtu1024")
            rc, out = self.bed.vm_run("ip link set eth0 mtu 1500 && sleep 0.2 && ibv_devinfo -d rxe0 | grep active_mtu")
            self.say(f"VM eth0 MTU 1500: rxe0 {' '.join(out.split())} (rc {rc})")
            self.bed.stop_rnicd()
            self.bed.set_link_mtu(1500)
            captures.append(os.path.join(self.a.workdir, "rnicd-mtu1024.pcap"))
            self.bed.start_rnicd(captures[-1])
            self.run_phase("mtu1024", selected)
        self.bed.stop_vm()
        rc = self.bed.stop_rnicd()
        if rc != 0:
            self.failures.append(f"rnicd exit status {rc}")
        self.bed.stop_capture()
        if "jumbo" not in phases and "ipv6" not in phases:  # --only: the first capture saw no scenario
            captures.remove(os.path.join(self.a.workdir, "bridge-jumbo.pcap"))
        self.check_pcaps(captures)
        if ecn:
            self.check_ecn(ecn)
        for pcap in captures:
            if os.path.basename(pcap).startswith("bridge-"):
                self.check_conventions(pcap)

    def compare_devinfo(self):
        """`ibv_devinfo -v` of rxe0 and of rnic0 on the same link (MTU 9000), saved in the workdir
        and compared field by field (devinfo_fidelity.py: every difference must be on its list of
        allowed ones, each with its reason; docs/fidelity.md)."""
        rc, theirs = self.bed.vm_run("ibv_devinfo -v -d rxe0", timeout=60)
        r = subprocess.run(self.host(["ibv_devinfo", "-v", "-d", "rnic0"]), capture_output=True, text=True,
                           timeout=60, stdin=subprocess.DEVNULL)
        for name, text in (("rxe-devinfo.txt", theirs), ("rnicd-devinfo.txt", r.stdout + r.stderr)):
            with open(os.path.join(self.a.workdir, name), "w") as f:
                f.write(text)
        if rc != 0 or r.returncode != 0:
            self.failures.append(f"ibv_devinfo -v: rxe rc {rc}, rnicd rc {r.returncode}")
            return
        problems, allowed, _rows = devinfo_fidelity.compare(theirs, r.stdout, bedlib.VM_MAC, self.bed.rnicd_mac)
        self.say(f"ibv_devinfo -v: {allowed} documented differences from rxe, {len(problems)} unexplained")
        for p in problems:
            self.say("  " + p)
        self.results.append({"scenario": "ibv_devinfo -v fidelity", "ok": not problems, "problems": problems})
        if problems:
            self.failures.append(f"ibv_devinfo -v differs from rxe's: {'; '.join(problems)}")

    def rxe_counters(self):
        """rxe's port counters (hw_counters), by name: how rxe took our CNPs."""
        rc, out = self.bed.vm_run("cd /sys/class/infiniband/rxe0/ports/1/hw_counters && grep . *", timeout=30)
        return {k: int(v) for k, v in re.findall(r"^(\w+):(\d+)$", out, re.M)} if rc == 0 else {}

    def packets(self, pcap):
        r = subprocess.run([self.a.rnic_pcap, "--json", pcap], capture_output=True, text=True, timeout=300)
        try:  # frames rnic-pcap could not parse carry only an error (check_pcaps reports them)
            return [p for p in json.loads(r.stdout)["files"][0]["packets"] if "error" not in p]
        except (ValueError, KeyError, IndexError):
            self.failures.append(f"rnic-pcap --json {pcap}: exit {r.returncode}")
            return []

    def check_ecn(self, ecn):
        """The ecn phase: the bridge marked rxe's frames, rnicd counted every CE frame and sent CNPs
        to rxe in every scenario and both roles (in the bridge's capture, on their way to rxe),
        its counters agree with its own capture, and its data frames carried ECT(0)."""
        is_cnp = lambda p: p["opcode_name"] == "CNP"  # noqa: E731
        ours = [p for p in self.packets(ecn["rnicd"])]
        ce_in = [p for p in ours if p["src"].endswith(bedlib.VM_IP) and p["ecn"] == 3]
        cnps_out = [p for p in ours if is_cnp(p) and p["src"].endswith(bedlib.RNIC_IP)]
        bridge = self.packets(ecn["bridge"])
        cnps_wire = [p for p in bridge if is_cnp(p) and p["src"].endswith(bedlib.RNIC_IP)]
        data = [p for p in bridge if p["src"].endswith(bedlib.RNIC_IP) and not is_cnp(p) and p["dest_qp"] != 1]
        not_ect = [p for p in data if p["ecn"] != 2]
        counters = {}
        with open(self.bed.rnicd_log, errors="replace") as f:
            lines = [ln for ln in f if " counters: " in ln]
        if lines:  # the first rnicd run's exit: the one the ecn phase ran on
            counters = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", lines[0].split(" counters: ", 1)[1])}
        marked_rnicd = counters.get("engine_np_ecn_marked_roce_packets", 0)
        cnp_sent = counters.get("engine_np_cnp_sent", 0)
        rxe = {k: ecn["rxe_after"].get(k, 0) - v for k, v in ecn["rxe_before"].items()
               if ecn["rxe_after"].get(k, 0) != v}
        self.say(f"ecn phase: the bridge marked {ecn['marked']} frames rxe sent; rnicd's capture holds {len(ce_in)} "
                 f"CE frames and {len(cnps_out)} CNPs it sent (np_ecn_marked_roce_packets {marked_rnicd}, "
                 f"np_cnp_sent {cnp_sent}); {len(cnps_wire)} CNPs crossed the bridge to rxe; "
                 f"{len(data) - len(not_ect)} of {len(data)} frames rnicd sent were ECT(0); rxe's counters moved: {rxe}")
        per = []
        for r in self.results:
            if r.get("phase") != "ecn":
                continue
            n = sum(1 for p in cnps_wire if r["start_ns"] <= p["time_ns"] <= r["end_ns"])
            r["cnps_to_rxe"] = n
            per.append(f"{r['scenario']} [{r['direction']}]: {n}")
            if n == 0:
                self.failures.append(f"ecn: no CNP to rxe during {r['scenario']} [{r['direction']}]")
        self.say("ecn phase: CNPs to rxe per run: " + "; ".join(per))
        self.results.append({"scenario": "ecn phase totals", "marked_by_bridge": ecn["marked"], "ce_in_rnicd_capture":
                             len(ce_in), "np_ecn_marked_roce_packets": marked_rnicd, "cnps_in_rnicd_capture":
                             len(cnps_out), "np_cnp_sent": cnp_sent, "cnps_on_bridge": len(cnps_wire),
                             "rnicd_frames": len(data), "rnicd_frames_not_ect0": len(not_ect), "rxe_counters": rxe})
        if ecn["marked"] == 0 or len(ce_in) != ecn["marked"] or marked_rnicd != len(ce_in):
            self.failures.append(f"ecn: the bridge marked {ecn['marked']}, rnicd's capture holds {len(ce_in)} CE "
                                 f"frames, np_ecn_marked_roce_packets {marked_rnicd}: all three must agree")
        if not cnps_out or cnp_sent != len(cnps_out) or len(cnps_wire) != len(cnps_out):
            self.failures.append(f"ecn: np_cnp_sent {cnp_sent}, CNPs in rnicd's capture {len(cnps_out)}, on the "
                                 f"bridge {len(cnps_wire)}: all three must agree and be non-zero")
        if not data or not_ect:
            self.failures.append(f"ecn: {len(not_ect)} of {len(data)} frames rnicd sent were not ECT(0)")

    def check_loss(self, pcap, from_us, to_us):
        """The loss phase only proves something if frames were lost both ways and both
        retransmission engines (rnicd's and rxe's) had to act."""
        ours = interop_frames.flow_stats(pcap, self.bed.rnicd_mac)
        theirs = interop_frames.flow_stats(pcap, bedlib.VM_MAC)
        self.say(f"loss phase: nftables dropped {from_us} frames rnicd sent and {to_us} frames rxe sent; "
                 f"rnicd {ours}; rxe {theirs}")
        self.results.append({"scenario": "loss phase totals", "dropped_from_rnicd": from_us,
                             "dropped_from_rxe": to_us, "rnicd": ours, "rxe": theirs})
        if from_us == 0 or to_us == 0:
            self.failures.append("loss phase: the rule dropped nothing in one direction; loss not exercised")
        if ours["retransmitted"] == 0 or theirs["retransmitted"] == 0:
            self.failures.append("loss phase: rnicd or rxe never retransmitted; recovery not exercised")


def write_markdown(path, selected, results):
    """One row per scenario: its phase, the result of each direction and the command that
    reproduces it alone."""
    by = {(r["scenario"], r["direction"]): r for r in results if "direction" in r}

    def cell(r):
        if not r:
            return "not run"
        return f"pass ({r['seconds']} s)" if r["ok"] else "**FAIL**"

    rows = ["| phase | scenario | VM server, rnicd client | VM client, rnicd server | reproduce |",
            "| --- | --- | --- | --- | --- |"]
    for sc in selected:
        regex = re.sub(r"([.^$*+?{}\[\]\\|()])", r"\\\1", sc.name)
        rows.append(f"| {sc.phase} | `{sc.program} {' '.join(sc.args)}` | {cell(by.get((sc.name, 'vm-server')))} | "
                    f"{cell(by.get((sc.name, 'vm-client')))} | `tools/interop.sh --only '^{regex}$'` |")
    with open(path, "w") as f:
        f.write("\n".join(rows) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rnicd", required=True)
    ap.add_argument("--rnic-run", required=True)
    ap.add_argument("--rnic-pcap", required=True)
    ap.add_argument("--rdma-check", required=True, help="rdma_check built against rdma-core's libibverbs")
    ap.add_argument("--workdir", default=f"/tmp/rnic-interop-{os.getpid()}")
    ap.add_argument("--cache", default=os.environ.get("RNIC_INTEROP_CACHE", "/var/tmp/rnic-interop"))
    ap.add_argument("--only", help="regex over 'scenario [vm-server|vm-client]' names")
    ap.add_argument("--direction", choices=("vm-server", "vm-client", "both"), default="both")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--markdown", help="also write the results as a Markdown table (docs/interop.md)")
    ap.add_argument("--budget", type=float, default=420, help="seconds for the scenarios before the rest is skipped")
    ap.add_argument("--summary-first", action="store_true",
                    help="hold the progress lines and print them after the verdict (CTest: a CI excerpt that "
                         "starts at the test's first lines shows why it failed)")
    a = ap.parse_args()
    a.directions = ("vm-server", "vm-client") if a.direction == "both" else (a.direction,)
    selected = [s for s in scenarios() if not a.only or re.search(a.only, s.name)]
    if a.list:
        for s in scenarios():
            print(f"{s.phase:8} {s.name}")
        return 0
    # A test timeout or ^C must still tear the bed down: turn the signals into an exception.
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda signum, _frame: sys.exit(128 + signum))
    shutil.rmtree(a.workdir, ignore_errors=True)
    os.makedirs(a.workdir)
    runner = Runner(a)
    t0 = time.monotonic()
    try:
        runner.main(selected)
    except bedlib.Skip as e:
        print("\n".join([f"SKIP: {e}"] + runner.log))
        return 77
    except Exception as e:  # a bed that does not come up is a failure, with its reason
        runner.failures.append(f"{type(e).__name__}: {e}")
    finally:
        runner.bed.down()
    with open(os.path.join(a.workdir, "results.json"), "w") as f:
        json.dump(runner.results, f, indent=1)
    if a.markdown:
        write_markdown(a.markdown, selected, runner.results)
    passed = sum(1 for r in runner.results if r.get("ok"))
    verdict = [f"interop: {passed} scenario runs passed in {time.monotonic() - t0:.0f} s; captures and results in "
               f"{a.workdir}"]
    if runner.failures:
        verdict.append("FAILED: " + "; ".join(runner.failures))
        # The first failures' output right under the verdict, trimmed: the whole is in the progress.
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
