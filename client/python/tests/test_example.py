"""The digits example end to end: DDP+ringsync, DistributedOptimizer and DDP+gloo with 4
ranks each; its own verdict (identical ranks, accuracy >= 0.95, ringsync == gloo within
tolerance) must be OK."""

import os
import subprocess
import sys

EXAMPLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples",
                       "train_digits.py")


def test_train_digits_verdict_is_ok():
    run = subprocess.run([sys.executable, EXAMPLE, "--world-size=4"], capture_output=True,
                         text=True, timeout=900)
    assert run.returncode == 0 and "VERDICT: OK" in run.stdout, run.stdout + run.stderr
    for mode in ("ddp-ringsync", "optimizer", "ddp-gloo"):
        assert f"[{mode}] epoch  9" in run.stdout
