"""wpgen data: text files or JSONL into token shards for train --data (run by `wpgen data`,
generator/cli/cmd_data.c, which passes its arguments on).

Each document (a text file whole, or one JSONL line's text field) becomes the end-of-text token
followed by its tokens, as llm.c's dev/data scripts lay them out; the stream is cut into shards
DIR/train-NNNNN.bin, and the documents picked for validation (evenly spaced, --val-fraction of
them) go to DIR/val-NNNNN.bin. A shard is llm.c's (a 256 x int32 header: magic, version, token
count, then the tokens; uint16 with magic 20240520 version 1, uint32 with magic 20240801
version 7), with wpgen's fields in header words llm.c leaves zero (runtime/train/data.h, the
WP_SHARD_EXT_* words): the tokenizer's name and hash, its vocabulary size, the token width, the
end-of-text id. DIR also gets a copy of tokenizer.json and .wpgen-data, the list of the files
written with their SHA-256: DIR is written as DIR.tmp-PID and renamed into place, and an existing
DIR is replaced only when it is empty or everything in it is listed there, unchanged.

Exit status: 0 done, 1 failed (the tokenizers package cannot be had, a write failed), 2 bad input.
"""
import argparse
import array
import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys

# data.h's header words
MAGIC_U16, MAGIC_U32 = 20240520, 20240801
EXT_MAGIC = 0x4E504757
EXT_TAG, EXT_VERSION, EXT_VOCAB, EXT_WIDTH, EXT_HASH, EXT_EOT, EXT_NAME = 3, 4, 5, 6, 7, 9, 16
EXT_NAME_BYTES = 256
MANIFEST = ".wpgen-data"
# end-of-text tokens of the common tokenizers, tried in this order when --eot is not given
EOT_NAMES = ["<|endoftext|>", "<|end_of_text|>", "</s>", "<eos>", "<|eot_id|>", "<|im_end|>", "[SEP]"]


class BadInput(Exception):
    pass


def fail(status, msg):
    print(f"wpgen data: {msg}", file=sys.stderr)
    sys.exit(status)


def cache_dir():
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "wpgen", "python")


def import_tokenizers():
    """The tokenizers package: installed, or in wpgen's cache, or installed there from PyPI now."""
    where = cache_dir()
    if os.path.isdir(where):
        sys.path.insert(0, where)
    try:
        import tokenizers  # noqa: F401
        return tokenizers
    except ImportError:
        pass
    print(f"wpgen data: the Python package tokenizers is missing: installing it from PyPI into {where}",
          file=sys.stderr)
    os.makedirs(where, exist_ok=True)
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                        "--target", where, "tokenizers"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        last = (r.stdout.strip().splitlines() or ["(no output)"])[-1]
        fail(1, f"could not install tokenizers from PyPI into {where} ({last}): install it with "
                f"`{sys.executable} -m pip install tokenizers` where the network is reachable, or copy it there")
    if where not in sys.path:
        sys.path.insert(0, where)
    import importlib
    importlib.invalidate_caches()
    import tokenizers
    return tokenizers


def parse_args(argv):
    class Parser(argparse.ArgumentParser):
        def error(self, message):   # one line, exit 2
            fail(2, f"{message} (wpgen data --help lists the flags)")

    p = Parser(prog="wpgen data", description="Tokenize text files or JSONL into token shards for train --data.")
    p.add_argument("--tokenizer", required=True, help="a Hugging Face tokenizer.json")
    p.add_argument("-o", "--out", required=True, help="the directory of shards to write")
    p.add_argument("--val-fraction", type=float, default=0.0,
                   help="share of the documents written to val-*.bin, in [0, 0.5] (default 0)")
    p.add_argument("--text-field", default="text", help="the JSONL field holding a document's text (default text)")
    p.add_argument("--eot", help="the end-of-text token put before every document (default: the tokenizer's, found "
                                 "among its special tokens: " + ", ".join(EOT_NAMES) + ")")
    p.add_argument("--shard-tokens", type=int, default=100_000_000,
                   help="tokens per shard, in [1024, 2^31 - 1] (default 100,000,000, as llm.c's)")
    p.add_argument("--width", choices=["auto", "uint16", "uint32"], default="auto",
                   help="token width (default auto: uint16 when the vocabulary fits, else uint32)")
    p.add_argument("--name", help="the tokenizer's name in the headers (default: its folder's or file's name)")
    p.add_argument("inputs", nargs="+", metavar="INPUT", help="text files (one document each) or *.jsonl")
    a = p.parse_args(argv)
    if not 0.0 <= a.val_fraction <= 0.5:
        raise BadInput(f"--val-fraction: expected a number in [0, 0.5], got {a.val_fraction}")
    if not 1024 <= a.shard_tokens <= 2**31 - 1:
        raise BadInput(f"--shard-tokens: expected an integer in [1024, 2147483647], got {a.shard_tokens}")
    if not a.text_field:
        raise BadInput("--text-field: expected a field name, got an empty one")
    return a


