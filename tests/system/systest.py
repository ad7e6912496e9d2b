"""What the system tests share: commands run with a time bound, checks that collect their
failures, what the test bed recorded of a daemon's exit, and the verdict printed before the
progress lines (CTest's excerpt of a failed test
starts at its top, so the reason must come first)."""
import io
import os
import re
import subprocess
import sys
import time


def make_run(env):
    """run(*args, timeout=30, check=True): the command's CompletedProcess; with check, a non-zero
    exit raises with the command's output, so a broken step names itself."""
    def run(*args, timeout=30, check=True):
        r = subprocess.run(list(args), env=env, capture_output=True, text=True, timeout=timeout,
                           stdin=subprocess.DEVNULL)
        if check and r.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} -> {r.returncode}\n{r.stdout}\n{r.stderr}")
        return r
    return run


def start_pair(rnic_run, run_dir, ns, command, port, timeout=60, client_prefix=()):
    """An RDMA server and client through rnic-run in namespace `ns`, as perftest and rdma-core's
    pingpongs pair up: the server on rnic0, then, once its TCP set-up port listens (a bounded
    wait), the client on rnic1 reaching it over the namespace's loopback. `command` is the program
    and its arguments, the same on both sides; `client_prefix` goes before the client's (taskset).
    Each side runs under `timeout`. Returns both processes, stdout and stderr merged."""
    common = [rnic_run, "--run-dir", run_dir, *command]

    def spawn(*args):
        return subprocess.Popen(["ip", "netns", "exec", ns, "timeout", str(timeout), *args],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                stdin=subprocess.DEVNULL)

    server = spawn(*common, "-d", "rnic0")
    for _ in range(100):  # bounded wait until the server listens
        listening = subprocess.run(["ip", "netns", "exec", ns, "ss", "-Hltn"], capture_output=True, text=True,
                                   timeout=10, stdin=subprocess.DEVNULL).stdout
        if f":{port} " in listening or server.poll() is not None:
            break
        time.sleep(0.1)
    client = spawn(*client_prefix, *common, "-d", "rnic1", "127.0.0.1")
    return server, client


def finish_pair(server, client, timeout=60):
    """Waits for a pair start_pair started (each side at most `timeout` + 10 s, then killed):
    (server exit status, client exit status, server output, client output)."""
    def wait(p):
        try:
            return p.communicate(timeout=timeout + 10)[0]
        except subprocess.TimeoutExpired:
            p.kill()
            return p.communicate(timeout=10)[0]

    client_out = wait(client)
    server_out = wait(server)
    return server.returncode, client.returncode, server_out, client_out


def run_pair(rnic_run, run_dir, ns, command, port, timeout=60, client_prefix=()):
    """start_pair, then finish_pair."""
    return finish_pair(*start_pair(rnic_run, run_dir, ns, command, port, timeout, client_prefix), timeout)


class Checks:
    """check(cond, what) prints ok/FAIL and remembers failures. With verdict_first, the progress
    lines are held until finish(), which prints PASSED or FAILED with the first failures, then
    them."""

    def __init__(self, verdict_first=False):
        self.failures = []
        self._real_stdout = None
        if verdict_first:
            self._real_stdout, sys.stdout = sys.stdout, io.StringIO()

    def check(self, cond, what):
        print(("ok   " if cond else "FAIL ") + what, flush=True)
        if not cond:
            self.failures.append(what)
        return cond

    def finish(self):
        """Prints the verdict (and the held lines); returns the exit status."""
        if self._real_stdout is not None:
            log, sys.stdout = sys.stdout.getvalue(), self._real_stdout
            print(("FAILED: " + "; ".join(self.failures[:5])) if self.failures else "PASSED", flush=True)
            print(log, end="")
        return 1 if self.failures else 0


def daemon_exit_status(state, side, seconds=10):
    """The exit status the test bed recorded for rnicd on `side` ($state/rnicd-SIDE.rc) as a
    string, waiting up to `seconds` for it to appear; "?" when it never did."""
    path = f"{state}/rnicd-{side}.rc"
    deadline = time.monotonic() + seconds
    while not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.05)
    return open(path).read().strip() if os.path.exists(path) else "?"


def exit_counters(state, side):
    """The counters rnicd on `side` logged last (its exit log), by name; {} when there are none."""
    with open(f"{state}/rnicd-{side}.log") as f:
        lines = [line for line in f.read().splitlines() if " counters: " in line]
    return {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", lines[-1])} if lines else {}
