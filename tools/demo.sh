#!/usr/bin/env bash
# The README's demo command: sets up, builds exo, replays the Exo slides'
# partition walk-through on a simulated 5-host rack, then runs the seeded
# simulator with faults on the embedded default (5 hosts) and prints its
# report. (The real rack lab, namespaces and raw frames, comes with the
# data-plane issue.)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
bash tools/setup.sh
go build -o bin/exo ./cmd/exo
echo "== the slides' partition walk-through (testdata/walkthrough/slides_partition.txt)"
go test -count=1 -run TestWalkthrough -v ./exo | grep -E '^(=== RUN|--- |ok|FAIL)'
sed -n '/Slides 72-79/,/Slides 80-81/p' testdata/walkthrough/slides_partition.txt | head -60
echo "== 1000 seeded runs of a 5-host rack with drops, duplicates, reordering, partitions, crashes"
./bin/exo sim --hosts 5 --seeds 1000
