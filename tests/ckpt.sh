# What a committed checkpoint says, for the test scripts that save one (sourced): PATH is its
# manifest (JSON: the training state, the shards' file names), its shards lie beside it, named by
# their content's hash, so equal states saved under one PATH are byte-identical files.
ckpt_step() {   # PATH: the step it is of
    python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["state"]["step"])' "$1" 2>/dev/null
}
ckpt_shards() {   # PATH: its shards' paths, one a line
    python3 -c 'import json,os,sys
d = os.path.dirname(sys.argv[1])
for s in json.load(open(sys.argv[1]))["shards"]: print(os.path.join(d, s["file"]))' "$1" 2>/dev/null
}
same_ckpt() {   # A B: the same manifest and byte-identical shards
    cmp -s "$1" "$2" || return 1
    local a b
    while read -r a b; do cmp -s "$a" "$b" || return 1; done < <(paste <(ckpt_shards "$1") <(ckpt_shards "$2"))
}
# Shared by the functions below: ckpt_shard.c's content hash of a shard (hash_bytes over its rank,
# state, and each slice's name, offset and arrays), and the rewrite of a shard under the name of
# its new content, the manifest naming it so.
_ckpt_py='
import json, os, struct, sys
M = 2**64 - 1
def mix64(x):
    x = (x + 0x9e3779b97f4a7c15) & M
    x = ((x ^ (x >> 30)) * 0xbf58476d1ce4e5b9) & M
    x = ((x ^ (x >> 27)) * 0x94d049bb133111eb) & M
    return x ^ (x >> 31)
def hash_bytes(h, data):
    k = len(data) // 8 * 8
    for (w,) in struct.iter_unpack("<Q", data[:k]):
        h = ((h ^ w) * 0x100000001b3) & M
        h ^= h >> 29
    return mix64(h ^ int.from_bytes(data[k:] + bytes(8 - len(data) + k), "little") ^ ((len(data) - k) << 56))
def read_shard(f):
    b = open(f, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    return json.loads(b[8:8 + n]), b[8 + n:]
def write_shard(path, man, shard, head, data):
    h = json.dumps(head).encode()
    h += b" " * (-len(h) % 8)
    meta = head["__metadata__"]
    x = hash_bytes(int(meta["rank"]), meta["state"].encode())
    for t, sl in json.loads(meta["slices"]).items():
        x = hash_bytes(hash_bytes(x, t.encode() + b"\0"), struct.pack("<Q", sl["offset"]))
        for suffix in ("", ".exp_avg", ".exp_avg_sq"):
            if t + suffix in head:
                lo, hi = head[t + suffix]["data_offsets"]
                x = hash_bytes(x, data[lo:hi])
    d = os.path.dirname(path)
    new = shard["file"][:-len("0123456789abcdef.safetensors")] + "%016x.safetensors" % x
    open(os.path.join(d, new), "wb").write(struct.pack("<Q", len(h)) + h + data)
    if new != shard["file"]:
        os.unlink(os.path.join(d, shard["file"]))
    shard["file"] = new
    json.dump(man, open(path, "w"), indent=1)
'
# Writes the float VALUE over element 1 of tensor NAME (a slice of it) in whichever shard of
# checkpoint PATH holds its first element: a checkpoint no run can have left, for the error tests.
# The shard is renamed to its new content's hash (as a load checks it) and PATH names it so: a
# checkpoint whole but for the value.
ckpt_poke() {   # PATH NAME VALUE
    python3 -c "$_ckpt_py"'
path, name, value = sys.argv[1], sys.argv[2], float(sys.argv[3])
man = json.load(open(path))
base = name.rsplit(".exp_avg", 1)[0]
shard = next(s for s in man["shards"] if base in s["slices"] and s["slices"][base][0] == 0)
head, data = read_shard(os.path.join(os.path.dirname(path), shard["file"]))
data = bytearray(data)
at = head[name]["data_offsets"][0] + 4
data[at:at + 4] = struct.pack("<f", value)
write_shard(path, man, shard, head, bytes(data))
' "$1" "$2" "$3"
}
# Removes the KEYs from the training state of checkpoint PATH (its manifest's and every shard's):
# a checkpoint as a version that did not record them wrote it.
ckpt_drop_state() {   # PATH KEY...
    python3 -c "$_ckpt_py"'
path, keys = sys.argv[1], sys.argv[2:]
man = json.load(open(path))
for k in keys: man["state"].pop(k, None)
for shard in man["shards"]:
    head, data = read_shard(os.path.join(os.path.dirname(path), shard["file"]))
    st = json.loads(head["__metadata__"]["state"])
    for k in keys: st.pop(k, None)
    head["__metadata__"]["state"] = json.dumps(st, separators=(",", ":"))
    write_shard(path, man, shard, head, data)
' "$@"
}
