"""The interop test bed: a private network namespace holding a Linux bridge, a tap for one qemu
VM running Linux Soft-RoCE (rdma_rxe), a veth whose namespace end belongs to rnicd, and the
bridge's own address for the TCP side channel the rdma-core programs exchange QP data over.

    VM eth0 (VIP, rxe0) -- tap ixtap0 --+
                                        bridge ixbr0 (SIDE_IP: kernel TCP only, never RoCE)
    rnicd (RNIC_IP) ----- veth ixhost --+ (peer end ixhost-br)

The kernel is kept silent on rnicd's veth (no address, no IPv6, UDP 4791 dropped before the
kernel's UDP layer), as tools/testbed.sh does, so only rnicd answers for RNIC_IP. Every process
is started by us and stopped by its PID; the namespace (and with it every device) is deleted at
the end. The VM serves jobs through a virtio-9p directory (vm/guest-init.sh), so one boot runs
every scenario."""
import os
import re
import shutil
import signal
import subprocess
import time

NET = "10.196.6"
VM_IP, RNIC_IP, SIDE_IP = f"{NET}.1", f"{NET}.254", f"{NET}.253"
VM_MAC = "52:54:00:c6:06:01"
BRIDGE, TAP, VETH, VETH_BR = "ixbr0", "ixtap0", "ixhost", "ixhost-br"


class Skip(Exception):
    """The machine cannot run the VM at all (no qemu, no kernel with rdma_rxe, not root)."""


def sh(*args, check=True, timeout=60, **kw):
    if "input" not in kw:
        kw["stdin"] = subprocess.DEVNULL
    r = subprocess.run(list(args), capture_output=True, text=True, timeout=timeout, **kw)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: exit {r.returncode}: {r.stdout}{r.stderr}")
    return r.stdout


def kernel_image():
    """Newest Debian kernel whose modules include rdma_rxe, or None."""
    best = None
    for name in sorted(os.listdir("/boot")) if os.path.isdir("/boot") else []:
        m = re.fullmatch(r"vmlinuz-(.+-amd64)", name)
        if m and os.path.exists(f"/lib/modules/{m.group(1)}/kernel/drivers/infiniband/sw/rxe/rdma_rxe.ko"):
            best = m.group(1)  # sorted: the last match is the newest of one series
    return best


def accel_args():
    # /dev/kvm on these machines is kvm_pvm, which hangs stock kernels: KVM only with real VT.
    if os.access("/dev/kvm", os.R_OK | os.W_OK) and (os.path.isdir("/sys/module/kvm_intel")
                                                     or os.path.isdir("/sys/module/kvm_amd")):
        return ["-enable-kvm", "-cpu", "host"]
    return ["-accel", "tcg", "-cpu", "max"]


def sweep_stale_beds():
    """Removes the namespaces of earlier runs whose runner died without cleaning up (a SIGKILL
    from a test timeout): everything in such a namespace was started by that runner."""
    for line in sh("ip", "netns", "list", check=False).splitlines():
        m = re.match(r"(rnicix(\d+))\b", line)
        if not m or os.path.exists(f"/proc/{m.group(2)}"):
            continue
        for pid in sh("ip", "netns", "pids", m.group(1), check=False).split():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass
        sh("ip", "netns", "del", m.group(1), check=False)


class Job:
    """One command running in the VM (see guest-init.sh for the file protocol)."""

    def __init__(self, jobdir, jid):
        self.base = os.path.join(jobdir, jid)

    def rc(self):
        try:
            with open(self.base + ".rc") as f:
                return int(f.read().strip() or "255")
        except FileNotFoundError:
            return None

    def wait(self, timeout):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            rc = self.rc()
            if rc is not None:
                return rc
            time.sleep(0.05)
        return None

    def exists(self, suffix):
        return os.path.exists(self.base + suffix)

    def kill(self):
        with open(self.base + ".kill", "w"):
            pass

    def output(self):
        try:
            with open(self.base + ".out", errors="replace") as f:
                return f.read()
        except FileNotFoundError:
            return ""


