#!/usr/bin/env bash
# Fig. 4's sweet spot (docs/darc-variant.md): DARC-static:k for k = 0..4 on
# extreme-bimodal, 14 workers, at several loads (fractions of the workers'
# capacity), systems (ideal, ideal plus 10 us of network, persephone) and
# point lengths (1 s, 10 s); prints p99.9 slowdown short / long / all requests
# per point and the best k by the worse type and by all requests.
#
# Usage (from the repo root, after `cargo build --release`):
#   scripts/fig4-sweet-spot.sh [OUT_DIR=results/fig4-sweet-spot]
# Environment: PSP (binary; default target/release/psp, else
# $CARGO_TARGET_DIR/release/psp), LOADS, SYSTEMS, DURATIONS, KS, SEED (1),
# REUSE (1: keep existing JSON files). Needs jq.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-results/fig4-sweet-spot}
loads=${LOADS:-"0.80 0.85 0.88 0.90 0.92 0.95"}
systems=${SYSTEMS:-"ideal ideal:network=10000 persephone"}
durations=${DURATIONS:-"1s 10s"}
ks=${KS:-"0 1 2 3 4"}
seed=${SEED:-1}
reuse=${REUSE:-0}
command -v jq >/dev/null || { echo "fig4-sweet-spot.sh: jq is needed" >&2; exit 1; }
psp=${PSP:-}
if [ -z "$psp" ]; then
  psp=target/release/psp
  [ -x "$psp" ] || psp="${CARGO_TARGET_DIR:-target}/release/psp"
fi
[ -x "$psp" ] || { echo "fig4-sweet-spot.sh: no psp binary at $psp (cargo build --release, or set PSP)" >&2; exit 1; }
mkdir -p "$out"
echo "duration system load | per k: short/long/all p99.9 slowdown | best k (worse type, all)"
for d in $durations; do
  for sys in $systems; do
    for rho in $loads; do
      line="$d $sys $rho |"
      best_w="" best_a="" bw=1e18 ba=1e18
      for k in $ks; do
        f="$out/$d-$sys-$rho-$k.json"
        if [ "$reuse" != 1 ] || [ ! -s "$f" ]; then
          "$psp" sim --workload extreme-bimodal --workers 14 --load "$rho" --duration "$d" \
            --system "$sys" --seed "$seed" --policy "darc-static:$k" --json >"$f.tmp"
          mv "$f.tmp" "$f"
        fi
        read -r s l a < <(jq -r '[.types[0].p999_slowdown, .types[1].p999_slowdown, .overall.p999_slowdown] | @tsv' "$f")
        line+=" k$k $(printf '%.1f/%.1f/%.1f' "$s" "$l" "$a")"
        w=$(jq -n "[$s, $l] | max")
        if jq -e -n "$w < $bw" >/dev/null; then bw=$w; best_w=$k; fi
        if jq -e -n "$a < $ba" >/dev/null; then ba=$a; best_a=$k; fi
      done
      echo "$line | $best_w, $best_a"
    done
  done
done
