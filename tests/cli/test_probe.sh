#!/usr/bin/env bash
# wpgen probe on recorded machines (tests/data/probe/*: /sys and nvidia-smi's outputs as the real
# machines print them): an 8-GPU NVSwitch H100 box, a 4-GPU PCIe box in two islands, a CPU server
# of two sockets; each output loads as a topology and plans; --merge joins hosts; bad input is
# refused with one line (exit 2). Also the nvidia-smi parsers' errors, on broken copies.
set -u
build=${1:-build}
cd "$(dirname "$0")/../.."
. tests/check.sh
data=tests/data/probe

for m in dgx-h100 pcie-a100-4x cpu-2socket; do
    "$wpgen" probe --sysroot $data/$m -o "$tmp/$m.json" 2>"$tmp/e" && ok || bad "probe $m: $(head -2 "$tmp/e")"
done
python3 - "$tmp" <<'EOF' && ok || bad "probe outputs"
import json, sys
t = sys.argv[1]
h = json.load(open(t + '/dgx-h100.json'))
assert h['version'] == 1 and h['name'] == 'dgx-h100-01'
assert h['device_types'] == {'H100-80GB-HBM3': {'peak_tflops_bf16': 989, 'mem_gb': 85.52, 'hbm_GBps': 3350}}, h['device_types']
n = h['nodes']
assert len(n) == 1 and n[0]['devices'] == 8 and n[0]['type'] == 'H100-80GB-HBM3' and 'islands' not in n[0]
assert n[0]['intra'] == {'type': 'NVL', 'bw_GBps': 450, 'lat_us': 3}, n[0]['intra']          # NV18 x 25 GB/s
assert h['network'] == {'type': 'NET', 'bw_GBps': 50, 'lat_us': 2, 'nics_per_node': 8}, h['network']   # 8 NDR ports
p = json.load(open(t + '/pcie-a100-4x.json'))
assert p['device_types'] == {'A100-80GB-PCIe': {'peak_tflops_bf16': 312, 'mem_gb': 85.9, 'hbm_GBps': 1935}}
assert p['nodes'][0]['devices'] == 4 and p['nodes'][0]['islands'] == 2 and p['nodes'][0]['intra']['type'] == 'PCI'
assert p['network']['bw_GBps'] == 12.5 and p['network']['nics_per_node'] == 1   # 100 GbE, not the 1 GbE port
c = json.load(open(t + '/cpu-2socket.json'))
assert c['nodes'][0]['devices'] == 2 and c['device_types']['cpu']['peak_tflops_fp32'] == 3.584   # 32 cores x 3.5 GHz x 32
assert c['nodes'][0]['cores'] == 64, c['nodes'][0]   # two sockets of 32: what ranks placed there share
assert c['network']['bw_GBps'] == 3.125
EOF
# what probe writes plans and simulates
"$wpgen" sim -t "$tmp/dgx-h100.json" -m llama-h1024 -s weipipe-interleave >/dev/null 2>"$tmp/e" && ok || bad "sim on the probed DGX: $(head -2 "$tmp/e")"
"$wpgen" plan -t "$tmp/pcie-a100-4x.json" -m llama-h1024 -s tawpipe >/dev/null 2>"$tmp/e" && ok || bad "tawpipe on the probed PCIe box: $(head -2 "$tmp/e")"
# stdout without -o; --name
"$wpgen" probe --sysroot $data/cpu-2socket --name n7 >"$tmp/o" 2>"$tmp/e" && python3 -c "import json; d=json.load(open('$tmp/o')); assert d['nodes'][0]['name'] == 'n7'" &&
    ok || bad "probe to stdout with --name: $(head -2 "$tmp/e")"
# this machine: whatever it is, a topology that loads
"$wpgen" probe -o "$tmp/here.json" 2>"$tmp/e" && "$wpgen" plan -t "$tmp/here.json" -m tiny -s 1f1b >/dev/null 2>&1 && ok || bad "probe of this machine: $(head -2 "$tmp/e")"

# --merge: two PCIe hosts (named apart) and the DGX: 3 nodes, the slowest network
"$wpgen" probe --sysroot $data/pcie-a100-4x --name p0 -o "$tmp/p0.json" 2>/dev/null
"$wpgen" probe --sysroot $data/pcie-a100-4x --name p1 -o "$tmp/p1.json" 2>/dev/null
"$wpgen" probe --merge "$tmp/p0.json" "$tmp/p1.json" "$tmp/dgx-h100.json" -o "$tmp/m.json" 2>"$tmp/e" && ok || bad "merge: $(head -2 "$tmp/e")"
python3 - "$tmp/m.json" <<'EOF' && ok || bad "merged topology"
import json, sys
m = json.load(open(sys.argv[1]))
assert [n['name'] for n in m['nodes']] == ['p0', 'p1', 'dgx-h100-01'] and sum(n['devices'] for n in m['nodes']) == 16
assert set(m['device_types']) == {'A100-80GB-PCIe', 'H100-80GB-HBM3'}
assert m['network'] == {'type': 'NET', 'bw_GBps': 12.5, 'lat_us': 10, 'nics_per_node': 1}, m['network']
EOF
"$wpgen" compare -t "$tmp/m.json" -m llama-h1024 --strategies 1f1b,fsdp >/dev/null 2>"$tmp/e" && ok || bad "compare on the merged cluster: $(head -2 "$tmp/e")"

