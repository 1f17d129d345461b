"""Fuzzes wpgen data's reader (scripts/tokenize_data.py): a JSONL or text file of any bytes read,
cut into pieces and encoded by a byte-level tokenizer, as `wpgen data` does. Every input must end
in documents or a BadInput (the exit-2 line naming file and line); anything else, a traceback, is
a crash. Also checked: the pieces of a document are its text, in order, nothing lost or added;
every token id is below the vocabulary.

An input's first byte picks the kind (bit 0: JSONL, else text) and the sizes (bit 1: pieces of 8
to 32 characters and blocks of 16 bytes, so that the cutting and the block decoding are
exercised on small inputs); the rest is the file.

Run by `make fuzz` (target data, tests/fuzz/fuzz.mk) with libFuzzer's flags:
    python3 tests/fuzz/fuzz_data.py -max_total_time=60 -artifact_prefix=DIR/ CORPUS_DIR...
With atheris installed (pip install atheris) it is coverage-guided; without it, a seeded random
mutation of the corpus folders' inputs (-seed=N, -runs=N), every folder's inputs run first as
they are (WPGEN_FUZZ_PLAIN=1 picks it where atheris is installed: tests/e2e/test_data_hostile.sh
runs it so for a few hundred inputs, as a smoke test)."""
import hashlib
import os
import random
import sys
import tempfile
import time
import traceback
import types

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))

try:
    if os.environ.get("WPGEN_FUZZ_PLAIN"):   # the seeded mutation even where atheris is installed
        raise ImportError
    import atheris
except ImportError:
    atheris = None

if atheris:
    with atheris.instrument_imports():
        import tokenize_data as td
else:
    import tokenize_data as td

SIZES = {0: (td.READ_BYTES, td.PIECE_CHARS, td.PIECE_MAX, td.BATCH_CHARS), 1: (16, 8, 32, 64)}
tk = td.import_tokenizers()
alphabet = sorted(tk.pre_tokenizers.ByteLevel.alphabet())
TOK = tk.Tokenizer(tk.models.BPE(vocab={c: i for i, c in enumerate(alphabet)}, merges=[]))
TOK.pre_tokenizer = tk.pre_tokenizers.ByteLevel(add_prefix_space=False)
TOK.add_special_tokens(["<|endoftext|>"])
VOCAB = 257
WORK = tempfile.mkdtemp(prefix="fuzz_data-")


def one_input(data):
    if not data:
        return
    kind, body = data[0], data[1:]
    td.READ_BYTES, td.PIECE_CHARS, td.PIECE_MAX, td.BATCH_CHARS = SIZES[(kind >> 1) & 1]
    path = os.path.join(WORK, "in.jsonl" if kind & 1 else "in.txt")
    with open(path, "wb") as f:
        f.write(body)
    a = types.SimpleNamespace(inputs=[path], text_field="text", tokenizer="fuzz")
    try:
        docs = []
        for _, _, blocks in td.documents(a):
            whole = []
            docs.append("".join(t for _, t in td.pieces(_tee(blocks, whole))))
            assert docs[-1] == "".join(whole), "the pieces are not the document"
        if not kind & 1:
            assert docs == [body.decode("utf-8")], "a text file is not its one document"
        for _, ids in td.encode(a, TOK, VOCAB):
            assert ids is None or all(0 <= i < VOCAB for i in ids), "a token id beyond the vocabulary"
    except td.BadInput as e:
        msg = str(e)
        assert msg.startswith(path) and "Traceback" not in msg, msg   # names the file


def _tee(blocks, into):
    for b in blocks:
        into.append(b)
        yield b


def mutate(rng, data, corpus):
    data = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        op = rng.randrange(6)
        at = rng.randint(0, len(data))
        if op == 0 and data:
            data[rng.randrange(len(data))] = rng.randrange(256)
        elif op == 1:
            data[at:at] = rng.choice([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\\ud800", b"\\udc00", b"\\u0000", b"\n",
                                      b" ", b"  ", b'"', b"{", b"}", b"[", b'{"text":', b'"text"', b"\r\n", b"\x00",
                                      "é日本".encode(), b"1e999", b"[" * 2000])
        elif op == 2 and data:
            del data[at:at + rng.randint(1, 16)]
        elif op == 3:
            other = rng.choice(corpus)
            i = rng.randint(0, len(other))
            data[at:at] = other[i:i + rng.randint(1, 64)]
        elif op == 4 and data:
            data[0] = rng.randrange(256)
        elif op == 5 and len(data) < 4096:
            data += data[1:] * rng.randint(1, 3)
    return bytes(data)


def main(argv):
    flags = dict(x[1:].split("=", 1) for x in argv if x.startswith("-") and "=" in x)
    dirs = [x for x in argv if not x.startswith("-")]
    if atheris:
        atheris.Setup([sys.argv[0]] + argv, one_input)
        atheris.Fuzz()
        return
    seconds = float(flags.get("max_total_time", 60))
    runs = int(flags.get("runs", -1))
    rng = random.Random(int(flags.get("seed", time.time_ns())))
    corpus = [open(os.path.join(d, n), "rb").read() for d in dirs if os.path.isdir(d) for n in sorted(os.listdir(d))]
    corpus = corpus or [b"\x01{\"text\": \"a b\"}\n"]
    start, n = time.time(), 0
    queue = list(corpus)
    while (runs < 0 or n < runs) and time.time() - start < seconds:
        data = queue.pop(0) if queue else mutate(rng, rng.choice(corpus), corpus)
        try:
            one_input(data)
        except BaseException:
            name = flags.get("artifact_prefix", "") + "crash-" + hashlib.sha1(data).hexdigest()
            with open(name, "wb") as f:
                f.write(data)
            traceback.print_exc()
            print(f"fuzz_data: crash: the input is in {name}", file=sys.stderr)
            sys.exit(1)
        n += 1
    print(f"stat::number_of_executed_units: {n}", file=sys.stderr)
    print("stat::new_units_added: 0", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1:])