class Bed:
    def __init__(self, workdir, rnicd, log=print):
        self.workdir = workdir
        self.rnicd_path = rnicd
        self.log = log
        self.ns = f"rnicix{os.getpid()}"  # the runner's PID: a stale bed is recognised by it
        self.jobdir = os.path.join(workdir, "jobs")
        self.run_dir = os.path.join(workdir, "run")
        self.vm_proc = self.rnicd_proc = self.cap_proc = None
        self.rnicd_pcap = None
        self.rnicd_mac = None
        self.jobs = 0
        self.vm_env = {}

    # ---- namespace -------------------------------------------------------------------------
    def nsx(self, *args, **kw):
        return sh("ip", "netns", "exec", self.ns, *args, **kw)

    @staticmethod
    def preflight():
        """Raises Skip where the VM cannot run at all; anything else missing is a failure later."""
        if os.geteuid() != 0:
            raise Skip("needs root (network namespace, tap, qemu on a tap)")
        if shutil.which("qemu-system-x86_64") is None:
            raise Skip("qemu-system-x86_64 not installed (tools/setup.sh installs qemu-system-x86)")
        if not os.path.exists("/dev/net/tun"):
            raise Skip("no /dev/net/tun for the VM's tap")
        if kernel_image() is None:
            raise Skip("no /boot/vmlinuz-*-amd64 with rdma_rxe (tools/setup.sh installs linux-image-amd64)")

    def up(self, link_mtu=9000):
        os.makedirs(self.jobdir, exist_ok=True)
        os.makedirs(self.run_dir, exist_ok=True)
        sweep_stale_beds()
        sh("ip", "netns", "add", self.ns)
        self.nsx("ip", "link", "set", "lo", "up")
        # ARP only from the interface that owns the address (else the bridge answers for others).
        self.nsx("sysctl", "-qw", "net.ipv4.conf.all.arp_ignore=1", "net.ipv4.conf.default.arp_ignore=1",
                 "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1")
        self.nsx("ip", "link", "add", BRIDGE, "type", "bridge", "stp_state", "0", "forward_delay", "0")
        self.nsx("ip", "tuntap", "add", "dev", TAP, "mode", "tap")
        self.nsx("ip", "link", "add", VETH, "type", "veth", "peer", "name", VETH_BR)
        for dev in (BRIDGE, TAP, VETH, VETH_BR):
            self.nsx("ip", "link", "set", dev, "mtu", str(link_mtu))
        for dev in (TAP, VETH_BR):
            self.nsx("ip", "link", "set", dev, "master", BRIDGE, "up")
        self.nsx("ip", "link", "set", VETH, "up")
        self.nsx("ip", "link", "set", BRIDGE, "up")
        self.nsx("ip", "addr", "add", f"{SIDE_IP}/24", "dev", BRIDGE)
        # The kernel of this namespace never speaks RoCE, as in tools/testbed.sh: on rnicd's veth
        # RoCEv2 is dropped at ingress, after the packet sockets (af_packet, rnicd's wake socket)
        # took their copy and before the IP layer; the input rule guards every other way in, so
        # no frame draws an ICMP port unreachable (IPv6 is off above).
        self.nsx("nft", "-f", "-", input=(
            "table inet rnicix {\n chain input { type filter hook input priority -300; udp dport 4791 drop; }\n}\n"
            f"table netdev rnicix {{\n chain ingress {{ type filter hook ingress device \"{VETH}\" priority -500;"
            " udp dport 4791 drop; }\n}\n"))
        self.rnicd_mac = self.nsx("cat", f"/sys/class/net/{VETH}/address").strip()

    def set_link_mtu(self, mtu):
        for dev in (BRIDGE, TAP, VETH, VETH_BR):
            self.nsx("ip", "link", "set", dev, "mtu", str(mtu))

    def loss(self, pct):
        """Drops pct% of the RoCEv2 frames to and from rnicd in the bridge (0 removes the rule)."""
        self.nsx("nft", "delete", "table", "bridge", "rnicix_loss", check=False)
        if pct:
            rules = "".join(f"  {d}name \"{VETH_BR}\" udp dport 4791 numgen random mod 100 < {pct} counter drop\n"
                            for d in ("iif", "oif"))
            self.nsx("nft", "-f", "-", input="table bridge rnicix_loss {\n chain drop_roce {\n"
                     "  type filter hook forward priority 0;\n" + rules + " }\n}\n")

    def cut(self, on):
        """Drops every RoCEv2 frame to and from rnicd in the bridge (a peer gone without a word)."""
        self.nsx("nft", "delete", "table", "bridge", "rnicix_cut", check=False)
        if on:
            self.nsx("nft", "-f", "-", input="table bridge rnicix_cut {\n chain drop_roce {\n"
                     "  type filter hook forward priority 0;\n"
                     f"  iifname \"{VETH_BR}\" udp dport 4791 drop\n  oifname \"{VETH_BR}\" udp dport 4791 drop\n"
                     " }\n}\n")

    def mark_ce(self, on):
        """Sets ECN to Congestion Experienced on every IPv4 RoCEv2 frame the VM sends to rnicd, in
        the bridge's forward hook (nftables fixes the IPv4 header checksum; the ICRC does not
        cover the ECN bits): rnicd's notification point then answers rxe with CNPs. rxe sends
        Not-ECT, which a real switch would drop rather than mark: the point is rxe's side of it.
        The bridge's own capture (dumpcap on ixbr0) takes its copy before the forward hook, so
        it shows these frames unmarked; rnicd's capture shows them CE."""
        self.nsx("nft", "delete", "table", "bridge", "rnicix_ecn", check=False)
        if on:
            self.nsx("nft", "-f", "-", input="table bridge rnicix_ecn {\n chain mark_ce {\n"
                     "  type filter hook forward priority 0;\n"
                     f"  iifname \"{TAP}\" oifname \"{VETH_BR}\" udp dport 4791 ip ecn set ce counter\n"
                     " }\n}\n")

    def marked_ce(self):
        """Frames the marking rule has set CE so far."""
        text = self.nsx("nft", "list", "table", "bridge", "rnicix_ecn", check=False)
        m = re.search(r"ip ecn set ce counter packets (\d+)", text)
        return int(m.group(1)) if m else 0

    def loss_counters(self):
        """(frames dropped on their way from rnicd, frames dropped on their way to rnicd)."""
        text = self.nsx("nft", "list", "table", "bridge", "rnicix_loss", check=False)
        got = {d: int(m.group(1)) for d in ("iif", "oif")
               for m in [re.search(rf'{d}name "{VETH_BR}".*packets (\d+)', text)] if m}
        return got.get("iif", 0), got.get("oif", 0)

    # ---- capture on the bridge -----------------------------------------------------------
    def start_capture(self, path):
        self.cap_path = path
        self.cap_proc = subprocess.Popen(
            ["ip", "netns", "exec", self.ns, "timeout", "-k", "5", "1500", "dumpcap", "-q", "-P", "-i", BRIDGE,
             "-f", "udp port 4791", "-w", path], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=open(path + ".log", "w"))
        for _ in range(100):
            if os.path.exists(path) and os.path.getsize(path) > 0:
                return
            time.sleep(0.1)
        raise RuntimeError("dumpcap did not start on the bridge")

    def stop_capture(self):
        if self.cap_proc:
            time.sleep(2)  # dumpcap reads the kernel ring block-wise: let the last block expire
            self.cap_proc.send_signal(signal.SIGINT)
            try:
                self.cap_proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.cap_proc.kill()
                self.cap_proc.wait()
            self.cap_proc = None

    # ---- rnicd ---------------------------------------------------------------------------
    def start_rnicd(self, pcap):
        self.rnicd_pcap = pcap
        log = open(os.path.join(self.workdir, "rnicd.log"), "a")
        self.rnicd_log = log.name
        # `ip netns exec` execs `timeout`, which bounds rnicd's life if we die without cleaning up
        # and passes our SIGTERM on to it.
        self.rnicd_proc = subprocess.Popen(
            ["ip", "netns", "exec", self.ns, "timeout", "-k", "5", "1800", self.rnicd_path, "--iface", VETH, "--ip", f"{RNIC_IP}/24",
             "--run-dir", self.run_dir, "--name", "rnic0", "--pcap", pcap],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        start = log.tell()
        for _ in range(150):
            with open(self.rnicd_log) as f:
                f.seek(start)
                if "rnicd up" in f.read():
                    return
            if self.rnicd_proc.poll() is not None:
                raise RuntimeError(f"rnicd exited during start-up, see {self.rnicd_log}")
            time.sleep(0.1)
        raise RuntimeError("rnicd not up within 15 s")

    def stop_rnicd(self):
        if self.rnicd_proc and self.rnicd_proc.poll() is None:
            self.rnicd_proc.terminate()
            try:
                self.rnicd_proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.rnicd_proc.kill()
                self.rnicd_proc.wait()
        rc = self.rnicd_proc.returncode if self.rnicd_proc else 0
        self.rnicd_proc = None
        return rc

    def host_cmd(self, args):
        """argv of a program run on rnicd through our libibverbs, inside the namespace."""
        return ["ip", "netns", "exec", self.ns, "env", f"RNIC_RUN_DIR={self.run_dir}", *args]

    # ---- the VM --------------------------------------------------------------------------
    def start_vm(self, kernel, initrd, guest_mtu=9000, timeout=900):
        self.vm_log = os.path.join(self.workdir, "vm-console.log")
        append = (f"console=ttyS0 panic=-1 quiet loglevel=3 mitigations=off rxevm_ip={VM_IP}/24 "
                  f"rxevm_peer={SIDE_IP} rxevm_mtu={guest_mtu}")
        argv = ["ip", "netns", "exec", self.ns, "timeout", "-k", "5", str(timeout),
                "qemu-system-x86_64", "-name", "rnic-interop", *accel_args(), "-smp", "1", "-m", "512M",
                "-nodefaults", "-no-user-config", "-nographic", "-monitor", "none", "-no-reboot",
                "-nic", "none", "-netdev", f"tap,id=n0,ifname={TAP},script=no,downscript=no",
                "-device", f"virtio-net-pci,netdev=n0,mac={VM_MAC},romfile=",
                "-virtfs", f"local,path={self.jobdir},mount_tag=jobs,security_model=none,id=j0",
                "-kernel", f"/boot/vmlinuz-{kernel}", "-initrd", initrd, "-append", append,
                "-serial", f"file:{self.vm_log}"]
        self.vm_proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                        stderr=open(self.vm_log + ".qemu", "w"))
        started = time.monotonic()
        ready = os.path.join(self.jobdir, "ready")
        while time.monotonic() - started < 120:
            if os.path.exists(ready):
                with open(ready) as f:
                    self.vm_env = dict(kv.split("=", 1) for kv in f.read().split())
                return time.monotonic() - started
            if self.vm_proc.poll() is not None:
                break
            time.sleep(0.1)
        console = open(self.vm_log, errors="replace").read()[-3000:] if os.path.exists(self.vm_log) else ""
        raise RuntimeError(f"VM not ready (qemu rc {self.vm_proc.poll()}):\n{console}")

    def vm_job(self, script):
        self.jobs += 1
        jid = f"j{self.jobs:04d}"
        tmp = os.path.join(self.jobdir, jid + ".tmp")
        with open(tmp, "w") as f:
            f.write(script + "\n")
        os.rename(tmp, os.path.join(self.jobdir, jid + ".sh"))
        return Job(self.jobdir, jid)

    def vm_run(self, script, timeout=60):
        job = self.vm_job(script)
        rc = job.wait(timeout)
        if rc is None:
            job.kill()
        return rc, job.output()

    def stop_vm(self):
        if not self.vm_proc:
            return
        with open(os.path.join(self.jobdir, "quit"), "w"):
            pass
        try:
            self.vm_proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.vm_proc.terminate()  # the `timeout` wrapper passes it on to qemu
            try:
                self.vm_proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.vm_proc.kill()
                self.vm_proc.wait()
        self.vm_proc = None

    def down(self):
        for step in (self.stop_vm, self.stop_rnicd, self.stop_capture):
            try:
                step()
            except Exception as e:  # tear down the rest regardless
                self.log(f"teardown: {e}")
        sh("ip", "netns", "del", self.ns, check=False)
