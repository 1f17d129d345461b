#!/usr/bin/env bash
# compare and -s auto search context parallelism (docs/context-parallel.md): on 2 x 8 A800 (llama-h1024
# at 16384 tokens, where C = 4 or 8 wins for some strategies and 1 for others) each strategy's row
# of the free search is the fastest of its rows with --context-parallel fixed at each C that
# divides the nodes (1, 2, 4, 8; the bounds prune no winner), labelled /cpN where N > 1; -s auto's
# pick is the fastest of all; and emit's -s auto keeps C = 1 (its runtime runs none yet).
set -uo pipefail
build=${1:-build}
cd "$(dirname "$0")/../.."
. tests/check.sh

args=(-t topologies/weipipe-2x8-a800-nvlink-10gbe.json -m llama-h1024 --seq 16384)
"$wpgen" compare "${args[@]}" --json >"$tmp/free.json" 2>"$tmp/err" || bad "compare: $(tail -2 "$tmp/err")"
"$wpgen" compare "${args[@]}" >"$tmp/free.txt" 2>&1
for C in 1 2 4 8; do
    "$wpgen" compare "${args[@]}" --context-parallel $C --json >"$tmp/c$C.json" 2>"$tmp/err" || bad "compare --context-parallel $C: $(tail -2 "$tmp/err")"
done
"$wpgen" sim "${args[@]}" -s auto --json >"$tmp/auto.json" 2>"$tmp/auto.err" || bad "sim -s auto: $(tail -2 "$tmp/auto.err")"
python3 - "$tmp" <<'PY' && ok || bad "the search over C against each C fixed"
import json, re, sys
d = sys.argv[1]
free = {r["strategy"]: r for r in json.load(open(f"{d}/free.json"))}
fixed = {C: {r["strategy"]: r for r in json.load(open(f"{d}/c{C}.json"))} for C in (1, 2, 4, 8)}
text = open(f"{d}/free.txt").read()
won_by_cp = 0
for s, r in free.items():
    best = min(((fixed[C][s]["step_time_s"], C) for C in fixed if fixed[C][s].get("fits")), default=None)
    assert best and r.get("fits"), (s, best)
    assert abs(r["step_time_s"] - best[0]) <= 1e-9 * best[0], (s, r["step_time_s"], best)
    assert r["context_parallel"] == best[1], (s, r["context_parallel"], best)
    row = re.search(r"^" + re.escape(s) + r"\S*", text, re.M).group(0)
    assert ("/cp%d" % best[1] in row) == (best[1] > 1), (s, row)
    won_by_cp += best[1] > 1
assert 0 < won_by_cp < len(free), won_by_cp   # a mixed case: the search's choice matters
auto = json.load(open(f"{d}/auto.json"))
assert abs(auto["step_time_s"] - min(r["step_time_s"] for r in free.values())) <= 1e-9 * auto["step_time_s"], auto["step_time_s"]
PY
"$wpgen" emit "${args[@]}" -s auto -o "$tmp/emitted" >/dev/null 2>"$tmp/err" &&
    grep -q '"context_parallel": 1' "$tmp/emitted/plan.json" && ok || bad "emit -s auto: $(tail -2 "$tmp/err")"

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
