#!/usr/bin/env python3
"""Draws the curves of training runs: the loss (and the validation loss, val_loss, where a log has
it), the learning rate and tokens/s of one or more JSON logs (train --log, wp-ref --log: one
object per step) into one PNG, each log in its own colour.

    python3 scripts/plot.py --log run1.jsonl [--log run2.jsonl ...] -o curves.png [--title T]

matplotlib comes from PyPI: when it is not importable, it is installed once with pip into
$WPGEN_PYTHON_CACHE (default ~/.cache/wpgen/python-X.Y), which later runs reuse; a line on stderr
says so. A log that a resume appended to may hold a step twice: the later line is the one drawn.
-o replaces only a PNG this script wrote (it tags its PNGs, regular files); anything else there
(a user's file, a symbolic link, a FIFO, a directory) is refused.
Exit status: 0 written; 2 bad input (a log missing, unreadable, not UTF-8, not JSON lines of
steps with an integer "step"; -o naming a log or anything but a new path or a plot this script
wrote), one line naming the file (and line);
3 matplotlib missing and not installable."""
import argparse
import json
import os
import subprocess
import sys

PROG = "scripts/plot.py"
TAG = "wpgen scripts/plot.py"   # the PNG's Software text: what -o may replace


def fail(status, msg):
    print(f"{PROG}: {msg}", file=sys.stderr)
    sys.exit(status)


def cache_dir():
    v = sys.version_info
    default = os.path.join(os.path.expanduser("~"), ".cache", "wpgen", f"python-{v.major}.{v.minor}")
    return os.environ.get("WPGEN_PYTHON_CACHE") or default


def pip_into_cache(package, prog, failure):
    """Installs package from PyPI into cache_dir() and puts the cache on sys.path; on failure,
    prog's one line "failure: pip's last line", exit 3."""
    cache = cache_dir()
    print(f"{prog}: {package} missing: installing it from PyPI into {cache}", file=sys.stderr)
    os.makedirs(cache, exist_ok=True)
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                        "--target", cache, package], capture_output=True, text=True)
    if r.returncode != 0:
        last = (r.stderr.strip().splitlines() or ["no output"])[-1]
        print(f"{prog}: {failure}: {last}", file=sys.stderr)
        sys.exit(3)
    if cache not in sys.path:
        sys.path.insert(0, cache)
    import importlib
    importlib.invalidate_caches()


def import_pyplot():
    """matplotlib.pyplot on the Agg backend (no display), installing matplotlib if missing."""
    cache = cache_dir()
    if os.path.isdir(cache):
        sys.path.insert(0, cache)
    try:
        import matplotlib
    except ImportError:
        pip_into_cache("matplotlib", PROG, f"matplotlib is missing and pip could not install it into {cache}")
        import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def read_log(path):
    """{step: record} of one log, the later line of a step winning; exits 2 on bad input. Read as
    bytes and decoded line by line, so that bytes that are not UTF-8 are named by their line."""
    try:
        f = open(path, "rb")
    except OSError as e:
        fail(2, f"--log {path}: {e.strerror}")
    steps = {}
    with f:
        for n, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                fail(2, f"--log {path}: line {n}: not UTF-8 (byte 0x{raw[e.start]:02x} at column {e.start + 1}): expected JSON lines (train --log)")
            if not line.strip():
                continue
            try:
                r = json.loads(line)
            except ValueError as e:
                fail(2, f"--log {path}: line {n}: not JSON ({e.msg}): expected one object per step (train --log)")
            except RecursionError:
                fail(2, f"--log {path}: line {n}: not JSON (nested too deeply): expected one object per step (train --log)")
            # bool is an int in Python: "step": true is not a step number
            if not isinstance(r, dict) or isinstance(r.get("step"), bool) or not isinstance(r.get("step"), int):
                got = json.dumps(r.get("step")) if isinstance(r, dict) else "not an object"
                fail(2, f"--log {path}: line {n}: expected an object with an integer \"step\" (train --log), got {got}")
            for key in ("loss", "lr", "tokens_per_s", "val_loss"):
                if key in r and (isinstance(r[key], bool) or not isinstance(r[key], (int, float))):
                    fail(2, f"--log {path}: line {n}: \"{key}\": expected a number, got {json.dumps(r[key])}")
            steps[r["step"]] = r
    if not steps:
        fail(2, f"--log {path}: no steps (an empty log)")
    return steps


