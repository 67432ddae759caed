#!/usr/bin/env bash
# Installs what the project needs on a fresh Debian machine (idempotent).
# Go itself is expected at /usr/local/go (or on PATH).
set -euo pipefail
need=()
command -v iverilog >/dev/null || need+=(iverilog)
command -v gcc >/dev/null || need+=(gcc)
command -v ip >/dev/null || need+=(iproute2)
command -v nft >/dev/null || need+=(nftables)
command -v clang >/dev/null || need+=(clang llvm)
[ -e /usr/include/bpf/bpf_helpers.h ] || need+=(libbpf-dev)
command -v tshark >/dev/null || need+=(tshark)
command -v verilator >/dev/null || need+=(verilator)
command -v yosys >/dev/null || need+=(yosys)
command -v g++ >/dev/null || need+=(g++)
command -v make >/dev/null || need+=(make)
command -v tmux >/dev/null || need+=(tmux)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "setup: need ${need[*]}; run as root or install them: apt-get install ${need[*]}" >&2
    exit 1
  fi
  echo "setup: installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
export PATH="$PATH:/usr/local/go/bin"
go version >/dev/null
go mod download
# The etcd raft peer of `exo bench --peer raft` is its own module (exo does
# not depend on raft): its modules too, so that it builds offline.
(cd "$(dirname "$0")/raftpeer" && go mod download)
# So is the execution-trace reader (golang.org/x/exp/trace).
(cd "$(dirname "$0")/schedwait" && go mod download)