def check_paths(a):
    """-o names no input, holds none (replacing it would delete it), and is written only over our own."""
    out = os.path.realpath(a.out)
    for flag, path in [("--tokenizer", a.tokenizer)] + [("INPUT", p) for p in a.inputs]:
        if not os.path.isfile(path):
            raise BadInput(f"{flag} {path}: " + ("not a regular file" if os.path.exists(path) else "no such file"))
        real = os.path.realpath(path)
        if real == out or real.startswith(out.rstrip("/") + "/"):
            raise BadInput(f"-o {a.out} holds {flag} {path}: the output may not replace an input; nothing was written")
    # a symbolic link to a directory is that directory, with or without a trailing slash (out is
    # its real path), as for wpgen emit and export (generator/emit/outdir.c); else the true reason
    link = a.out.rstrip("/") or "/"
    if os.path.lexists(link):
        if os.path.islink(link) and not os.path.isdir(a.out):
            what = "does not exist" if not os.path.exists(link) else "is not a directory"
            raise BadInput(f"-o {a.out}: {link} is a symbolic link to {os.readlink(link)}, which {what}; nothing was written")
        if not os.path.isdir(a.out):
            raise BadInput(f"-o {a.out} exists and is not a directory; nothing was written")
        names = set(os.listdir(a.out))
        if names:
            listed = read_manifest(a.out)
            if listed is None:
                raise BadInput(f"-o {a.out} is not empty and was not written by wpgen data (no {MANIFEST}): "
                               f"give a new or empty directory; nothing was written")
            for name in sorted(names - {MANIFEST}):
                path = os.path.join(a.out, name)
                if name not in listed:
                    raise BadInput(f"-o {a.out}: {name} is not a file wpgen data wrote: move it away first; "
                                   f"nothing was written")
                if not os.path.isfile(path) or os.path.islink(path) or sha256_file(path) != listed[name]:
                    raise BadInput(f"-o {a.out}: {name} changed since wpgen data wrote it: move it away first; "
                                   f"nothing was written")
    parent = os.path.dirname(out) or "."
    if not os.access(parent, os.W_OK):
        raise BadInput(f"-o {a.out}: its directory {parent} cannot be written")


def read_manifest(d):
    try:
        with open(os.path.join(d, MANIFEST)) as f:
            m = json.load(f)
        return {e["name"]: e["sha256"] for e in m["files"]}
    except (OSError, ValueError, KeyError, TypeError):
        return None


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def documents(a):
    """(input, index, text) of every document, in the order given."""
    for path in a.inputs:
        if path.endswith(".jsonl") or path.endswith(".json"):
            with open(path, encoding="utf-8", errors="strict") as f:
                for lineno, line in enumerate(f, 1):
                    if not line.strip():
                        continue
                    try:
                        obj = json.loads(line)
                    except ValueError as e:
                        raise BadInput(f"{path}:{lineno}: not a JSON object ({e})")
                    if not isinstance(obj, dict) or not isinstance(obj.get(a.text_field), str):
                        raise BadInput(f"{path}:{lineno}: expected an object with a string field "
                                       f"\"{a.text_field}\" (--text-field names another)")
                    yield obj[a.text_field]
        else:
            try:
                with open(path, encoding="utf-8", errors="strict") as f:
                    yield f.read()
            except UnicodeDecodeError as e:
                raise BadInput(f"{path}: not UTF-8 text (byte {e.start}): give text files or JSONL")


class ShardWriter:
    """Shards PREFIX-NNNNN.bin of up to `per` tokens each, in folder."""

    def __init__(self, folder, prefix, per, width, fields):
        self.folder, self.prefix, self.per, self.width, self.fields = folder, prefix, per, width, fields
        self.code = "H" if width == 2 else "I"
        assert array.array(self.code).itemsize == width and sys.byteorder == "little"
        self.buf, self.n, self.names, self.tokens = array.array(self.code), 0, [], 0

    def add(self, ids):
        self.buf.extend(ids)
        while len(self.buf) >= self.per:
            self.write(self.buf[:self.per])
            del self.buf[:self.per]

    def close(self):
        if self.buf:
            self.write(self.buf)
            self.buf = array.array(self.code)

    def write(self, toks):
        h = [0] * 256
        h[0], h[1], h[2] = (MAGIC_U16, 1, len(toks)) if self.width == 2 else (MAGIC_U32, 7, len(toks))
        for k, v in self.fields.items():
            h[k] = v
        name = f"{self.prefix}-{self.n:05d}.bin"
        with open(os.path.join(self.folder, name), "wb") as f:
            f.write(struct.pack("<256i", *h))
            toks.tofile(f)
        self.names.append(name)
        self.n += 1
        self.tokens += len(toks)


def header_fields(name, digest, vocab, width, eot):
    f = {EXT_TAG: EXT_MAGIC, EXT_VERSION: 1, EXT_VOCAB: vocab, EXT_WIDTH: width, EXT_EOT: eot}
    lo, hi = struct.unpack("<ii", digest[:8])
    f[EXT_HASH], f[EXT_HASH + 1] = lo, hi
    raw = name.encode("utf-8")[:EXT_NAME_BYTES - 1].ljust(EXT_NAME_BYTES, b"\0")
    for i, w in enumerate(struct.unpack(f"<{EXT_NAME_BYTES // 4}i", raw)):
        f[EXT_NAME + i] = w
    return f


