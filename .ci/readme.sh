#!/usr/bin/env bash
# CI: runs the README's walk-through as a new user would. The ```sh blocks
# of README.md are extracted in order and run as one script from the root
# of a fresh copy of the committed tree (git archive HEAD), with a GOPATH of
# its own, so `go install ./cmd/hookline` and the rest run as written. It
# then checks what the walk-through promises: the published events were
# delivered, signed, to the receiver it started. Background processes the
# blocks start are stopped on exit, whatever happens.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
dir=$(cd "$(mktemp -d)" && pwd -P)
# left prints the processes that run in $dir: what the walk-through started
# in the background (they are started as plain `hookline`, found on PATH,
# so their command lines do not name $dir).
left() {
  local p
  for p in /proc/[0-9]*; do
    [ "$(readlink "$p/cwd" 2>/dev/null)" = "$dir" ] && echo "${p#/proc/}"
  done
  return 0
}
cleanup() {
  # Stop what the walk-through started, if still running, and wait for it
  # to end (a node stopping still writes to its data directory) before the
  # directory goes; then make sure.
  cd /
  local pids
  pids=$(left)
  [ -z "$pids" ] || kill $pids 2>/dev/null || true
  for _ in $(seq 1 100); do
    [ -n "$(left)" ] || break
    sleep 0.1
  done
  pids=$(left)
  [ -z "$pids" ] || kill -9 $pids 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT
git -C "$root" archive HEAD | tar -x -C "$dir"
awk '/^```sh$/{on=1; next} /^```/{if(on){on=0; print ""}; next} on{print}' "$dir/README.md" > "$dir/readme-blocks.sh"
# After the blocks, while the node still runs, check the promise: both
# deliveries succeeded (a first attempt that raced the receiver's start is
# retried within seconds). The blocks' last line stops the node, so the
# check runs before it.
last=$(grep -n '^kill ' "$dir/readme-blocks.sh" | tail -n 1 | cut -d: -f1)
{
  head -n $((last - 1)) "$dir/readme-blocks.sh"
  cat <<'CHECK'
for i in $(seq 1 60); do
  out=$(hookline deliveries list)
  [ "$(grep -c succeeded <<<"$out")" -ge 2 ] && break
  [ "$i" = 60 ] && { echo "readme.sh: the walk-through's deliveries did not succeed:"; echo "$out"; exit 1; }
  sleep 1
done
echo "readme.sh: the walk-through's deliveries succeeded"
CHECK
  tail -n +"$last" "$dir/readme-blocks.sh"
} > "$dir/readme.sh"
cd "$dir"
export GOPATH="$dir/gopath" GOMODCACHE="$(go env GOMODCACHE)" GOCACHE="$(go env GOCACHE)"
unset HOOKLINE_TOKEN HOOKLINE_ADDR
timeout 600 bash -euo pipefail readme.sh
echo "readme.sh: every sh block of README.md ran as written"
