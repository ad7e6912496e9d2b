"""What perftest's output says besides its figures, for the tests that run Debian's perftest."""
import re

# perftest times its own CPU clock at start (timed samples fitted to a line, get_clock.c). When
# the process is preempted during those samples the fit fails: it warns "Correlation coefficient
# r^2: ... < 0.9", takes the clock as 0 MHz and prints every bandwidth as 0.00 although the
# transfer ran. On two cores shared with two FIFO daemons that happens now and then; such a run
# says nothing about rnicd and is repeated once.
_ZERO_BANDWIDTH = re.compile(r"^\s*\d+\s+\d+\s+0\.00\s+0\.00\s", re.M)


def clock_calibration_failed(out):
    return "Correlation coefficient r^2" in out and _ZERO_BANDWIDTH.search(out) is not None
