#!/usr/bin/env bash
# The project's test command (README, .ci/run): sets up, then runs every
# check. Short simulator and fuzz runs here; the long soaks are in
# docs/simulation.md. FUZZTIME and SIMSEEDS override the budgets.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
FUZZTIME=${FUZZTIME:-10s}
SIMSEEDS=${SIMSEEDS:-500}
step() { printf '\n== %s\n' "$*"; }
# fuzz runs one fuzz target (go test's arguments). Go 1.26's fuzzing
# coordinator can end a run with a bare "context deadline exceeded" at the
# -fuzztime boundary, having found nothing (golang/go#75804, fixed in Go
# 1.27; seen here on FuzzOOBMessage, whose inputs go through real
# sockets): that case alone runs once more; a failing input, which the
# fuzzer writes to testdata/fuzz and names, fails at once.
fuzz() {
  local out
  if out=$(go test "$@" 2>&1); then printf '%s\n' "$out" | tail -3; return 0; fi
  printf '%s\n' "$out" | tail -25
  if grep -q 'context deadline exceeded' <<<"$out" && ! grep -qi 'failing input' <<<"$out"; then
    echo "fuzz: a bare deadline at the -fuzztime boundary (golang/go#75804), nothing found: once more"
    go test "$@"
    return
  fi
  return 1
}

step setup
bash tools/setup.sh

step "the simulated FPGA engine: Verilated RTL for driver/fpga (-tags fpgasim)"
bash tools/build-fpga-sim.sh

step "gofmt, go vet, staticcheck"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then echo "gofmt would change: $unformatted"; exit 1; fi
go vet ./...
go tool staticcheck ./...
CGO_ENABLED=1 go vet -tags fpgasim ./driver/fpga ./daemon/host ./cmd/exo
CGO_ENABLED=1 go tool staticcheck -tags fpgasim ./driver/fpga ./daemon/host ./cmd/exo

step "the etcd raft peer of exo bench --peer raft (its own module, tools/raftpeer)"
# gofmt above covers it; vet, staticcheck (the main module's, built once)
# and its tests (3 raftpeer processes on loopback) run in its module.
go build -o bin/staticcheck honnef.co/go/tools/cmd/staticcheck
(cd tools/raftpeer && go vet ./... && ../../bin/staticcheck ./... && go test -count=1 ./...)

step "the execution-trace reader (its own module, tools/schedwait)"
(cd tools/schedwait && go vet ./... && ../../bin/staticcheck ./... && go mod tidy -diff && go test -count=1 ./...)

step "generated files are current, go.mod tidy"
go mod tidy -diff
go run ./tools/hwgen -check
go run ./tools/vecgen -out testdata/vectors -check

step "unit, walk-through, golden-vector, simulator, exploration and lab-rack tests"
# The lab-rack tests (lab/, broadcast/, cluster/, daemon/host/) need root; CI runs as root.
# client's TestCDecoderReplay builds the C client's decoder (with the
# sanitizers when cc has them) and replays FuzzAPIFrame's seeds and corpus
# through it beside the Go client's (docs/api.md, "The C client").
if [ "$(id -u)" != 0 ]; then echo "note: not root: the lab-rack tests will skip (they say so)"; fi
go test -count=1 -timeout 20m ./...
if command -v python3 >/dev/null; then python3 -m unittest discover -s client/python/tests; else echo "note: no python3: the Python client's unit tests skip"; fi
# The Verilated engine against the golden vectors, from Go (cgo), and a
# one-host daemon/host with offload fpga-sim on it (and fpga_token). The
# lab-rack tests above ran the daemon with --offload=fpga-sim and
# fpga-sim-token on it too.
CGO_ENABLED=1 go test -count=1 -tags fpgasim ./driver/fpga ./daemon/host

step "the checker bites: a core with one rule broken must be caught"
go test -count=1 -tags exo_broken_distinct -run 'Broken' ./exo/sim ./exo/explore
go test -count=1 -tags exo_broken_history -run 'Broken' ./exo/sim
go test -count=1 -tags exo_broken_token -run 'Broken' ./exo/sim   # token mode's hand-off broken on purpose

step "fuzzing ($FUZZTIME each)"
fuzz ./exo -run '^$' -fuzz '^FuzzFrameUnmarshal$' -fuzztime "$FUZZTIME"
fuzz ./exo -run '^$' -fuzz '^FuzzRecords$' -fuzztime "$FUZZTIME"
fuzz ./exo -run '^$' -fuzz '^FuzzNodeStepBytes$' -fuzztime "$FUZZTIME"
# Every other input that crosses a trust boundary: the local API, the OOB
# transport before and after its handshake, the config, fragment
# reassembly. (-fuzzminimizetime: the daemon and OOB targets run real
# sockets and goroutines; minimizing each new input would eat the budget.)
fuzz ./client -run '^$' -fuzz '^FuzzAPIFrame$' -fuzztime "$FUZZTIME" -fuzzminimizetime 50x
fuzz ./daemon -run '^$' -fuzz '^FuzzAPIRequest$' -fuzztime "$FUZZTIME" -fuzzminimizetime 50x
fuzz ./daemon -run '^$' -fuzz '^FuzzConfig$' -fuzztime "$FUZZTIME" -fuzzminimizetime 50x
fuzz ./daemon -run '^$' -fuzz '^FuzzReassembly$' -fuzztime "$FUZZTIME" -fuzzminimizetime 50x
fuzz ./oob -run '^$' -fuzz '^FuzzOOBHandshake$' -fuzztime "$FUZZTIME" -fuzzminimizetime 50x
fuzz ./oob -run '^$' -fuzz '^FuzzOOBMessage$' -fuzztime "$FUZZTIME" -fuzzminimizetime 50x

