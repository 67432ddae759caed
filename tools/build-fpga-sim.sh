#!/usr/bin/env bash
# Builds the simulated back end of driver/fpga: hdl/rtl/exo_engine.v
# Verilated into a C++ model and two static libraries that the cgo file
# driver/fpga/sim.go (build tag fpgasim) links:
#
#   driver/fpga/obj_vl/Vexo_engine__ALL.a   the model (verilator --cc --build)
#   driver/fpga/obj_vl/libverilated.a       the Verilator runtime
#
# obj_vl/ is git-ignored (driver/fpga/.gitignore). Then:
#
#   go test -count=1 -tags fpgasim ./driver/fpga
#
# (-count=1: Go's test cache does not see a rebuilt .a.) See docs/fpga.md.
#
# Environment: MAX_HOSTS (default 64, the RTL default; 255 holds every
# roster of the golden vectors), VERILATOR (default verilator), JOBS
# (default 2). Needs verilator (5.x), g++ and make:
#   apt-get install -y --no-install-recommends verilator g++ make
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
MAX_HOSTS=${MAX_HOSTS:-64}
VERILATOR=${VERILATOR:-verilator}
JOBS=${JOBS:-2}
OUT=$ROOT/driver/fpga/obj_vl

command -v "$VERILATOR" >/dev/null || { echo "build-fpga-sim: $VERILATOR not found (apt-get install -y verilator g++ make)" >&2; exit 1; }
command -v g++ >/dev/null || { echo "build-fpga-sim: g++ not found (apt-get install -y g++)" >&2; exit 1; }
command -v make >/dev/null || { echo "build-fpga-sim: make not found (apt-get install -y make)" >&2; exit 1; }

# Every module of hdl/rtl: a module added there (the SipHash check, say)
# is picked up without a change here; --top-module exo_engine selects the
# top and the unused ones are dropped.
RTL=$(ls "$ROOT"/hdl/rtl/*.v)

rm -rf "$OUT"
mkdir -p "$OUT"
echo "build-fpga-sim: verilating exo_engine (MAX_HOSTS=$MAX_HOSTS) into driver/fpga/obj_vl"
# -fPIC: the archives are linked into a Go binary (cgo); OPT_FAST=-O2:
# the model at -O2 rather than the generated makefile's -Os.
# shellcheck disable=SC2086
"$VERILATOR" --cc --build -j "$JOBS" -O3 \
	-Wno-fatal -Wno-lint -Wno-style \
	-I"$ROOT/hw/gen" -GMAX_HOSTS="$MAX_HOSTS" \
	--top-module exo_engine --Mdir "$OUT" \
	-CFLAGS -fPIC -MAKEFLAGS OPT_FAST=-O2 \
	$RTL > "$OUT/verilator.log" 2>&1 || { tail -40 "$OUT/verilator.log" >&2; exit 1; }

# --build does not produce the runtime library: compile it (with the
# model's flags, -fPIC included) and archive it.
make -s -C "$OUT" -f Vexo_engine.mk verilated.o verilated_threads.o >> "$OUT/verilator.log" 2>&1 \
	|| { tail -40 "$OUT/verilator.log" >&2; exit 1; }
ar rcs "$OUT/libverilated.a" "$OUT/verilated.o" "$OUT/verilated_threads.o"

{
	echo "max_hosts $MAX_HOSTS"
	echo "verilator $("$VERILATOR" --version)"
	echo "rtl $(cd "$ROOT" && ls hdl/rtl/*.v | tr '\n' ' ')"
	echo "rtl_sha256 $(cat $RTL | sha256sum | cut -d' ' -f1)"
} > "$OUT/build.info"
echo "build-fpga-sim: done: $(ls "$OUT"/*.a | sed "s|$ROOT/||" | tr '\n' ' ')"
echo "build-fpga-sim: next: go test -count=1 -tags fpgasim ./driver/fpga"
