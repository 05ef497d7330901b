#!/usr/bin/env bash
# Run one benchmark against two commits of spherelab in the same session, alternating, so that a
# refactor's "no regression" is measured on the same machine in the same conditions.
#
#   benchmarks/tools/compare_commits.sh OLD_COMMIT ROUNDS BENCHMARK.py [ARGS...]   (BENCHMARK.py: its name only)
#
# The old commit is checked out into a temporary worktree and run with its own copy of the
# benchmark script (the API may differ); the working tree runs the current one. Output: each
# round's full output, labelled "old" / "new".
set -euo pipefail
old=$1; rounds=$2; bench=$3; shift 3
here=$(cd "$(dirname "$0")/../.." && pwd)
py=${PYTHON:-$here/.venv/bin/python}
# beside the repository, so that its benchmarks find ../shared/data as the current ones do
tree="$here/../.spherelab-old-$$"
trap 'git -C "$here" worktree remove --force "$tree" >/dev/null 2>&1 || true' EXIT
git -C "$here" worktree add --detach -f "$tree" "$old" >/dev/null 2>&1
# a script by its name: benchmarks/NAME (before the split into paper/, speed/, tools/) or
# benchmarks/*/NAME, in each tree
locate() { if [ -f "$1/benchmarks/$bench" ]; then echo "benchmarks/$bench"; else
  (cd "$1" && ls benchmarks/*/"$bench" | head -n 1); fi; }
old_script=$(locate "$tree"); new_script=$(locate "$here")
echo "# compare_commits: old = $(git -C "$here" rev-parse --short "$old"), new = working tree ($(git -C "$here" rev-parse --short HEAD)), $rounds rounds of $bench $*"
for i in $(seq 1 "$rounds"); do
  echo "## round $i: old"
  (cd "$tree" && PYTHONPATH="$tree/lab" "$py" "$old_script" "$@")
  echo "## round $i: new"
  (cd "$here" && PYTHONPATH="$here/lab" "$py" "$new_script" "$@")
done
