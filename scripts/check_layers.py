#!/usr/bin/env python3
"""The layers of the source tree, checked against its #include lines (make test runs it through
tests/cli/test_layers.sh; docs/architecture.md draws the same order).

Each folder of generator/ and of runtime/ is a stage; a stage includes only the stages below it in
LAYERS (and itself). What the generator may take from the runtime is RUNTIME_FOR_GENERATOR: the
model's shape and presets, the step's interface and shared helpers (runtime/common), and the
checkpoint reader that `wpgen export` links (runtime/train/checkpoint.h, safetensors.h), and the
trainers' flag parser that `wpgen run` checks a run file's training keys with (trainflags.h). Inside
a folder, no two modules (x.c with x.h) need each other, directly or round a longer circle: a .c
file does not include the header of a module whose .c file includes its own (a header may
include another's for its types). Prints every include against the order and every circle, and
exits 1 if there is one; 0 and one line of figures otherwise.

usage: scripts/check_layers.py [ROOT]   (the repository's root; default: this script's parent's)
"""
import os
import re
import sys

# bottom first: a folder may include the folders before it in its list
LAYERS = {
    'generator': ['util', 'input', 'ir', 'verify', 'place', 'cost', 'lua', 'plan', 'sim', 'search',
                  'emit', 'calibrate', 'export', 'cli'],
    'runtime': ['common', 'train', 'cpu', 'cuda', 'hostmpi', 'mpi', 'nccl', 'ref'],
}
# runtime headers a generator file may include (folder/ for a whole folder)
RUNTIME_FOR_GENERATOR = ['common/', 'train/checkpoint.h', 'train/safetensors.h', 'train/trainflags.h']
SOURCES = ('.c', '.h', '.cu', '.cuh')
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def includes(path):
    with open(path, encoding='utf-8', errors='replace') as f:
        return INCLUDE.findall(f.read())


def check(root):
    bad = []
    nfiles = nedges = 0
    for top, order in LAYERS.items():
        rank = {d: i for i, d in enumerate(order)}
        base = os.path.join(root, top)
        present = sorted(d for d in os.listdir(base) if os.path.isdir(os.path.join(base, d)))
        for d in present:
            if d not in rank:
                bad.append(f'{top}/{d}: a folder the layers do not place (scripts/check_layers.py, LAYERS)')
        # module graph inside each folder: stem -> stems whose headers its .c file includes
        modules = {}
        for d in present:
            for name in sorted(os.listdir(os.path.join(base, d))):
                if not name.endswith(SOURCES):
                    continue
                path = os.path.join(base, d, name)
                rel = f'{top}/{d}/{name}'
                nfiles += 1
                stem = os.path.splitext(name)[0]
                for inc in includes(path):
                    if '/' not in inc:
                        continue   # a header beside it, or a system one
                    folder, header = inc.split('/', 1)
                    nedges += 1
                    if top == 'generator' and folder in LAYERS['runtime'] and folder not in LAYERS['generator']:
                        if not any(inc == r or (r.endswith('/') and inc.startswith(r)) for r in RUNTIME_FOR_GENERATOR):
                            bad.append(f'{rel}: includes runtime/{inc}, which the generator may not '
                                       f'(it may include {", ".join("runtime/" + r for r in RUNTIME_FOR_GENERATOR)})')
                        continue
                    if folder == d:
                        other = os.path.splitext(header)[0]
                        if other != stem and name.endswith(('.c', '.cu')):
                            modules.setdefault((d, stem), set()).add((d, other))
                        continue
                    if folder not in rank:
                        continue   # not one of this half's folders (tests/, a library)
                    if d in rank and rank[folder] > rank[d]:
                        bad.append(f'{rel}: includes {inc}: {top}/{folder} is above {top}/{d} '
                                   f'(the order, bottom first: {" ".join(order)})')
        # circles among a folder's modules
        state = {}

        def visit(m, stack):
            state[m] = 1
            stack.append(m)
            for n in sorted(modules.get(m, ())):
                if state.get(n) == 1:
                    circle = stack[stack.index(n):] + [n]
                    bad.append(f'{top}/{m[0]}: modules include each other: ' + ' -> '.join(s for _, s in circle))
                elif not state.get(n):
                    visit(n, stack)
            stack.pop()
            state[m] = 2

        for m in sorted(modules):
            if not state.get(m):
                visit(m, [])
    return bad, nfiles, nedges


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    bad, nfiles, nedges = check(root)
    for b in bad:
        print(f'check_layers: {b}')
    if bad:
        print(f'check_layers: {len(bad)} against the layers')
        return 1
    print(f'check_layers: {nfiles} files, {nedges} includes between folders or modules, none against the layers '
          f'(generator: {" < ".join(LAYERS["generator"])}; runtime: {" < ".join(LAYERS["runtime"])})')
    return 0


if __name__ == '__main__':
    sys.exit(main())
