#!/usr/bin/env bash
# The MPI layer's emulated cluster (comm_emulate): tests/mpi/nic_test.c on 4 ranks, two emulated
# nodes sharing one NIC each; two ranks sending through one NIC take about twice one's time, and an
# all-reduce takes the simulator's ring time. Usage: tests/mpi/test_nic.sh BUILD_DIR.
set -u
build=${1:-build}
cd "$(dirname "$0")/../.."
prog=nic_test
. "$(dirname "${BASH_SOURCE[0]}")/mpi_setup.sh"
timeout 120 "${mpi[@]}" -np 4 "$bin"
