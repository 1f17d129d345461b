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

The header's vocabulary is the tokenizer's largest token id + 1 (not its token count: a sparse
vocabulary, ids 0..299 and 5000, says 5001, so a model of vocab_size 5001 reads every id); the
width is uint16 when that fits in 65536.

Memory is bounded whatever the size of a document: a text file is read in blocks of READ_BYTES, a
document is encoded in pieces of PIECE_CHARS to PIECE_MAX characters, BATCH_CHARS of them at a
time, and the tokens go to the shard file as they come. The peak does not grow with a document:
66 MB resident measured for one 8 MB document and 60 MB for 1 MB and 16 MB ones, with a small BPE
tokenizer (a large tokenizer adds its own size; tests/e2e/test_data_hostile.sh holds the 8 MB one
under 200 MB, where the whole document encoded at once took 910 MB). A JSONL line is parsed whole:
add about 3 bytes per byte of the longest line. A piece is cut before a space that follows a
non-space character (the first such at or after PIECE_CHARS): the byte-level regexes of GPT-2 and
Llama 3, the Whitespace, BERT and Metaspace pre-tokenizers all start a pre-token there, so the
tokens are those of the whole document. Where no such space lies within PIECE_MAX characters, the
cut is after a newline followed by a non-space, else at PIECE_MAX: tokens at such a cut can differ
from the whole document's (a prefix space added, a pre-token split in two); so can they at any cut
for a tokenizer without a pre-tokenizer (a normalizer that prepends to the text prepends to each
piece).

Bad input (a file not UTF-8, a JSONL line not an object with the string field, a lone surrogate
escape, a document the tokenizer fails on) is refused naming the file and line. SIGINT, SIGTERM and
SIGHUP remove DIR.tmp-PID; a run removes a DIR.tmp-PID left by a dead run of this host (killed by
SIGKILL, say) when its marker file (MARKER, written first) names that PID, host and DIR and it
holds nothing but files wpgen data writes; any other is left as it is.

