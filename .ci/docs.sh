#!/usr/bin/env bash
# CI: the house's written promises. README.md is at most 300 lines; no
# tracked file points at a design document outside the repository;
# docs/architecture.md's package table names every Go package of the
# module and nothing else; every relative link in README.md, CHANGELOG.md
# and docs/ leads to a file (and heading) that exists; every decision
# record has its four sections, its Status line's links have their
# reverse links, and docs/adr/README.md's index lists it.
set -euo pipefail
cd "$(dirname "$0")/.."
fail=0
say() { echo "docs.sh: $*"; fail=1; }

lines=$(wc -l < README.md)
[ "$lines" -le 300 ] || say "README.md has $lines lines; keep it at most 300 (details go to docs/)"

if out=$(git grep -n -I -E 'DESIGN(\.md| ?§)|\.\./shared' -- ':!.ci/docs.sh'); then
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
python3 - <<'PY' || fail=1
# The decision records (docs/adr/README.md says why): the sections in
# order, a Status line of the one vocabulary, each relation linked from
# both pages, and every page in the index.
import glob, os, re, sys
bad = 0
def say(msg):
    global bad
    print(f'docs.sh: {msg}'); bad += 1
sections = ['Context', 'Decision', 'Alternatives considered', 'Consequences']
reverse = {'Amends': 'Amended by', 'Amended by': 'Amends',
           'Supersedes': 'Superseded by', 'Superseded by': 'Supersedes'}
grammar = re.compile(r'Status: (accepted|superseded)\.'
                     r'( (Amends|Amended by|Supersedes|Superseded by) @\d{4}@((, @\d{4}@)* and @\d{4}@)?\.)*')
pages, relations = {}, {}
for path in sorted(glob.glob('docs/adr/[0-9][0-9][0-9][0-9]-*.md')):
    name = os.path.basename(path)
    num = name[:4]
    text = open(path).read()
    pages[num] = name
    heads = [h for h in re.findall(r'^## (.+)$', text, flags=re.M) if h in sections]
    if heads != sections:
        say(f'{path}: its sections are {heads}; a decision record has ## '
            + ', ## '.join(sections) + ' in this order (docs/adr/README.md)')
    m = re.search(r'^Status:.*?(?=\n\s*\n)', text, flags=re.M | re.S)
    if not m:
        say(f'{path}: no Status line; begin it "Status: accepted."'); continue
    line = ' '.join(m.group(0).split())
    line = re.sub(r'\[[^\]]*\]\((\d{4})-[^)\s]*\.md\)', r'@\1@', line)
    while True:  # drop what each link says changed, nested parentheses too
        shorter = re.sub(r'\s*\([^()]*\)', '', line)
        if shorter == line:
            break
        line = shorter
    if not grammar.fullmatch(line):
        say(f'{path}: its Status line reads "{line}" once links are @NNNN@ and parentheses dropped; '
            'write "Status: accepted." then sentences "Amends [NNNN](…) (what)." or '
            '"Amended by", "Supersedes", "Superseded by" (docs/adr/README.md)')
        continue
    if 'Superseded by' in line and not line.startswith('Status: superseded.'):
        say(f'{path}: it is superseded by another page; begin its Status line "Status: superseded."')
    for word, links in re.findall(r'(Amends|Amended by|Supersedes|Superseded by) ((?:@\d{4}@|, | and )+)', line):
        for other in re.findall(r'@(\d{4})@', links):
            relations.setdefault(num, set()).add((word, other))
for num, rels in sorted(relations.items()):
    for word, other in sorted(rels):
        if other not in pages:
            say(f'docs/adr/{pages[num]}: "{word} {other}" names no page docs/adr/{other}-*.md')
        elif (reverse[word], num) not in relations.get(other, set()):
            say(f'docs/adr/{pages[num]}: it says "{word} [{other}]" but docs/adr/{pages[other]} '
                f'does not say "{reverse[word]} [{num}]({pages[num]})" in its Status line')
index = open('docs/adr/README.md').read()
for num, name in sorted(pages.items()):
    if f']({name})' not in index:
        say(f'docs/adr/README.md: its index has no row for [{num}]({name})')
sys.exit(1 if bad else 0)
PY
[ "$fail" = 0 ] && echo "docs.sh: README, docs, decision records and package table are consistent"
exit "$fail"