def check_output(out, logs):
    """-o may be a new path or replace only a PNG this script wrote (a regular file), never a log.
    Anything else (a FIFO, a device, a directory) is refused before it is opened: opening a FIFO
    would wait for a writer forever."""
    for p in logs:
        if os.path.exists(p) and os.path.exists(out) and os.path.samefile(p, out):
            fail(2, f"-o {out} is --log {p}: the plot would replace the log")
    if os.path.lexists(out):
        if os.path.islink(out) or not os.path.isfile(out):
            kind = "a symbolic link" if os.path.islink(out) else "a directory" if os.path.isdir(out) else "not a regular file"
            fail(2, f"-o {out}: exists and is {kind}: expected a new path or a plot this script wrote")
        try:
            with open(out, "rb") as f:
                head = f.read(1 << 16)
        except OSError as e:
            fail(2, f"-o {out}: {e.strerror}")
        if not (head.startswith(b"\x89PNG") and TAG.encode() in head):
            fail(2, f"-o {out}: exists and is not a plot this script wrote: choose another name or remove it")
    d = os.path.dirname(out) or "."
    if not os.path.isdir(d):
        fail(2, f"-o {out}: directory {d} does not exist")


def series(steps, key):
    xs = [s for s in sorted(steps) if key in steps[s]]
    return xs, [steps[s][key] for s in xs]


def main():
    ap = argparse.ArgumentParser(prog=PROG, description="Loss, validation loss, learning rate and tokens/s of JSON logs, as a PNG.")
    ap.add_argument("--log", action="append", required=True, metavar="FILE", help="a JSON log (train --log); more than one: one colour each")
    ap.add_argument("-o", "--output", required=True, metavar="PNG", help="the PNG to write")
    ap.add_argument("--title", default=None, help="a title over the figure")
    a = ap.parse_args()
    logs = {p: read_log(p) for p in a.log}
    check_output(a.output, a.log)
    plt = import_pyplot()

    fig, ax = plt.subplots(3, 1, figsize=(9, 10), sharex=True)
    for i, (path, steps) in enumerate(logs.items()):
        colour = f"C{i % 10}"
        name = os.path.basename(path) if len(logs) == 1 or len({os.path.basename(p) for p in logs}) == len(logs) else path
        xs, ys = series(steps, "loss")
        ax[0].plot(xs, ys, color=colour, label=f"{name} loss")
        xs, ys = series(steps, "val_loss")
        if xs:
            ax[0].plot(xs, ys, color=colour, linestyle="--", marker="o", markersize=3, label=f"{name} val_loss")
        xs, ys = series(steps, "lr")
        ax[1].plot(xs, ys, color=colour, label=name)
        xs, ys = series(steps, "tokens_per_s")
        ax[2].plot(xs, ys, color=colour, label=name)
    for a_, label in zip(ax, ("loss", "learning rate", "tokens/s")):
        a_.set_ylabel(label)
        a_.grid(True, alpha=0.3)
        a_.legend(fontsize="small")
    ax[2].set_xlabel("step")
    if a.title:
        fig.suptitle(a.title)
    fig.tight_layout()

    # beside the output, then renamed over it: never a half-written PNG
    tmp = f"{a.output}.tmp-{os.getpid()}"
    try:
        fig.savefig(tmp, format="png", dpi=100, metadata={"Software": TAG})
        os.replace(tmp, a.output)
    except OSError as e:
        if os.path.exists(tmp):
            os.unlink(tmp)
        fail(2, f"-o {a.output}: {e.strerror}")
    print(f"{PROG}: {a.output}: {', '.join(f'{os.path.basename(p)} ({len(s)} steps)' for p, s in logs.items())}")


if __name__ == "__main__":
    main()
