"""Runs of the mock engine do not accumulate: a run's resources are freed after it, except for the
few runs that started a thread of the SDK's executor (each such thread keeps the event loop the SDK
made in it, and with it that run's context)."""

from __future__ import annotations

import json
import subprocess
import sys

RUNS = 12
# In a new process: what earlier runs in a test worker left behind decides which run pins what.
RUNS_IN_A_NEW_PROCESS = f"""
import gc, json, threading, weakref
import pulumi
from eks_gpu_training.offline.engine import run_program

made = []

def program():
    component = pulumi.ComponentResource("test:index:Thing", "thing")
    made.append(weakref.ref(component))
    pulumi.export("urn", component.urn)
    pulumi.export("secret", pulumi.Output.secret("s"))

for _ in range({RUNS}):
    graph = run_program(program)
    assert graph.exports["secret"] == "s", graph.exports
    del graph
gc.collect()
print(json.dumps({{"kept": sum(ref() is not None for ref in made),
                  "executor_threads": sum(t.name.startswith("asyncio_") for t in threading.enumerate())}}))
"""


def test_runs_are_freed_after_them_but_for_those_that_started_an_executor_thread():
    # Before: the root stack's URN output went to the process-wide set of outputs and kept every
    # run's stack, and through it all its resources and outputs, alive for good (about 5,800
    # objects a prod run); and the event loop, made inside the first run, kept that run's.
    done = subprocess.run([sys.executable, "-c", RUNS_IN_A_NEW_PROCESS], capture_output=True, text=True, check=True)
    counts = json.loads(done.stdout.splitlines()[-1])
    # The last run's settings stay the SDK's defaults until a next run sets its own: one more.
    assert counts["kept"] <= counts["executor_threads"] + 1, counts
    assert counts["kept"] < RUNS, counts
