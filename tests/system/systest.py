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