Exit status: 0 done, 1 failed (the tokenizers package cannot be had, a write failed, SIGINT), 2 bad
input; after SIGTERM or SIGHUP, killed by that signal (a shell's 143, 129).
"""
import argparse
import array
import codecs
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile

# data.h's header words
MAGIC_U16, MAGIC_U32 = 20240520, 20240801
EXT_MAGIC = 0x4E504757
EXT_TAG, EXT_VERSION, EXT_VOCAB, EXT_WIDTH, EXT_HASH, EXT_EOT, EXT_NAME = 3, 4, 5, 6, 7, 9, 16
EXT_NAME_BYTES = 256
VOCAB_MAX = 2**31 - 1          # the header's vocabulary word is an int32
MANIFEST = ".wpgen-data"
MARKER = ".wpgen-data-tmp"     # in DIR.tmp-PID only: which run made it (removed before the rename)
# the files wpgen data writes into DIR: what a stale DIR.tmp-PID may hold and still be removed
OURS = re.compile(r"(train|val)-\d{5,}\.bin|tokenizer\.json|" + re.escape(MANIFEST) + "|" + re.escape(MARKER))
# end-of-text tokens of the common tokenizers, tried in this order when --eot is not given
EOT_NAMES = ["<|endoftext|>", "<|end_of_text|>", "</s>", "<eos>", "<|eot_id|>", "<|im_end|>", "[SEP]"]
# the memory bound (the top comment): the tokenizers package's encodings of a piece take about
# 200 bytes a character, so no more than BATCH_CHARS + PIECE_MAX characters are encoded at once
READ_BYTES = 1 << 20
PIECE_CHARS = 1 << 16
PIECE_MAX = 1 << 18
BATCH_CHARS = 1 << 18
SPACE_CUT = re.compile(r"(?<=\S) ")        # a cut before the space: a pre-token starts there
LINE_CUT = re.compile(r"(?<=\n)(?=\S)")
CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff]")   # never written to the terminal as they are
SURROGATE = re.compile(r"[\ud800-\udfff]")


class BadInput(Exception):
    pass


class Signalled(BaseException):
    """SIGTERM or SIGHUP, raised where Python runs next so that DIR.tmp-PID is removed."""
    def __init__(self, signum):
        super().__init__(signum)
        self.signum = signum


def shown(s):
    """s with its control characters (and the bytes of a name that is not UTF-8) as escapes."""
    return CONTROL.sub(lambda m: "\\x%02x" % ord(m.group()) if ord(m.group()) < 0x100 else
                       ("\\x%02x" % (ord(m.group()) - 0xdc00) if 0xdc80 <= ord(m.group()) <= 0xdcff
                        else "\\u%04x" % ord(m.group())), s)


# fd 2 as it was at the start: QuietStderr's redirection undone before anything is said, even
# where a signal came between its two halves
REAL_STDERR = os.dup(2)
SIGNALS = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}


def loud():
    os.dup2(REAL_STDERR, 2)


def say(msg):
    loud()
    print(shown(f"wpgen data: {msg}"), file=sys.stderr, flush=True)


def fail(status, msg):
    say(msg)
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
    say(f"the Python package tokenizers is missing: installing it from PyPI into {where}")
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
                   help="token width (default auto: uint16 when the largest token id fits, else uint32)")
    p.add_argument("--name", help="the tokenizer's name in the headers, UTF-8 without control characters, at most "
                                  f"{EXT_NAME_BYTES - 1} bytes (default: its folder's or file's name)")
    p.add_argument("inputs", nargs="+", metavar="INPUT",
                   help="text files (one document each) or *.jsonl / *.json (one per line; any case)")
    a = p.parse_args(argv)
    if not 0.0 <= a.val_fraction <= 0.5:
        raise BadInput(f"--val-fraction: expected a number in [0, 0.5], got {a.val_fraction}")
    if not 1024 <= a.shard_tokens <= 2**31 - 1:
        raise BadInput(f"--shard-tokens: expected an integer in [1024, 2147483647], got {a.shard_tokens}")
    if not a.text_field:
        raise BadInput("--text-field: expected a field name, got an empty one")
    if a.name is not None:
        check_name(a.name)
    return a


def check_name(name):
    """--name as the header holds it: UTF-8 (argv's bytes that are not arrive as surrogate escapes),
    no control character, short enough not to be cut."""
    if SURROGATE.search(name):
        raise BadInput(f"--name {name}: not UTF-8 text")
    m = CONTROL.search(name)
    if m:
        raise BadInput(f"--name {name}: a control character at character {m.start() + 1}: give printable text")
    n = len(name.encode("utf-8"))
    if not 0 < n < EXT_NAME_BYTES:
        raise BadInput(f"--name: {n} bytes in UTF-8, expected 1 to {EXT_NAME_BYTES - 1}")


def is_jsonl(path):
    return os.path.splitext(path)[1].lower() in (".jsonl", ".json")


def check_paths(a):
    """-o names no input, holds none (replacing it would delete it), and is written only over our own."""
    out = os.path.realpath(a.out)
    for flag, path in [("--tokenizer", a.tokenizer)] + [("INPUT", p) for p in a.inputs]:
        if not os.path.isfile(path):
            raise BadInput(f"{flag} {path}: " + ("not a regular file" if os.path.exists(path) else "no such file"))
        if not os.access(path, os.R_OK):
            raise BadInput(f"{flag} {path}: cannot be read (permission denied)")
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
    except (OSError, ValueError, KeyError, TypeError, RecursionError):
        return None


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def marker_text(out, pid):
    return json.dumps({"wpgen_data_tmp": 1, "pid": pid, "host": socket.gethostname(), "out": out}) + "\n"


def remove_stale(out):
    """Removes OUT.tmp-PID folders that a run of this host left (SIGKILL, a power cut): only where
    PID is dead, the marker names this PID, host and OUT, and everything else in it is a file wpgen
    data writes. Anything else is left as it is."""
    parent, base = os.path.split(out)
    stem = re.compile(re.escape(base) + r"\.tmp-(\d+)")
    try:
        entries = os.listdir(parent or ".")
    except OSError:
        return
    for e in entries:
        m = stem.fullmatch(e)
        if not m:
            continue
        d, pid = os.path.join(parent, e), int(m.group(1))
        try:
            if pid == os.getpid() or os.path.islink(d) or not os.path.isdir(d):
                continue
            with open(os.path.join(d, MARKER)) as f:
                if f.read() != marker_text(out, pid):
                    continue
            if not all(OURS.fullmatch(n) and os.path.isfile(os.path.join(d, n)) and
                       not os.path.islink(os.path.join(d, n)) for n in os.listdir(d)):
                continue
            try:
                os.kill(pid, 0)
                continue                      # alive (or another user's): not ours to touch
            except ProcessLookupError:
                pass
            except PermissionError:
                continue
            shutil.rmtree(d)
            say(f"removed {d}, left by an earlier run (pid {pid}) that did not finish")
        except (OSError, ValueError):
            continue


def documents(a):
    """(input, line, text chunks) of every document, in the order given: a text file in blocks of
    READ_BYTES, a JSONL line whole. Every way a document can be bad is a BadInput naming it."""
    for path in a.inputs:
        if is_jsonl(path):
            yield from jsonl_documents(path, a.text_field)
        else:
            yield path, 1, text_blocks(path)


def jsonl_documents(path, field):
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise BadInput(f"{path}:{lineno}: not UTF-8 (byte {e.start + 1} of the line is 0x{raw[e.start]:02x})")
            del raw
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except ValueError as e:
                raise BadInput(f"{path}:{lineno}: not a JSON object ({e})")
            except RecursionError:
                raise BadInput(f"{path}:{lineno}: not a JSON object (nested too deeply)")
            del line
            if not isinstance(obj, dict) or not isinstance(obj.get(field), str):
                raise BadInput(f"{path}:{lineno}: expected an object with a string field \"{field}\" "
                               f"(--text-field names another)")
            text = obj[field]
            del obj
            m = SURROGATE.search(text)
            if m:
                raise BadInput(f"{path}:{lineno}: field \"{field}\": a lone surrogate \\u{ord(m.group()):04x} at "
                               f"character {m.start() + 1}: a JSON \\ud800-\\udfff escape must be one of a pair")
            yield path, lineno, [text]


def text_blocks(path):
    """A text file's text, READ_BYTES at a time, strictly UTF-8."""
    dec = codecs.getincrementaldecoder("utf-8")("strict")
    done, lines = 0, 1
    with open(path, "rb") as f:
        while True:
            block = f.read(READ_BYTES)
            pending = len(dec.getstate()[0])
            try:
                text = dec.decode(block, final=not block)
            except UnicodeDecodeError as e:
                at = done - pending + e.start
                line = lines + e.object[:e.start].count(b"\n")
                raise BadInput(f"{path}:{line}: not UTF-8 (byte {at + 1} of the file is 0x{e.object[e.start]:02x}): "
                               f"give text files or JSONL")
            done += len(block)
            lines += text.count("\n")
            if text:
                yield text
            if not block:
                return


def cut(buf, i):
    """Where the piece starting at buf[i] ends (len(buf) - i >= PIECE_MAX): the top comment's rule."""
    m = SPACE_CUT.search(buf, i + PIECE_CHARS, i + PIECE_MAX)
    if not m:
        m = LINE_CUT.search(buf, i + PIECE_CHARS, i + PIECE_MAX)
    return m.start() if m else i + PIECE_MAX


def pieces(blocks):
    """(line offset, text) of a document in pieces of at most PIECE_MAX characters; "" for none."""
    rest, line = "", 0
    for block in blocks:
        buf = rest + block if rest else block
        i = 0
        while len(buf) - i >= PIECE_MAX:
            k = cut(buf, i)
            yield line, buf[i:k]
            line += buf.count("\n", i, k)
            i = k
        rest = buf[i:]
    yield line, rest


class QuietStderr:
    """fd 2 into a temporary file while the tokenizer runs: a panic in its Rust code (an Onig regex
    over its retry limit, say) prints its own message and a backtrace there, and this script says
    what failed instead. Anything else written there is passed on."""

    def __init__(self):
        self.f = tempfile.TemporaryFile()

    def __enter__(self):
        sys.stderr.flush()
        os.dup2(self.f.fileno(), 2)

    def __exit__(self, kind, e, tb):
        loud()
        self.f.seek(0)
        text = self.f.read()
        self.f.seek(0)
        self.f.truncate()
        if text and kind is None:
            sys.stderr.buffer.write(text)
            sys.stderr.flush()


def tokenizer_failed(e):
    """An exception of the tokenizers package on a document (its PanicException is a BaseException)."""
    return not isinstance(e, (KeyboardInterrupt, SystemExit, Signalled, MemoryError, BadInput))


def encode(a, tok, vocab):
    """(document index, ids) for every piece of every document in order, (document index, None)
    before a document's first. Encodes BATCH_CHARS at a time; a document the tokenizer fails on is
    a BadInput naming it."""
    run = tok.encode_batch_fast if hasattr(tok, "encode_batch_fast") else tok.encode_batch
    quiet = QuietStderr()
    batch, where, size = [], [], 0

    def flush():
        try:
            with quiet:
                out = run(batch, add_special_tokens=False)
        except BaseException as e:
            if not tokenizer_failed(e):
                raise
            for text, (path, line, _, _) in zip(batch, where):   # which piece: one at a time
                try:
                    with quiet:
                        run([text], add_special_tokens=False)
                except BaseException as e1:
                    if not tokenizer_failed(e1):
                        raise
                    msg = (str(e1).splitlines() or [type(e1).__name__])[0]
                    raise BadInput(f"{path}:{line}: the tokenizer {a.tokenizer} fails on this document ({msg})")
            raise
        for enc, (path, line, doc, first) in zip(out, where):
            ids = enc.ids
            if ids and max(ids) >= vocab:
                raise BadInput(f"{path}:{line}: the tokenizer {a.tokenizer} gave token id {max(ids)}, beyond its "
                               f"vocabulary (largest id + 1 = {vocab})")
            if first:
                yield doc, None
            yield doc, ids
        batch.clear()
        where.clear()

    for doc, (path, line0, blocks) in enumerate(documents(a)):
        first = True
        for dl, text in pieces(blocks):
            if not text and not first:
                continue
            batch.append(text)
            where.append((path, line0 + dl, doc, first))
            first = False
            size += len(text)
            if size >= BATCH_CHARS or len(batch) >= 1024:
                yield from flush()
                size = 0
    yield from flush()


class ShardWriter:
    """Shards PREFIX-NNNNN.bin of up to `per` tokens each, in folder, written as the tokens come
    (the header, with the count, last)."""

    def __init__(self, folder, prefix, per, width, fields):
        self.folder, self.prefix, self.per, self.width, self.fields = folder, prefix, per, width, fields
        self.code = "H" if width == 2 else "I"
        assert array.array(self.code).itemsize == width and sys.byteorder == "little"
        self.f, self.count, self.names, self.tokens = None, 0, [], 0

    def add(self, ids):
        toks = array.array(self.code, ids)     # every id < the vocabulary, which the width holds
        pos = 0
        while pos < len(toks):
            if self.f is None:
                name = f"{self.prefix}-{len(self.names):05d}.bin"
                self.f = open(os.path.join(self.folder, name), "wb")
                self.f.write(bytes(1024))
                self.names.append(name)
            k = min(len(toks) - pos, self.per - self.count)
            toks[pos:pos + k].tofile(self.f)
            self.count += k
            pos += k
            if self.count == self.per:
                self.finish()

    def finish(self):
        h = [0] * 256
        h[0], h[1], h[2] = (MAGIC_U16, 1, self.count) if self.width == 2 else (MAGIC_U32, 7, self.count)
        for k, v in self.fields.items():
            h[k] = v
        self.f.seek(0)
        self.f.write(struct.pack("<256i", *h))
        self.f.close()
        self.f = None
        self.tokens += self.count
        self.count = 0

    def close(self):
        if self.f is not None:
            self.finish()


def header_fields(name, digest, vocab, width, eot):
    f = {EXT_TAG: EXT_MAGIC, EXT_VERSION: 1, EXT_VOCAB: vocab, EXT_WIDTH: width, EXT_EOT: eot}
    lo, hi = struct.unpack("<ii", digest[:8])
    f[EXT_HASH], f[EXT_HASH + 1] = lo, hi
    raw = name.encode("utf-8").ljust(EXT_NAME_BYTES, b"\0")
    for i, w in enumerate(struct.unpack(f"<{EXT_NAME_BYTES // 4}i", raw)):
        f[EXT_NAME + i] = w
    return f


def default_name(tokenizer):
    """The tokenizer's folder's name (for a tokenizer.json) or its file's, as the header can hold
    it: not UTF-8 bytes and control characters as '?', cut at a character's end."""
    path = os.path.realpath(tokenizer)
    name = (os.path.basename(os.path.dirname(path)) if os.path.basename(tokenizer) == "tokenizer.json"
            else os.path.splitext(os.path.basename(path))[0])
    name = CONTROL.sub("?", name) or "tokenizer"
    return name.encode("utf-8")[:EXT_NAME_BYTES - 1].decode("utf-8", "ignore")


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


def load_tokenizer(a):
    """The tokenizer, its SHA-256, its vocabulary (largest id + 1) and width."""
    tokenizers = import_tokenizers()
    try:
        with QuietStderr():
            tok = tokenizers.Tokenizer.from_file(a.tokenizer)
    except BaseException as e:   # the package's own error types vary with its version; a panic too
        if not tokenizer_failed(e):
            raise
        msg = (str(e).splitlines() or [type(e).__name__])[0]
        raise BadInput(f"--tokenizer {a.tokenizer}: not a Hugging Face tokenizer.json ({msg})")
    with open(a.tokenizer, "rb") as f:
        digest = hashlib.sha256(f.read()).digest()
    ids = tok.get_vocab(with_added_tokens=True).values()
    if not ids:
        raise BadInput(f"--tokenizer {a.tokenizer}: a vocabulary of no tokens")
    vocab = max(ids) + 1
    if vocab > VOCAB_MAX:
        raise BadInput(f"--tokenizer {a.tokenizer}: token id {vocab - 1}, more than a shard holds ({VOCAB_MAX - 1})")
    if a.width == "uint16" and vocab > 65536:
        raise BadInput(f"--width uint16: the largest token id of {a.tokenizer} is {vocab - 1}, more than 65535")
    width = 2 if a.width == "uint16" or (a.width == "auto" and vocab <= 65536) else 4
    return tok, digest, vocab, len(ids), width


def on_signal(signum, frame):
    raise Signalled(signum)


def run(a):
    check_paths(a)
    tok, digest, vocab, ntokens, width = load_tokenizer(a)
    eot_name, eot = find_eot(tok, a)
    name = a.name or default_name(a.tokenizer)
    fields = header_fields(name, digest, vocab, width, eot)

    out = os.path.realpath(a.out)
    remove_stale(out)
    tmp = f"{out}.tmp-{os.getpid()}"
    os.makedirs(tmp)
    try:
        with open(os.path.join(tmp, MARKER), "w") as f:
            f.write(marker_text(out, os.getpid()))
        train = ShardWriter(tmp, "train", a.shard_tokens, width, fields)
        val = ShardWriter(tmp, "val", a.shard_tokens, width, fields)
        ndocs = nval = 0
        sink = train
        for doc, ids in encode(a, tok, vocab):
            if ids is None:      # a document starts: its end-of-text token, and where it goes
                to_val = a.val_fraction > 0 and int((doc + 1) * a.val_fraction) != int(doc * a.val_fraction)
                sink = val if to_val else train
                nval += to_val
                ndocs += 1
                sink.add([eot])
            else:
                sink.add(ids)
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
        os.remove(os.path.join(tmp, MARKER))
        # into place: an old DIR (proved ours by check_paths) moved aside first, removed last; no
        # signal from here on (a signal now would leave DIR half replaced; it is done in a moment)
        signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)
        old = None
        if os.path.isdir(out):
            old = f"{out}.old-{os.getpid()}"
            os.rename(out, old)
        os.rename(tmp, out)
        if old:
            shutil.rmtree(old)
    except BaseException:
        signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    kind = "uint16" if width == 2 else "uint32"
    sparse = f"; its largest id + 1, of {ntokens} tokens" if ntokens != vocab else ""
    print(shown(f"wpgen data: {ndocs} documents ({nval} held out) into {a.out}: {train.tokens} tokens in "
                f"{len(train.names)} train shards, {val.tokens} in {len(val.names)} val shards; {kind} tokens, "
                f"tokenizer {name} {digest[:8].hex()} (vocabulary {vocab}{sparse}, end of text {eot_name} = {eot})"))


def main(argv):
    for s in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, on_signal)
    try:
        run(parse_args(argv))
    except BadInput as e:
        fail(2, str(e))
    except OSError as e:
        fail(1, f"{e.filename or ''}: {e.strerror or e}")
    except KeyboardInterrupt:
        fail(1, "interrupted; nothing was written")
    except Signalled as e:
        # said, then killed by it as the sender meant (the exit status says which signal)
        say(f"killed by {signal.Signals(e.signum).name}; nothing was written")
        sys.stderr.flush()
        signal.signal(e.signum, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {e.signum})
        os.kill(os.getpid(), e.signum)
        sys.exit(1)


if __name__ == "__main__":
    main(sys.argv[1:])
