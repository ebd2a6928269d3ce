#!/usr/bin/env bash
# CI: runs the shell examples of docs/features/*.md as a reader would, and
# checks what they print. The conventions (docs/development.md):
#
#   ```sh          runs: a page's sh blocks, in order, are one bash script
#                  (set -euo pipefail), in a directory of its own, against a
#                  node this script starts as the README's walk-through does
#                  (`hookline serve --allow-private-targets` on the default
#                  ports; HOOKLINE_ADMIN_TOKEN the admin token, HOOKLINE_TOKEN
#                  an API key of the tenant acme). A page that says
#                  <!-- examples: own node --> starts its node itself; one
#                  that says <!-- examples: postgres --> gets DATABASE_URL, a
#                  schema of its own in HOOKLINE_POSTGRES_URL's database.
#   <!-- expect: REGEX -->
#                  after an sh block: within 30 s, a line of what the page
#                  printed since the block began (its background processes
#                  included) matches the extended regular expression.
#   <!-- not run: REASON -->
#                  before an sh or console block: it is not run, and this
#                  script prints the reason. A console block must have one.
#   ```text        output, requests and formats: never run, and holding no
#                  command (a line starting with hookline, curl, … fails).
#
# Background processes a page starts are stopped when it ends. One page's
# failure does not stop the others; the script fails if any failed.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
work=$(cd "$(mktemp -d)" && pwd -P)
trap 'cd /; rm -rf "$work"' EXIT

# Lint every page (and the README's unrun blocks), and write one script per
# feature page.
mkdir -p "$work/pages"
lint=0
python3 - "$work/pages" <<'PY' || lint=1
import glob, os, re, shlex, sys
out = sys.argv[1]
command = re.compile(r'^\s*(\$ )?(hookline|curl|nats|rabbitmqadmin|openssl|export) ')
marker = re.compile(r'^<!-- (expect|not run|examples): (.*) -->$')
bad = 0
for path in ['README.md'] + sorted(glob.glob('docs/features/*.md')):
    lines = open(path).read().split('\n')
    script, own = [], False
    i, n = 0, 0
    while i < len(lines):
        line = lines[i]
        m = marker.match(line)
        if m and m.group(1) == 'examples':
            own = own or m.group(2) == 'own node'
            if m.group(2) == 'postgres':
                open(os.path.join(out, os.path.basename(path)[:-3] + '.pg'), 'w').close()
        fence = re.match(r'^```(\S*)', line)
        if not fence:
            i += 1
            continue
        lang, start = fence.group(1), i + 1
        j = i + 1
        while j < len(lines) and not lines[j].startswith('```'):
            j += 1
        body = lines[i + 1:j]
        k = i - 1
        while k >= 0 and lines[k].strip() == '':
            k -= 1
        before = marker.match(lines[k]) if k >= 0 else None
        skip = before.group(2) if before and before.group(1) == 'not run' else None
        expects, k = [], j + 1
        while k < len(lines) and (lines[k].strip() == '' or marker.match(lines[k])):
            m = marker.match(lines[k])
            if m and m.group(1) == 'expect':
                expects.append(m.group(2))
            k += 1
        where = f'{path}:{start}'
        if lang == 'text':
            for b in body:
                if command.match(b):
                    print(f'examples.sh: {where}: a command in a text block: make it an sh block, or a console block marked <!-- not run: why -->:\n  {b}')
                    bad += 1
        if lang == 'console' and skip is None:
            print(f'examples.sh: {where}: a console block without <!-- not run: REASON -->: make it an sh block that runs, or say why it cannot')
            bad += 1
        if expects and lang != 'sh':
            print(f'examples.sh: {where}: <!-- expect: --> after a {lang or "plain"} block, which does not run')
            bad += 1
        if path != 'README.md' and lang in ('sh', 'console'):
            n += 1
            if skip is not None:
                script.append(f'__skip {shlex.quote(where)} {shlex.quote(skip)}')
            elif lang == 'sh':
                script.append(f'__begin {n} {shlex.quote(where)}')
                script.append('{')
                script.extend(body)
                script.append(f'}} >>"$__out/{n}" 2>&1 </dev/null')
                script.append(f'__end {n}')
                script.extend(f'__expect {shlex.quote(e)}' for e in expects)
        i = j + 1
    if path != 'README.md' and script:
        name = os.path.basename(path)[:-3]
        with open(os.path.join(out, name + '.sh'), 'w') as f:
            f.write('# ' + path + (' (own node)' if own else '') + '\n' + '\n'.join(script) + '\n')
        if own:
            open(os.path.join(out, name + '.own'), 'w').close()
sys.exit(1 if bad else 0)
PY

