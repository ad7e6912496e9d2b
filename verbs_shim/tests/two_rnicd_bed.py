"""The test bed the two-rnicd verbs checks share: tools/testbed.sh with both daemons in one socket
directory (rnic0 in namespace A, rnic1 in B), a Catch2 program run against it with its output's
tail printed, and whether the daemons survived it."""
import os
import subprocess


class TwoRnicdBed:
    def __init__(self, testbed, rnicd, prefix, net, net6, pcap=False):
        self.testbed, self.rnicd, self.pcap = testbed, rnicd, pcap
        self.name = f"{prefix}{os.getpid() % 10000}"
        self.state = f"/tmp/{self.name}"
        self.env = dict(os.environ, RNIC_TESTBED=self.name, RNIC_TESTBED_DIR=self.state, RNIC_TESTBED_NET=net,
                        RNIC_TESTBED_NET6=net6)
        self.run_dir = f"{self.state}/run"
        self.run_env = dict(self.env, RNIC_RUN_DIR=self.run_dir)

    def up(self):
        flags = ["--pcap"] if self.pcap else []
        subprocess.run([self.testbed, "up", "--daemons", "both", "--one-run-dir", *flags, "--rnicd", self.rnicd],
                       env=self.env, check=True, capture_output=True, timeout=60)

    def down(self):
        subprocess.run([self.testbed, "down"], env=self.env, capture_output=True, timeout=60)

    def alive(self, side):
        try:
            with open(f"{self.state}/rnicd-{side}.pid") as f:
                os.kill(int(f.read().strip()), 0)
            return True
        except (OSError, ValueError):
            return False

    def dead_daemons(self):
        """A failure line for each daemon that is gone."""
        return [f"rnicd {side} died" for side in ("a", "b") if not self.alive(side)]

    def run_catch2(self, test, extra_args):
        """Runs the test program on the bed's devices, prints its output's last 80 lines; its exit code."""
        args = [test, "--durations", "yes"] + list(extra_args)
        print("$ " + " ".join(args), flush=True)
        r = subprocess.run(args, env=self.run_env, capture_output=True, text=True, timeout=240,
                           stdin=subprocess.DEVNULL)
        out = (r.stdout + r.stderr).strip()
        if out:
            print("\n".join(out.splitlines()[-80:]), flush=True)
        return r.returncode