step "simulator: $SIMSEEDS seeds per rack size, faults on"
go build -buildvcs=auto -o bin/exo ./cmd/exo
./bin/exo sim --hosts 3,4,5,7,16 --seeds "$SIMSEEDS"
./bin/exo sim --hosts 3,5 --seeds 200 --amnesia 0.2
./bin/exo sim --hosts 3,5 --seeds 300 --amnesia 0.2 --keep-entries 16 --retain 64 --transfer-pace 50 --transfer-yield 80 --quiet 1000   # state transfers paced adaptively (exo/pacer.go); a paced transfer needs the longer quiet phase
./bin/exo sim --hosts 3,5 --seeds 200 --forge 0.05   # an attacker forging copies: every one must be BAD_TAG
./bin/exo sim --hosts 3,5 --seeds 300 --roster-changes 0.02   # members removed, added, replaced under faults
./bin/exo sim --hosts 3,5,7 --seeds 300 --token-timeout-min 3   # the adaptive token timeout (exo/detector.go), between 3 and 16 ticks
./bin/exo sim --hosts 3,5 --seeds 300 --key-rotations 0.02   # key rotations under faults: every run ends on the newest key
./bin/exo sim --hosts 3,5 --seeds 200 --key-rotations 0.02 --roster-changes 0.02   # both at once
./bin/exo sim --hosts 3,4,5,7 --seeds 300 --token   # the token in a fast path (xdp_token's rule and control plane), records read late
./bin/exo sim --hosts 3,5 --seeds 200 --token --roster-changes 0.02 --key-rotations 0.02
./bin/exo sim --hosts 5 --seeds 200 --token --idle-rotations 32 --idle-backoff 256   # the daemon's timings in token mode
./bin/exo sim --hosts 3,5,7 --seeds 100 --lab-timing --fault-ticks 2000 --ticks 4000 --quiet 2000   # the daemon's timing, its adaptive token timeout 40..200 ticks, faults as long as the lab's

if [ "$(id -u)" = 0 ]; then
  step "demo on a 5-host lab rack"
  ./bin/exo demo --messages 10000
fi

step "the Debian package: build, install, check, remove (tools/deb)"
if ! command -v dpkg >/dev/null || ! command -v dpkg-deb >/dev/null; then
  echo "note: no dpkg: the Debian package check skips"
elif [ "$(id -u)" != 0 ]; then
  echo "note: not root: the Debian package check skips (dpkg -i needs root)"
elif dpkg-query -W -f='${Status}' exo 2>/dev/null | grep -q ' installed$'; then
  echo "note: a package exo is installed already: the Debian package check skips rather than replace it"
else
  debdir=$(mktemp -d)
  go run ./tools/deb -out "$debdir"
  deb=$(ls "$debdir"/exo_*_amd64.deb)
  trap 'dpkg -P exo >/dev/null 2>&1 || true' EXIT   # a failed check does not leave the package installed
  dpkg -i "$deb"
  /usr/bin/exo --version
  /usr/bin/exo --version | grep -q "commit $(git rev-parse HEAD)"   # names the commit built from
  /usr/bin/exo demo --hosts 3 --messages 3000 --prefix exodeb     # the installed binary runs the rack demo (its daemons are itself)
  if command -v man >/dev/null; then
    MANPAGER=cat man exo-daemon | grep exo-daemon >/dev/null   # (not grep -q: under pipefail, man's SIGPIPE would fail it)
  else
    echo "note: no man: the manual page check skips"
  fi
  if command -v pkg-config >/dev/null; then pkg-config --exists exo; fi
  dpkg -r exo
  trap - EXIT
  # Removed: no file of the package left, not installed (dpkg keeps the
  # record, "config-files", until a purge because of the postrm script).
  if [ -e /usr/bin/exo ] || [ -e /usr/include/exo.h ] || [ -e /lib/systemd/system/exo.service ] ||
     dpkg-query -W -f='${Status}' exo 2>/dev/null | grep -q ' installed$'; then
    echo "dpkg -r exo left the package behind"; exit 1
  fi
  dpkg -P exo >/dev/null
  echo "exo_*.deb installed, checked and removed"
  rm -rf "$debdir"
fi

echo
echo "all checks passed"