# The library every page script runs with: block boundaries, their output
# (shown once the block ends) and the expectations.
cat > "$work/lib.sh" <<'LIB'
declare -gA __mark
__where=""
__begin() {
  __n=$1 __where=$2
  local f
  __mark=()
  for f in "$__out"/*; do [ -e "$f" ] && __mark[$f]=$(stat -c %s "$f"); done
  echo "--- $__where"
  return 0
}
__end() { sed 's/^/    /' "$__out/$1"; __where="$__where (expectations)"; }
# __since prints what every output file got since the block began.
__since() {
  local f
  for f in "$__out"/*; do [ -e "$f" ] && tail -c +$(( ${__mark[$f]:-0} + 1 )) "$f"; done
  return 0
}
__expect() {
  local i
  for i in $(seq 1 150); do
    if __since | grep -Eq -- "$1"; then echo "    ok: $1"; return 0; fi
    sleep 0.2
  done
  echo "examples.sh: ${__where% (expectations)}: nothing it printed matched: $1"
  echo "what it printed:"; __since | sed 's/^/    /'
  exit 1
}
__skip() { echo "examples.sh: $1 not run: $2"; }
trap 'rc=$?; if [ $rc -ne 0 ] && [ -n "$__where" ] && [ "${__where% (expectations)}" = "$__where" ]; then echo "examples.sh: $__where failed (exit $rc); its output:"; sed "s/^/    /" "$__out/$__n"; fi' EXIT
LIB

go build -o "$work/bin/hookline" ./cmd/hookline
export PATH="$work/bin:$PATH"
unset HOOKLINE_TOKEN HOOKLINE_ADDR HOOKLINE_CA

# left prints the processes that run in $1: what a page started.
left() {
  local p
  for p in /proc/[0-9]*; do
    [ "$(readlink "$p/cwd" 2>/dev/null)" = "$1" ] && echo "${p#/proc/}"
  done
  return 0
}
# stop ends what runs in $1, and waits (a node stopping still writes).
stop() {
  local pids
  pids=$(left "$1")
  [ -z "$pids" ] || kill $pids 2>/dev/null || true
  for _ in $(seq 1 100); do
    [ -n "$(left "$1")" ] || return 0
    sleep 0.1
  done
  pids=$(left "$1")
  [ -z "$pids" ] || kill -9 $pids 2>/dev/null || true
}

failed=() ran=0 skipped=0
for page in "$work"/pages/*.sh; do
  name=$(basename "$page" .sh)
  dir="$work/run/$name"
  mkdir -p "$dir/.out"
  echo
  echo "=== docs/features/$name.md"
  (
    cd "$dir"
    export HOOKLINE_ADMIN_TOKEN
    HOOKLINE_ADMIN_TOKEN=$(openssl rand -hex 24)
    if [ -e "$work/pages/$name.pg" ]; then
      [ -n "${HOOKLINE_POSTGRES_URL:-}" ] || { echo "examples.sh: $name.md needs PostgreSQL: eval \"\$(.ci/postgres.sh)\""; exit 1; }
      schema="examples_${name//-/_}_$$"
      psql -q "$HOOKLINE_POSTGRES_URL" -c "CREATE SCHEMA $schema"
      export DATABASE_URL="$HOOKLINE_POSTGRES_URL&options=-csearch_path%3D$schema"
    fi
    if [ ! -e "$work/pages/$name.own" ]; then
      hookline serve --data ./node --allow-private-targets >.out/node.log 2>&1 &
      curl -s -o /dev/null --retry 30 --retry-delay 1 --retry-connrefused http://127.0.0.1:8080/healthz
      HOOKLINE_TOKEN=$HOOKLINE_ADMIN_TOKEN hookline tenants create --id acme --name "Acme Inc" >/dev/null
      export HOOKLINE_TOKEN
      HOOKLINE_TOKEN=$(HOOKLINE_TOKEN=$HOOKLINE_ADMIN_TOKEN hookline keys issue --tenant acme --name docs --quiet)
    fi
    __out="$dir/.out" timeout 300 bash -c 'set -euo pipefail; source "$1"; source "$2"' page "$work/lib.sh" "$page"
  ) || failed+=("docs/features/$name.md")
  ran=$((ran + $(grep -c '^__begin ' "$page" || true)))
  skipped=$((skipped + $(grep -c '^__skip ' "$page" || true)))
  stop "$dir"
  [ -n "$(left "$dir")" ] && echo "examples.sh: docs/features/$name.md left processes running"
  if [ -e "$work/pages/$name.pg" ] && [ -n "${HOOKLINE_POSTGRES_URL:-}" ]; then
    psql -q "$HOOKLINE_POSTGRES_URL" -c "DROP SCHEMA IF EXISTS examples_${name//-/_}_$$ CASCADE" || true
  fi
done
echo
echo "examples.sh: $ran sh blocks run, $skipped not run (reasons above), $(ls "$work"/pages/*.sh | wc -l) pages"
if [ ${#failed[@]} -gt 0 ] || [ $lint = 1 ]; then
  [ ${#failed[@]} -eq 0 ] || echo "examples.sh: failed: ${failed[*]}"
  [ $lint = 0 ] || echo "examples.sh: blocks that break the conventions (above)"
  exit 1
fi
