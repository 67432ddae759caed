#!/usr/bin/env bash
# The README's demo command: sets up what is needed, builds exo and runs
# `exo demo` on the embedded default: a 5-host lab rack (network namespaces,
# veth pairs, a bridge), an exo daemon per host on raw Ethernet frames,
# messages published from every host at once, every host's agreed stream
# compared, throughput and agreement latency printed, everything torn down.
# Needs root. Extra arguments go to exo demo (e.g. --hosts 7 --json).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
if [ "$(id -u)" != 0 ]; then
  echo "demo: needs root (network namespaces, raw sockets): sudo $0" >&2
  exit 1
fi
bash tools/setup.sh
go build -buildvcs=auto -o bin/exo ./cmd/exo
exec ./bin/exo demo "$@"
