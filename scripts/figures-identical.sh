#!/usr/bin/env bash
# Are two psp binaries' figures the same? Runs `psp reproduce` with BEFORE,
# then with AFTER, each into the same temporary directory in turn (the
# markdown names its output paths), and compares every file written, byte
# for byte, except the fields that hold wall time: `wall_s` and
# `sim_requests_per_s` in the JSON of simulated points (the simulator's own
# speed, measured on the clock). Prints one line per file and exits 1 on any
# other difference (a file that differs, or one written by only one binary),
# 2 when a run fails.
#
#   scripts/figures-identical.sh BEFORE AFTER [FIGURE...] [--full] [--threads N]
#
# Default: every figure, `--quick` (about 4 minutes a binary on one core); `--full`
# runs the figures at their full length (hours). Run it from the repository
# root (some figures read docs/data/). KEEP=1 keeps the outputs.
set -euo pipefail

usage() {
    sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
    exit "${1:-0}"
}

[[ ${1:-} == -h || ${1:-} == --help ]] && usage
(($# >= 2)) || usage 2
before=$1 after=$2
shift 2
quick=(--quick)
threads=()
figures=()
while (($#)); do
    case $1 in
    --full) quick=() ;;
    --threads)
        (($# >= 2)) || usage 2
        threads=(--threads "$2")
        shift
        ;;
    --threads=*) threads=("$1") ;;
    -h | --help) usage ;;
    -*)
        echo "figures-identical: unknown option '$1'" >&2
        usage 2
        ;;
    *) figures+=("$1") ;;
    esac
    shift
done
for b in "$before" "$after"; do
    [[ -x $b ]] || {
        echo "figures-identical: '$b' is not an executable" >&2
        exit 2
    }
done

work=$(mktemp -d "${TMPDIR:-/tmp}/figures-identical.XXXXXX")
if [[ -z ${KEEP:-} ]]; then
    trap 'rm -rf "$work"' EXIT
else
    echo "outputs kept in $work" >&2
fi

# reproduce BINARY NAME: runs it into $work/out, then moves that to $work/NAME.
reproduce() {
    local started=$SECONDS
    rm -rf "$work/out"
    if ! "$1" reproduce ${figures[@]+"${figures[@]}"} ${quick[@]+"${quick[@]}"} \
        ${threads[@]+"${threads[@]}"} --out "$work/out" 2>"$work/$2.log" >/dev/null; then
        echo "figures-identical: $2 ($1) failed:" >&2
        tail -n 5 "$work/$2.log" >&2
        exit 2
    fi
    mv "$work/out" "$work/$2"
    echo "$2: $1 in $((SECONDS - started)) s" >&2
}
reproduce "$before" before
reproduce "$after" after

# A JSON file with its wall-time fields' values blanked.
without_wall_time() {
    sed -E 's/("(wall_s|sim_requests_per_s)": )[^,}]*/\1WALL/g' "$1"
}

status=0
identical=0
wall=0
differs=0
while IFS= read -r f; do
    a=$work/before/$f b=$work/after/$f
    if [[ ! -f $a ]]; then
        echo "DIFFERS (only after)             $f"
    elif [[ ! -f $b ]]; then
        echo "DIFFERS (only before)            $f"
    elif cmp -s "$a" "$b"; then
        echo "identical                        $f"
        identical=$((identical + 1))
        continue
    elif [[ $f == *.json ]] && cmp -s <(without_wall_time "$a") <(without_wall_time "$b"); then
        echo "differs only in wall time        $f"
        wall=$((wall + 1))
        continue
    else
        echo "DIFFERS                          $f"
    fi
    differs=$((differs + 1))
    status=1
done < <(cd "$work" && find before after -type f | cut -d/ -f2- | sort -u)
echo "$identical identical, $wall differ only in wall time, $differs differ" >&2
exit $status
