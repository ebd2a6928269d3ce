#!/usr/bin/env bash
# CI: the house's written promises. README.md is at most 300 lines; no
# tracked file points at a design document outside the repository;
# docs/architecture.md's package table names every Go package of the
# module and nothing else; every relative link in README.md, CHANGELOG.md
# and docs/ leads to a file (and heading) that exists.
set -euo pipefail
cd "$(dirname "$0")/.."
fail=0
say() { echo "docs.sh: $*"; fail=1; }

lines=$(wc -l < README.md)
[ "$lines" -le 300 ] || say "README.md has $lines lines; keep it at most 300 (details go to docs/)"

if out=$(git grep -n -I -E 'DESIGN\.md|\.\./shared' -- ':!.ci/docs.sh'); then
  say "files refer to a design document outside the repository:"; echo "$out"
fi

mod=$(go list -m)
pkgs=$(go list -f '{{.ImportPath}}' ./... | sed "s#^$mod/##" | sort)
listed=$(sed -n '/^## Packages/,/^## /p' docs/architecture.md | grep -oE '^\| `[^`]+` \|' | sed -E 's/^\| `([^`]+)` \|$/\1/' | sort)
if missing=$(comm -23 <(echo "$pkgs") <(echo "$listed")) && [ -n "$missing" ]; then
  say "packages missing from docs/architecture.md's Packages table:"; echo "$missing"
fi
if extra=$(comm -13 <(echo "$pkgs") <(echo "$listed")) && [ -n "$extra" ]; then
  say "docs/architecture.md names packages that do not exist:"; echo "$extra"
fi

python3 - <<'PY' || fail=1
import glob, os, re, sys
files = ['README.md', 'CHANGELOG.md'] + glob.glob('docs/**/*.md', recursive=True)
def slugs(path):
    out, fence = set(), False
    for line in open(path).read().split('\n'):
        if line.startswith('```'):
            fence = not fence
            continue
        m = None if fence else re.match(r'#{1,6} (.*)', line)
        if m:
            s = re.sub(r'[^\w\- ]', '', m.group(1).strip().lower()).replace(' ', '-')
            base, n = s, 1
            while s in out:
                s, n = f'{base}-{n}', n + 1
            out.add(s)
    return out
bad = 0
for f in files:
    text = re.sub(r'```.*?```', '', open(f).read(), flags=re.S)
    text = re.sub(r'`[^`\n]*`', '', text)
    for target in re.findall(r'\]\(([^)\s]+)\)', text):
        if re.match(r'[a-z]+:', target):
            continue
        path, _, anchor = target.partition('#')
        dest = os.path.normpath(os.path.join(os.path.dirname(f), path)) if path else f
        if not os.path.exists(dest):
            print(f'docs.sh: {f}: link {target}: no such file'); bad += 1
        elif anchor and dest.endswith('.md') and anchor not in slugs(dest):
            print(f'docs.sh: {f}: link {target}: no such heading'); bad += 1
sys.exit(1 if bad else 0)
PY
[ "$fail" = 0 ] && echo "docs.sh: README, docs and package table are consistent"
exit "$fail"
