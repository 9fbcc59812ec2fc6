#!/bin/sh
# SPDX-License-Identifier: MIT
# Start rdmad on a profile with one 4 KiB memfd memory, one PD and one MR
# over it, and run attach_bench against it. As root, on an RDMA device:
#   make all && make -C examples RDMAD_BUILD=../build attach_bench
#   tests/vm/run examples/attach_bench.sh [-n N] [-r ROUNDS]
# RDMAD_BENCH_IBDEV (default rxe0) picks the device, RDMAD_BUILD the build
# tree; RDMAD_BENCH_CPU=N runs the daemon and the benchmark on that CPU
# only (taskset), which takes cross-CPU wake-ups (slow and erratic in a
# TCG guest) out of the measurement. (tests/vm/run passes RDMAD_* on.)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${RDMAD_BUILD:-$here/../build}
ibdev=${RDMAD_BENCH_IBDEV:-rxe0}
pin=
[ -n "${RDMAD_BENCH_CPU:-}" ] && pin="taskset -c $RDMAD_BENCH_CPU"
run=$(mktemp -d /run/rdmad-bench.XXXXXX)
pid=
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" || true
	rm -rf "$run"
}
trap cleanup EXIT INT TERM

echo "rdmad-bench-token-0123456789" >"$run/token"
chmod 600 "$run/token"
cat >"$run/rdmad.conf" <<CONF
daemon = { runtime_dir = "$run";
           http = { listen = [ "127.0.0.1:8479" ]; token_file = "$run/token"; }; };
devices = ( { name = "d0"; match = { ibdev = "$ibdev"; }; } );
profiles = (
  { name = "bench"; device = "d0";
    memory = ( { name = "m"; size = "4K"; backing = "memfd"; } );
    pd = ( { name = "main"; } );
    mr = ( { name = "m"; pd = "main"; memory = "m";
             access = [ "local_write", "remote_write", "remote_read" ]; } );
  }
);
CONF
$pin "$build/rdmad" -c "$run/rdmad.conf" --log-level warning 2>"$run/rdmad.log" &
pid=$!
i=0
until [ -S "$run/rdmad.sock" ] && "$build/examples/attach" -s "$run/rdmad.sock" \
		bench >/dev/null 2>&1; do
	i=$((i + 1))
	if [ $i -gt 300 ] || ! kill -0 "$pid" 2>/dev/null; then
		echo "attach_bench.sh: rdmad did not get ready:" >&2
		cat "$run/rdmad.log" >&2
		exit 1
	fi
	sleep 0.1
done
$pin "$here/attach_bench" -s "$run/rdmad.sock" "$@" bench
