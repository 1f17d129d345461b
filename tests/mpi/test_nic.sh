#!/usr/bin/env bash
# The MPI layer's emulated cluster (comm_emulate): tests/mpi/nic_test.c on 4 ranks, two emulated
# nodes sharing one NIC each; two ranks sending through one NIC take about twice one's time, and an
# all-reduce takes the simulator's ring time. Usage: tests/mpi/test_nic.sh BUILD_DIR.
set -u
build=${1:-build}
cd "$(dirname "$0")/../.."
bin=$build/tests-mpi/nic_test
[ -x "$bin" ] || { echo "missing $bin: run make first"; exit 1; }
mpi=(mpirun --oversubscribe)
[ "$(id -u)" = 0 ] && mpi+=(--allow-run-as-root)
timeout 120 "${mpi[@]}" -np 4 "$bin"
