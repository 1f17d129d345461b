#!/usr/bin/env bash
# The MLP's tile of tokens as a plan setting (--mlp-tile, config.h's wp_mlp_tile_tokens): its range
# refused by name (exit 2), the default (4096 tokens, or the micro-batch's when fewer) and the flag
# shown in the plan summary and plan --json, recorded in plan.json and the emitted plan_desc.c, in
# the plan's hash only where it splits the tokens; the workspace holds no [T, F] buffer (llama2-7b
# at 131,072 tokens: 32.74 GiB of workspace before tiling, 16.12 after, the recompute stash also
# without its unused x; 14.92 with datt in dxn's storage and dgu in dqkv's, config.c's ws_home;
# 12.17 with the bf16 gradient staged by layer, not by chunk; 11.17 with dxn over xn),
# and the simulator prices small tiles slower.
set -u
build=${1:-build}
cd "$(dirname "$0")/../.."
. tests/check.sh

tiny=tests/data/tiny8/config.json   # 48 tokens a sequence
expect 2 '--mlp-tile: expected an integer in [1, 16777216], got "0"' -- plan -t topologies/cpu-2x2.json -m "$tiny" --mlp-tile 0
expect 2 '--mlp-tile: expected an integer in [1, 16777216], got "16777217"' -- plan -t topologies/cpu-2x2.json -m "$tiny" --mlp-tile 16777217
expect 2 '--mlp-tile: expected an integer in [1, 16777216], got "x"' -- plan -t topologies/cpu-2x2.json -m "$tiny" --mlp-tile x
expect 2 '--mlp-tile' -- plan -t topologies/cpu-2x2.json -m "$tiny" --mlp-tile 8 --mlp-tile 9

# the summary and --json: the default is the micro-batch's tokens when fewer than 4096
summary() { "$wpgen" plan -t topologies/cpu-2x2.json -m "$tiny" "$@" | grep '^tiles'; }
[ "$(summary --micro-batch-size 2)" = "tiles       mlp tile 96 tokens, LM head 96 tokens a block" ] && ok || bad "default tile: $(summary --micro-batch-size 2)"
[ "$(summary --micro-batch-size 2 --mlp-tile 40)" = "tiles       mlp tile 40 tokens, LM head 96 tokens a block" ] && ok || bad "--mlp-tile 40: $(summary --micro-batch-size 2 --mlp-tile 40)"
# (these plans do not fit: exit 1, the JSON written all the same)
j() { "$wpgen" plan -t topologies/dgx-h100.json -m llama2-7b -s weipipe-interleave --recompute --micro-batches 8 --micro-batch-size 1 --json "$@" 2>/dev/null; }
j --seq 131072 >"$tmp/a.json"; j --seq 131072 --mlp-tile 1024 >"$tmp/b.json"; j --seq 131072 --mlp-tile 100000 >"$tmp/c.json"
python3 - "$tmp/a.json" "$tmp/b.json" "$tmp/c.json" <<'EOF' && ok || bad "llama2-7b at 131072: tile or workspace"
import json, sys
a, b, c = (json.load(open(f)) for f in sys.argv[1:])
assert (a['mlp_tile_tokens'], b['mlp_tile_tokens'], c['mlp_tile_tokens']) == (4096, 1024, 100000)
wa, wb, wc = (d['peak_mem_breakdown']['workspace'] for d in (a, b, c))
GiB = 1 << 30
# 32.74 GiB before tiling, 16.12 with tiles, 14.92 with datt [T, H] in dxn's storage and dgu in
# dqkv's, 12.17 with the fp32 stage of a bf16 gradient one layer's (0.75 GiB), not the first
# chunk's (3.5), 11.17 with dxn written over xn (both [T, H]), 10.17 with the residual stream's
# gradient carried in the chunk's input gradient (WP_WS_DRES only on a whole-model chunk); each token fewer in a tile saves 2 [t, F] bf16 (h, dh) and a [t, 2F] (gu in the
# recompute stash): 4F bf16 elements, F = 11008. dgu [t, 2F] lives in dqkv's [T, 3H] slot, which
# grows only once the tile's dgu is the larger (100,000 tokens: 4.1 GiB against 3 GiB)
F, T, H = 11008, 131072, 4096
assert abs(wa / GiB - 10.17) < 0.01, wa / GiB
assert wa - wb == (4096 - 1024) * 4 * F * 2, wa - wb
assert wc - wa == (100000 - 4096) * 4 * F * 2 + (100000 * 2 * F - T * 3 * H) * 2, wc - wa
EOF

# plan.json and plan_desc.c carry it; the hash changes only where the tile splits the tokens
emit() { "$wpgen" emit -t topologies/cpu-2x2.json -m "$tiny" --micro-batch-size 2 -s weipipe-interleave "$@" >/dev/null 2>&1; }
emit -o "$tmp/e0" && emit --mlp-tile 96 -o "$tmp/e96" && emit --mlp-tile 40 -o "$tmp/e40" && ok || bad "emit failed"
tile_of() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["model"]["mlp_tile_tokens"])' "$1/plan.json"; }
hash_of() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["plan_hash"])' "$1/plan.json"; }
[ "$(tile_of "$tmp/e0")" = 96 ] && [ "$(tile_of "$tmp/e40")" = 40 ] && ok || bad "plan.json mlp_tile_tokens: $(tile_of "$tmp/e0") $(tile_of "$tmp/e40")"
grep -q '\.mlp_tile = 40,' "$tmp/e40/plan_desc.c" && ok || bad "plan_desc.c lacks .mlp_tile = 40"
[ "$(hash_of "$tmp/e0")" = "$(hash_of "$tmp/e96")" ] && [ "$(hash_of "$tmp/e0")" != "$(hash_of "$tmp/e40")" ] && ok ||
    bad "plan hashes: $(hash_of "$tmp/e0") $(hash_of "$tmp/e96") $(hash_of "$tmp/e40")"

# the simulator: the same plan in tiles of 64 tokens is slower (more, shallower products)
step() { "$wpgen" sim -t topologies/dgx-h100.json -m llama2-7b -s weipipe-interleave --micro-batches 8 --micro-batch-size 1 --seq 16384 --json "$@" 2>/dev/null |
         python3 -c 'import json,sys; print(json.load(sys.stdin)["step_time_s"])'; }
s0=$(step) s64=$(step --mlp-tile 64)
python3 -c "import sys; sys.exit(0 if $s64 > 1.01 * $s0 else 1)" && ok || bad "sim: tiles of 64 take $s64 s, of 4096 $s0 s"

echo "test_mlp_tile: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
