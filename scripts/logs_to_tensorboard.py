#!/usr/bin/env python3
"""Writes the JSON logs of training runs (train --log, wp-ref --log: one object per step) as
TensorBoard event files, for a user who watches runs in TensorBoard rather than in a PNG:

    python3 scripts/logs_to_tensorboard.py --log run1.jsonl [--log run2.jsonl ...] -o DIR
    tensorboard --logdir DIR

Each log becomes one run, DIR/NAME (the log's file name without .jsonl), with one scalar per
numeric key of its steps (loss, val_loss, lr, grad_norm, ms, tokens_per_s, mfu, save_ms, ...)
at its step; the wall time of a step is the log's last change less the steps' times (ms) still to
come, so TensorBoard's "relative" axis is the run's own time. The logs are read and checked as
scripts/plot.py reads them (one reader: its read_log).

The writer is PyPI's: torch.utils.tensorboard where PyTorch is installed, else tensorboardX,
installed once with pip into $WPGEN_PYTHON_CACHE (default ~/.cache/wpgen/python-X.Y, as plot.py's
matplotlib) when missing; a line on stderr says so. (Not named tensorboard.py: run from scripts/,
that name would hide the tensorboard package torch.utils.tensorboard imports.)
DIR must be new or a folder this script wrote (its .wpgen-tensorboard lists the runs it wrote):
writing again replaces those runs and keeps anything else; any other existing DIR is refused.
Exit status: 0 written; 2 bad input (a log as plot.py says, -o naming a file or a folder this
script did not write, two logs of one name), one line naming the file; 3 no writer to be had."""
import argparse
import os
import shutil
import sys

import plot   # scripts/plot.py: the log reader and the Python cache, shared

PROG = "scripts/logs_to_tensorboard.py"
MARKER = ".wpgen-tensorboard"
plot.PROG = PROG   # plot.fail names this script in its messages


def fail(status, msg):
    plot.fail(status, msg)


def summary_writer():
    """SummaryWriter of torch.utils.tensorboard or tensorboardX, installing tensorboardX if neither
    imports."""
    try:
        from torch.utils.tensorboard import SummaryWriter
        return SummaryWriter
    except ImportError:
        pass
    cache = plot.cache_dir()
    if os.path.isdir(cache):
        sys.path.insert(0, cache)
    try:
        from tensorboardX import SummaryWriter
        return SummaryWriter
    except ImportError:
        pass
    plot.pip_into_cache("tensorboardX", PROG, "no TensorBoard writer: torch.utils.tensorboard and tensorboardX are "
                        f"missing, and pip could not install tensorboardX into {cache}")
    from tensorboardX import SummaryWriter
    return SummaryWriter


def run_name(path):
    base = os.path.basename(path)
    return base[:-len(".jsonl")] if base.endswith(".jsonl") and len(base) > len(".jsonl") else base


def check_output(out, names):
    """DIR: new, or a folder this script wrote; the runs it listed there go, the rest stays."""
    if not os.path.lexists(out):
        parent = os.path.dirname(out.rstrip("/")) or "."
        if not os.path.isdir(parent):
            fail(2, f"-o {out}: directory {parent} does not exist")
        return []
    if os.path.islink(out) or not os.path.isdir(out):
        fail(2, f"-o {out}: exists and is not a folder: expected a new path or a folder this script wrote")
    marker = os.path.join(out, MARKER)
    if not os.path.isfile(marker):
        if os.listdir(out):
            fail(2, f"-o {out}: exists and is not a folder this script wrote (no {MARKER}): choose another name")
        return []
    with open(marker, encoding="utf-8") as f:
        old = [l.strip() for l in f if l.strip()]
    for n in names:
        p = os.path.join(out, n)
        if os.path.lexists(p) and n not in old:
            fail(2, f"-o {out}: {p} is not a run this script wrote: choose another folder or rename the log")
    return old


def numeric(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def main():
    ap = argparse.ArgumentParser(prog=PROG, description="JSON logs of training runs as TensorBoard event files.")
    ap.add_argument("--log", action="append", required=True, metavar="FILE", help="a JSON log (train --log); one run each")
    ap.add_argument("-o", "--output", required=True, metavar="DIR", help="the folder for tensorboard --logdir")
    a = ap.parse_args()
    names = [run_name(p) for p in a.log]
    for i, n in enumerate(names):
        if n in names[:i] or n in (MARKER, "") or n.startswith("."):
            fail(2, f"--log {a.log[i]}: its run would be named {n!r}, {'as another log' if n in names[:i] else 'not a name'}: rename the log")
    logs = [plot.read_log(p) for p in a.log]
    old = check_output(a.output, names)
    SummaryWriter = summary_writer()

    os.makedirs(a.output, exist_ok=True)
    for n in set(old) & set(names):   # this script's runs, replaced
        shutil.rmtree(os.path.join(a.output, n), ignore_errors=True)
    for path, name, steps in zip(a.log, names, logs):
        order = sorted(steps)
        left = sum(steps[s].get("ms", 0) for s in order if numeric(steps[s].get("ms", 0))) / 1000
        t = os.path.getmtime(path) - left
        w = SummaryWriter(os.path.join(a.output, name))
        for s in order:
            r = steps[s]
            if numeric(r.get("ms")):
                t += r["ms"] / 1000
            for key, v in r.items():
                if key != "step" and numeric(v):
                    w.add_scalar(key, v, global_step=s, walltime=t)
        w.close()
        print(f"{PROG}: {os.path.join(a.output, name)}: {os.path.basename(path)} ({len(order)} steps)")
    with open(os.path.join(a.output, MARKER), "w", encoding="utf-8") as f:
        f.write("".join(n + "\n" for n in sorted(set(old) | set(names))))


if __name__ == "__main__":
    main()
