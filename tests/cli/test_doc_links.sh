#!/usr/bin/env bash
# The documentation's references hold: every relative link of README.md, docs/*.md and
# tests/README.md names a file that exists (from the page's folder), and every repository path
# they mention in the text (docs/X.md, tests/e2e/test_X.sh, runtime/.../X.c, ...) exists, so that
# a file moved or renamed, or a page rewritten, cannot leave a reader at a dead end.
set -uo pipefail
build=${1:-build}
cd "$(dirname "$0")/../.."
. tests/check.sh

python3 - README.md docs/*.md tests/README.md >"$tmp/out" 2>&1 <<'PY'
import os, re, sys
roots = ("docs", "tests", "scripts", "generator", "runtime", "templates", "schedules", "topologies")
path_re = re.compile(r"(?<![\w./-])((?:%s)/[\w./-]*\w\.(?:md|sh|c|h|py|lua|json|tpl|cu|mk))(?!\w)" % "|".join(roots))
bad = 0
for page in sys.argv[1:]:
    text = open(page, encoding="utf-8").read()
    here = os.path.dirname(page)
    for m in re.finditer(r"\]\(([^)\s]+)\)", text):
        target = m.group(1).split("#")[0]
        if not target or re.match(r"[a-z]+:", target):
            continue
        if not os.path.exists(os.path.join(here, target)):
            print(f"{page}: link ({m.group(1)}): no such file"); bad += 1
    for m in path_re.finditer(text):
        p = m.group(1)
        if "*" in p or "NAME" in p or "NNN" in p or p.startswith("tests/data/h200/s"):
            continue
        if not os.path.exists(p) and not os.path.exists(os.path.join(here, p)):
            print(f"{page}: mentions {p}: no such file"); bad += 1
sys.exit(1 if bad else 0)
PY
[ $? = 0 ] && ok || bad "$(cat "$tmp/out")"

echo "doc links: $pass passed, $fail failed"
[ "$fail" = 0 ]
