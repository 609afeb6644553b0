#!/usr/bin/env bash
# Proves the README's two commands work on a fresh checkout with empty caches:
# clones HEAD into a temporary directory, points HOME at an empty one (so ~/.cache,
# ~/.config, uv's and pip's caches and stackmatrix's work directory all start empty),
# then runs exactly the two commands of the README's "Set-up and the two commands"
# block, one after the other, and prints each one's wall time and exit code.
#
#   bash scripts/fresh-check.sh [--warm] [--keep]
#
# --warm runs both commands a second time in the same clone and HOME (caches now warm)
# and prints those times too. --keep leaves the clone, the HOME and the logs in place.
# Exits 0 when every command passed, 1 when one failed, 2 on bad usage. The main job
# also fails the check when a cell failed (`stackmatrix run` exits 0 then: the CPU
# spec's policy fails only on errors, but on a fresh machine every cell must work).
# What lives outside HOME is the machine's and stays as it is: the system packages and
# the Docker engine that scripts/setup-host.sh installs and starts (the engine's image
# count is printed, so a warm engine is visible in the result).
set -uo pipefail

keep=0
passes=(cold)
for arg in "$@"; do
    case $arg in
        --keep) keep=1 ;;
        --warm) passes=(cold warm) ;;
        -h | --help)
            sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'
            exit 0
            ;;
        *)
            echo "fresh-check: unknown argument $arg (see --help)" >&2
            exit 2
            ;;
    esac
done

repo=$(git -C "$(dirname "$0")/.." rev-parse --show-toplevel) || exit 2
readme=$repo/README.md

# The commands are read from the README's own block, so this checks what it says.
mapfile -t commands < <(
    awk '/^## Set-up and the two commands/ { s = 1; next }
         s && /^```sh/ { b = 1; next }
         b && /^```/ { exit }
         b && NF && $1 !~ /^#/ { print }' "$readme"
)
if ((${#commands[@]} != 2)); then
    echo "fresh-check: expected 2 commands in $readme's set-up block, found ${#commands[@]}:" >&2
    printf '  %s\n' "${commands[@]}" >&2
    exit 2
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/stackmatrix-fresh.XXXXXX") || exit 2
cleanup() {
    if ((keep)); then
        echo "fresh-check: kept $tmp (clone/, home/, logs/)"
    else
        rm -rf "$tmp"
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

head=$(git -C "$repo" rev-parse HEAD)
if ! git clone --quiet "$repo" "$tmp/clone" ||
    ! git -C "$tmp/clone" checkout --quiet --detach "$head"; then
    echo "fresh-check: cannot clone $repo at $head" >&2
    exit 2
fi
mkdir -p "$tmp/home" "$tmp/logs"

# pyenv's shims find their root through HOME unless PYENV_ROOT says where it is
if [[ -z ${PYENV_ROOT:-} && -d $HOME/.pyenv ]]; then
    export PYENV_ROOT=$HOME/.pyenv
fi
export HOME=$tmp/home
# every cache and configuration location that would otherwise point at a warm one
unset XDG_CACHE_HOME XDG_CONFIG_HOME XDG_DATA_HOME XDG_STATE_HOME
unset UV_CACHE_DIR PIP_CACHE_DIR STACKMATRIX_WORK_DIR NOX_ENVDIR VIRTUAL_ENV

if docker info >/dev/null 2>&1; then
    engine="a Docker engine was running with $(docker images -q | wc -l) image(s)"
else
    engine="no Docker engine was running"
fi
echo "fresh-check: clone of $head in $tmp/clone, HOME=$HOME (empty); $engine"

names=("main job" "tests")
results=()  # "pass name seconds exit log" per command run
for pass in "${passes[@]}"; do
    for i in 0 1; do
        log=$tmp/logs/$pass-$((i + 1)).log
        echo "fresh-check: [$pass, ${names[i]}] \$ ${commands[i]}"
        start=$(date +%s%N)
        (cd "$tmp/clone" && bash -c "${commands[i]}") 2>&1 | tee "$log"
        code=${PIPESTATUS[0]}
        results+=("$pass|${names[i]}|$((($(date +%s%N) - start) / 1000000000))|$code|$log")
    done
done

echo
echo "fresh-check: HEAD $head, HOME empty at the start; $engine"
failed=0
for result in "${results[@]}"; do
    IFS='|' read -r pass name seconds code log <<<"$result"
    command=${commands[0]}
    [[ $name == tests ]] && command=${commands[1]}
    printf 'fresh-check: %-4s %-8s %5d s  exit %s  $ %s\n' "$pass" "$name" "$seconds" "$code" "$command"
    summary=$(grep -E '^=+ .*(passed|failed|error).* in [0-9.]+s' "$log" | tail -n 1)
    [[ -n $summary ]] && echo "fresh-check:                 pytest: $summary"
    ((code == 0)) || failed=1
    # the cells' phases as `stackmatrix run` lists them after "results:"
    while read -r cell_line; do
        echo "fresh-check:                 cell: $cell_line"
        [[ $cell_line == *=failed* ]] && failed=1
    done < <(grep -E '^  [A-Za-z0-9][A-Za-z0-9._-]* +build=' "$log")
done
if ((failed)); then
    echo "fresh-check: FAIL"
    exit 1
fi
echo "fresh-check: PASS"