def find_eot(tok, a):
    if a.eot is not None:
        i = tok.token_to_id(a.eot)
        if i is None:
            raise BadInput(f"--eot {a.eot}: not a token of {a.tokenizer}")
        return a.eot, i
    special = {t.content for t in tok.get_added_tokens_decoder().values() if t.special}
    for name in EOT_NAMES:
        if name in special and tok.token_to_id(name) is not None:
            return name, tok.token_to_id(name)
    raise BadInput(f"{a.tokenizer}: no end-of-text token among its special tokens (looked for "
                   f"{', '.join(EOT_NAMES)}): name it with --eot TOKEN")


def run(a):
    check_paths(a)
    tokenizers = import_tokenizers()
    try:
        tok = tokenizers.Tokenizer.from_file(a.tokenizer)
    except Exception as e:   # the package's own error types vary with its version
        raise BadInput(f"--tokenizer {a.tokenizer}: not a Hugging Face tokenizer.json ({str(e).splitlines()[0]})")
    with open(a.tokenizer, "rb") as f:
        digest = hashlib.sha256(f.read()).digest()
    vocab = tok.get_vocab_size(with_added_tokens=True)
    if a.width == "uint16" and vocab > 65536:
        raise BadInput(f"--width uint16: the vocabulary of {a.tokenizer} has {vocab} tokens, more than 65536")
    width = 2 if a.width == "uint16" or (a.width == "auto" and vocab <= 65536) else 4
    eot_name, eot = find_eot(tok, a)
    name = a.name or (os.path.basename(os.path.dirname(os.path.realpath(a.tokenizer)))
                      if os.path.basename(a.tokenizer) == "tokenizer.json" else os.path.splitext(os.path.basename(a.tokenizer))[0])
    fields = header_fields(name, digest, vocab, width, eot)

    out = os.path.realpath(a.out)
    tmp = f"{out}.tmp-{os.getpid()}"
    os.makedirs(tmp)
    try:
        train = ShardWriter(tmp, "train", a.shard_tokens, width, fields)
        val = ShardWriter(tmp, "val", a.shard_tokens, width, fields)
        ndocs = nval = 0
        batch = []

        def flush():
            nonlocal ndocs, nval
            for ids in tok.encode_batch(batch, add_special_tokens=False):
                to_val = a.val_fraction > 0 and int((ndocs + 1) * a.val_fraction) != int(ndocs * a.val_fraction)
                (val if to_val else train).add([eot] + ids.ids)
                nval += to_val
                ndocs += 1
            batch.clear()

        for text in documents(a):
            batch.append(text)
            if len(batch) == 256:
                flush()
        flush()
        train.close()
        val.close()
        if train.tokens == 0:
            raise BadInput("no document to tokenize: the inputs are empty")
        if a.val_fraction > 0 and nval == 0:
            raise BadInput(f"--val-fraction {a.val_fraction}: {ndocs} documents are too few to hold one out "
                           f"(give more documents, e.g. JSONL, or --val-fraction 0)")
        shutil.copyfile(a.tokenizer, os.path.join(tmp, "tokenizer.json"))
        written = train.names + val.names + ["tokenizer.json"]
        manifest = {"wpgen_data": 1, "tokenizer": name, "tokenizer_sha256": digest.hex(), "vocab_size": vocab,
                    "token_bytes": width, "eot": eot_name, "eot_id": eot, "documents": ndocs, "val_documents": nval,
                    "train_tokens": train.tokens, "val_tokens": val.tokens,
                    "files": [{"name": n, "sha256": sha256_file(os.path.join(tmp, n))} for n in written]}
        with open(os.path.join(tmp, MANIFEST), "w") as f:
            json.dump(manifest, f, indent=1)
            f.write("\n")
        # into place: an old DIR (proved ours by check_paths) moved aside first, removed last
        old = None
        if os.path.isdir(out):
            old = f"{out}.old-{os.getpid()}"
            os.rename(out, old)
        os.rename(tmp, out)
        if old:
            shutil.rmtree(old)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    kind = "uint16" if width == 2 else "uint32"
    print(f"wpgen data: {ndocs} documents ({nval} held out) into {a.out}: {train.tokens} tokens in {len(train.names)} "
          f"train shards, {val.tokens} in {len(val.names)} val shards; {kind} tokens, tokenizer {name} "
          f"{digest[:8].hex()} (vocabulary {vocab}, end of text {eot_name} = {eot})")


def main(argv):
    try:
        run(parse_args(argv))
    except BadInput as e:
        fail(2, str(e))
    except OSError as e:
        fail(1, f"{e.filename or ''}: {e.strerror or e}")
    except KeyboardInterrupt:
        fail(1, "interrupted; nothing was written")


if __name__ == "__main__":
    main(sys.argv[1:])
