"""What the system tests share: commands run with a time bound, checks that collect their
failures, and the verdict printed before the progress lines (CTest's excerpt of a failed test
starts at its top, so the reason must come first)."""
import io
import subprocess
import sys


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