# bad input: one line, exit 2
expect_bad() {   # WHAT PATTERN ARGS...
    local what=$1 pat=$2; shift 2
    "$wpgen" probe "$@" >/dev/null 2>"$tmp/e"; local rc=$?
    [ $rc = 2 ] && grep -q -- "$pat" "$tmp/e" && [ "$(wc -l <"$tmp/e")" -le 1 ] && ok || bad "$what: exit $rc, $(head -3 "$tmp/e")"
}
expect_bad "merge of one host twice" 'nodes\[0\].name: "p0" is also a node of' --merge "$tmp/p0.json" "$tmp/p0.json"
expect_bad "merge into one of its inputs" "is one of the files merged" --merge "$tmp/p0.json" "$tmp/p1.json" -o "$tmp/p1.json" --force
expect_bad "existing output" "refusing to overwrite" --sysroot $data/cpu-2socket -o "$tmp/p0.json"
expect_bad "a name that is not a host name" "--name: expected a host name" --sysroot $data/cpu-2socket --name "$(printf 'n0\nrank 9=evil')"
expect_bad "a name with a space" "--name: expected a host name" --sysroot $data/cpu-2socket --name "gpu 1"
expect_bad "no sysroot" "no/such: No such file" --sysroot "$tmp/no/such"
# a machine without NUMA nodes whose list of online CPUs cannot be read: that file named, not a
# figure derived from it
mkdir -p "$tmp/nonuma/sys/devices/system/cpu" "$tmp/nonuma/etc" && echo garbage >"$tmp/nonuma/sys/devices/system/cpu/online" && echo h0 >"$tmp/nonuma/etc/hostname"
expect_bad "an unreadable list of CPUs" "cpu/online: expected a list of CPUs such as 0-15, got \"garbage\"" --sysroot "$tmp/nonuma"
expect_bad "merge of nothing" "--merge needs" --merge
expect_bad "unknown flag" 'unknown flag "--gpus"' --gpus 8
echo '{"version": 1}' >"$tmp/bad.json"
expect_bad "merge of a bad topology" "bad.json: " --merge "$tmp/bad.json"
python3 -c "import json; d=json.load(open('$tmp/cpu-2socket.json')); d.pop('network'); d['nodes'][0]['name']='x'; json.dump(d, open('$tmp/nonet.json','w'))"
expect_bad "merge of a host without a network" "nonet.json: network: expected" --merge "$tmp/p0.json" "$tmp/nonet.json"
# broken recorded outputs: the parser names the file and line
broken() {   # NAME SED-EXPR PATTERN
    rm -rf "$tmp/s"; cp -r $data/dgx-h100 "$tmp/s"
    sed -i "$2" "$tmp/s/nvidia-smi-topo-m.txt"
    expect_bad "$1" "$3" --sysroot "$tmp/s"
}
broken "a cell that is no link" '2s/NV18/NVX/' "nvidia-smi-topo-m.txt: line 2: GPU0 to GPU1: expected X (itself), NV<n>"
broken "an asymmetric matrix" '2s/NV18/SYS/' "GPU0 to GPU1 is SYS but GPU1 to GPU0 is NV18"
broken "a missing row" '/^GPU7/d' "expected 8 GPU rows (the header's columns), got 7"
broken "no matrix" '1,20d' "expected the matrix of nvidia-smi topo -m"
rm -rf "$tmp/s"; cp -r $data/dgx-h100 "$tmp/s"; sed -i '2s/MiB/GB/' "$tmp/s/nvidia-smi-query-gpu.csv"
expect_bad "a bad query line" 'nvidia-smi-query-gpu.csv: line 2: expected "NAME, MEMORY MiB"' --sysroot "$tmp/s"
rm -rf "$tmp/s"; cp -r $data/dgx-h100 "$tmp/s"; sed -i '9d' "$tmp/s/nvidia-smi-query-gpu.csv"
expect_bad "GPU counts that differ" "lists 7 GPUs" --sysroot "$tmp/s"
rm -rf "$tmp/s"; cp -r $data/dgx-h100 "$tmp/s"; sed -i 's/H100 80GB HBM3/Z9 Hypothetical/' "$tmp/s/nvidia-smi-query-gpu.csv"
expect_bad "an unknown GPU" 'no figures for the GPU "NVIDIA Z9 Hypothetical"' --sysroot "$tmp/s"
"$wpgen" probe --sysroot "$tmp/s" --peak-tflops 500 --hbm-GBps 4000 >"$tmp/o" 2>"$tmp/e" &&
    python3 -c "import json; d=json.load(open('$tmp/o')); assert d['device_types']['Z9-Hypothetical']['peak_tflops_bf16'] == 500" &&
    ok || bad "an unknown GPU with its figures given: $(head -2 "$tmp/e")"

echo "probe: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
