#!/usr/bin/env bash
# scripts/logs_to_tensorboard.py writes real logs as TensorBoard event files: two wp-ref runs (the
# second with val_loss on some steps, as a validating run logs it) read back from the event files
# (TFRecord framing, the writer's own Event proto): every numeric key a scalar at its step with
# the log's value; writing again replaces the script's runs and keeps a user's file; bad input is
# refused before any writer is needed (exit 2, the file named, nothing written): a log that is not
# JSON lines, two logs of one run name, an -o that is a file or a folder the script did not write.
# The writer comes from PyPI (torch.utils.tensorboard or tensorboardX): scripts/test_deps.sh
# installs one before any test runs; without one this fails rather than reach the network.
set -uo pipefail
build=${1:-build}
cd "$(dirname "$0")/../.."
ref=$build/wp-ref
. tests/check.sh
tb=(python3 scripts/logs_to_tensorboard.py)

"$ref" -m tiny --synthetic --seq 16 --steps 6 --log "$tmp/a.jsonl" >/dev/null 2>&1 || bad "wp-ref a"
"$ref" -m tiny --synthetic --seq 16 --steps 6 --lr 3e-3 --peak-tflops 1 --log "$tmp/b.jsonl" >/dev/null 2>&1 || bad "wp-ref b"
python3 - "$tmp/b.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
with open(sys.argv[1], "w") as f:
    for r in rows:
        if r["step"] % 3 == 0: r["val_loss"] = r["loss"] + 0.1
        f.write(json.dumps(r) + "\n")
PY

# refused before a writer is needed
refused() {   # NEEDLE ARGS...
    local needle=$1; shift
    "${tb[@]}" "$@" >/dev/null 2>"$tmp/err"
    local rc=$?
    [ $rc = 2 ] && grep -qF -- "$needle" "$tmp/err" && ! grep -q Traceback "$tmp/err" && ok || bad "$*: exit $rc: $(tail -2 "$tmp/err")"
}
{ head -2 "$tmp/a.jsonl"; echo 'not json'; } >"$tmp/bad.jsonl"
refused "scripts/logs_to_tensorboard.py: --log $tmp/bad.jsonl: line 3: not JSON" --log "$tmp/bad.jsonl" -o "$tmp/tb0"
[ ! -e "$tmp/tb0" ] && ok || bad "a bad log: $tmp/tb0 written"
mkdir -p "$tmp/other"; cp "$tmp/a.jsonl" "$tmp/other/a.jsonl"
refused "its run would be named 'a', as another log" --log "$tmp/a.jsonl" --log "$tmp/other/a.jsonl" -o "$tmp/tb0"
mkdir -p "$tmp/mine"; echo notes >"$tmp/mine/notes.txt"
refused "-o $tmp/mine: exists and is not a folder this script wrote (no .wpgen-tensorboard)" --log "$tmp/a.jsonl" -o "$tmp/mine"
refused "-o $tmp/a.jsonl: exists and is not a folder" --log "$tmp/b.jsonl" -o "$tmp/a.jsonl"
[ "$(cat "$tmp/mine/notes.txt")" = notes ] && ok || bad "a user's folder changed"

# the writer, where one is importable without the network
cache=${WPGEN_PYTHON_CACHE:-$HOME/.cache/wpgen/python-$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')}
if ! PYTHONPATH="$cache" python3 -c 'import tensorboardX' 2>/dev/null && ! python3 -c 'import torch.utils.tensorboard' 2>/dev/null; then
    bad "no TensorBoard writer (torch.utils.tensorboard, or tensorboardX in $cache): scripts/test_deps.sh installs one"
    echo "tensorboard: $pass passed, $fail failed"; exit 1
fi
"${tb[@]}" --log "$tmp/a.jsonl" --log "$tmp/b.jsonl" -o "$tmp/tb" >"$tmp/out" 2>&1 && ok || bad "write: $(tail -3 "$tmp/out")"
check() {   # the event files of DIR against the logs
    PYTHONPATH="$cache" python3 - "$1" "$tmp/a.jsonl" "$tmp/b.jsonl" <<'PY'
import glob, json, math, os, struct, sys
try:
    from tensorboardX.proto import event_pb2
except ImportError:
    from tensorboard.compat.proto import event_pb2
def events(path):   # TFRecord: length, its crc, the record, its crc
    b = open(path, "rb").read()
    i = 0
    while i < len(b):
        n = struct.unpack("<Q", b[i:i + 8])[0]
        yield event_pb2.Event.FromString(b[i + 12:i + 12 + n])
        i += 12 + n + 4
out = sys.argv[1]
for log in sys.argv[2:]:
    run = os.path.basename(log)[:-len(".jsonl")]
    files = glob.glob(f"{out}/{run}/events.out.tfevents.*")
    assert len(files) == 1, files
    got = {}
    for e in events(files[0]):
        for v in e.summary.value:
            got[(v.tag, e.step)] = v.simple_value
    want = {(k, r["step"]): v for r in map(json.loads, open(log)) for k, v in r.items()
            if k != "step" and isinstance(v, (int, float)) and not isinstance(v, bool)}
    assert set(got) == set(want), (run, sorted(set(got) ^ set(want))[:5])
    for k, v in want.items():
        assert math.isclose(got[k], v, rel_tol=1e-6, abs_tol=1e-30), (run, k, got[k], v)
    assert ("val_loss", 3) in got or run == "a" and ("loss", 6) in got, run
PY
}
check "$tmp/tb" && ok || bad "the event files"
# again: the runs replaced (one event file each), a user's file beside them kept
echo notes >"$tmp/tb/notes.txt"
"${tb[@]}" --log "$tmp/a.jsonl" --log "$tmp/b.jsonl" -o "$tmp/tb" >"$tmp/out" 2>&1 && check "$tmp/tb" &&
    [ "$(cat "$tmp/tb/notes.txt")" = notes ] && ok || bad "written again: $(tail -3 "$tmp/out")"

echo "tensorboard: $pass passed, $fail failed"
[ "$fail" = 0 ]
