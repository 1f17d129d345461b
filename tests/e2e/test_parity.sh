#!/usr/bin/env bash
# The central test (DESIGN.md, "Numerical contract"): emitted plans of every strategy, on 1, 2, 3,
# 4, 6 and 8 ranks, with several micro-batch counts, uneven chunks and replicas, train under
# mpirun and match the single-process reference trainer on the same global batch: the loss of
# every step to a relative 1e-5 and every weight tensor after the steps to a relative 1e-4.
# weipipe with K micro-batches per weight pass (--pass-micro-batches), and with the embedding and LM
# head replicated (--replicate-ends). PARITY_QUICK=1 runs a smaller matrix. Then bf16 (--precision bf16) against wp-ref --precision
# bf16: with fp32 weight gradients the plans whose operations come in the reference's order
# (weipipe, 1f1b, and the zero-bubble ones: their split backward is BWD's arithmetic) are
# bit-identical to it, and fsdp and tawpipe, whose reductions sum in another order, are within
# one bf16 ulp (below); with bf16 weight gradients, rounded where each plan
# stores them (the reference: once per micro-batch; collectives: at each partial sum), losses within
# 1e-3 and weights 5e-2 relative.
#
# Where the tolerances come from. Two runs that do the same roundings in the same order agree bit
# for bit (LOSS_TOL=0 WEIGHT_TOL=0 below), on any CPU: both sides call the same BLAS kernels.
# Where a plan sums across ranks in another order than the reference (fsdp's reduce-scatter,
# tawpipe's node reduce and all-reduce, the replicated ends' all-reduce), the sums of n terms
# differ by up to about n fp32 ulps; in fp32 that moves the losses by far less than 1e-5 and the
# weights by far less than 1e-4 relative (measured on an AMD EPYC, 2026-12-03, make test-blas: the
# whole matrix at most 3.0e-6 of a tensor under OpenBLAS's Haswell and SkylakeX kernels; fsdp on 6
# ranks, weipipe with 3 micro-batches per rank and replicas 2.2e-7 to 9.3e-7 under Haswell, Zen,
# SkylakeX, Cooperlake and Sandybridge). In bf16 it does not stay small: a value
# one fp32 ulp either side of a rounding point is stored as one of two bf16 neighbours, 2^-8
# apart, and which elements sit that close to a rounding point is chance. On this model such
# flips moved the weights by 1.4e-6 relative on every OpenBLAS core type of an AMD EPYC (Zen 4) and
# by 1.8e-4 on a Xeon with AVX-512 BF16. So these cases are compared at bf16's resolution: every
# element within one bf16 ulp of its own size is at most 2^-8 = 3.9e-3 of its tensor in the
# relative L2 norm (WEIGHT_TOL=3.9e-3), and the losses to 1e-3, as the bf16-gradient cases. A
# wrong or missing gradient moves AdamW's updates (2e-3 a step, 3 steps, on weights of about
# 0.02) by 1e-1 of a tensor, so this still catches one. The spread over OpenBLAS core types of
# every figure here: make test-blas (scripts/test_blas.sh).
set -u
build=${1:-build}
cd "$(dirname "$0")/../.."
. tests/e2e/parity_lib.sh

strategies="weipipe-naive weipipe-interleave 1f1b fsdp"
for s in $strategies; do
    [ -f "schedules/$s.lua" ] || { echo "FAIL no strategy $s"; fail=$((fail + 1)); continue; }
    case_ "$s" topologies/cpu-1x1.json 1 2
    case_ "$s" "$(topo_for 2)" 2 1
    case_ "$s" "$(topo_for 3)" 3 2
    case_ "$s" topologies/cpu-2x2.json 4 1
    [ -z "${PARITY_QUICK:-}" ] && case_ "$s" topologies/cpu-2x2.json 4 3
    case_ "$s" topologies/cpu-uneven.json 6 1
    [ -z "${PARITY_QUICK:-}" ] && case_ "$s" topologies/cpu-4x2.json 8 2
done
# uneven chunks (8 layers in 3 chunks: 3+3+2) and data-parallel replicas (2 x 2 ranks)
for s in weipipe-naive weipipe-interleave fsdp; do
    case_ "$s" topologies/cpu-2x2.json 4 2 --chunks 3
done
for s in weipipe-interleave 1f1b; do
    case_ "$s" topologies/cpu-2x2.json 4 2 --replicas 2
done
# K micro-batches per weight pass (--pass-micro-batches, schedules/lib/weipipe.lua), 1 < K < N: the
# last round shorter (3 = 2 + 1, 4 = 3 + 1), fewer chunks than ranks (each round's weights from the
# owner), more chunks than ranks (a stream waits at rank 0 between rounds) with recomputation,
# replicas
case_ weipipe-interleave topologies/cpu-2x2.json 4 3 --pass-micro-batches 2
case_ weipipe-naive "$(topo_for 3)" 3 4 --pass-micro-batches 3 --chunks 2
case_ weipipe-interleave topologies/cpu-2x2.json 4 3 --pass-micro-batches 2 --chunks 6 --recompute
case_ weipipe-interleave topologies/cpu-2x2.json 4 4 --pass-micro-batches 2 --replicas 2
# the embedding and the LM head replicated on every rank (--replicate-ends, schedules/lib/weipipe.lua):
# the ring carries the middle chunks, the ends' gradients are all-reduced over all ranks; with
# replicas (the all-reduce spans them), K per pass with fewer chunks than ranks, recomputation; the
# split backward (the ends' backwards whole, around the B passes)
# (and the gradient norm: every rank holds the ends, which count once)
export NORM=1
case_ weipipe-interleave topologies/cpu-2x2.json 4 2 --replicate-ends
case_ weipipe-naive "$(topo_for 3)" 3 2 --replicate-ends
case_ weipipe-interleave topologies/cpu-2x2.json 4 2 --replicate-ends --replicas 2
case_ weipipe-interleave topologies/cpu-2x2.json 4 3 --replicate-ends --pass-micro-batches 2 --chunks 3 --recompute
case_ weipipe-naive topologies/cpu-uneven.json 6 1 --replicate-ends
case_ weipipe-zb1 topologies/cpu-2x2.json 4 2 --replicate-ends
case_ weipipe-zb2 topologies/cpu-2x2.json 4 2 --replicate-ends --replicas 2 --recompute
unset NORM
# zero bubble: the backward split into BWD_B and BWD_W (runtime/cpu/model.h), on the same matrix's
# shapes, with recompute (the B pass keeps the recomputed stash for W) and replicas
for s in zb1 weipipe-zb1 weipipe-zb2; do
    [ -f "schedules/$s.lua" ] || { echo "FAIL no strategy $s"; fail=$((fail + 1)); continue; }
    case_ "$s" "$(topo_for 2)" 2 1
    case_ "$s" topologies/cpu-2x2.json 4 2
    case_ "$s" topologies/cpu-uneven.json 6 1
    case_ "$s" topologies/cpu-2x2.json 4 2 --recompute
done
case_ weipipe-zb1 topologies/cpu-2x2.json 4 3 --chunks 3
case_ weipipe-zb2 topologies/cpu-2x2.json 4 2 --replicas 2
case_ zb1 topologies/cpu-2x2.json 4 2 --replicas 2
# uneven stages (lib/actpass.lua: --first-stage-layers, --last-stage-layers): 8 layers on 4 stages
# cut 1 3 3 1 and 2 3 2 1, and on 3 stages 2 3 3
case_ 1f1b topologies/cpu-2x2.json 4 2 --first-stage-layers 1 --last-stage-layers 1
case_ zb1 topologies/cpu-2x2.json 4 2 --last-stage-layers 1
case_ zb1 "$(topo_for 3)" 3 2 --first-stage-layers 2
# the MLP in tiles of tokens (--mlp-tile; runtime/cpu/model.c): 96 tokens a micro-batch in tiles of
# 40 (the last 16) and of 32, with recomputation (gate/up recomputed tile by tile) and the split
# backward; the reference untiled. Tiling changes only the order in which the weight gradients
# sum over the tokens: in fp32 a sum of n terms moves by about n ulps, far below 1e-5 and 1e-4
case_ weipipe-interleave topologies/cpu-2x2.json 4 1 --mlp-tile 40
case_ weipipe-interleave topologies/cpu-2x2.json 4 2 --mlp-tile 40 --recompute
case_ 1f1b topologies/cpu-2x2.json 4 1 --mlp-tile 32
case_ zb1 topologies/cpu-2x2.json 4 2 --mlp-tile 40 --recompute
# a strategy that is not shipped, with an option of its own (tests/cli/test_declare.sh)
case_ tests/data/strategies/buckets.lua topologies/cpu-2x2.json 4 2 --replicas 4 --buckets 2
export PREC="bf16 fp32"
for s in weipipe-naive weipipe-interleave 1f1b zb1 weipipe-zb1 weipipe-zb2; do
    LOSS_TOL=0 WEIGHT_TOL=0 case_ "$s" topologies/cpu-2x2.json 4 1
done
# summed in another order than the reference's: compared at one bf16 ulp (the header)
LOSS_TOL=1e-3 WEIGHT_TOL=3.9e-3 case_ fsdp topologies/cpu-2x2.json 4 1
LOSS_TOL=1e-3 WEIGHT_TOL=3.9e-3 case_ tawpipe topologies/cpu-2x2.json 4 1
LOSS_TOL=1e-3 WEIGHT_TOL=3.9e-3 case_ tawpipe topologies/cpu-uneven.json 6 1
# the MLP in tiles: its weight gradients summed in another order than the untiled reference's
LOSS_TOL=1e-3 WEIGHT_TOL=3.9e-3 case_ weipipe-interleave topologies/cpu-2x2.json 4 1 --mlp-tile 40
# several micro-batches per rank: the gradient chain sums them in another order than the reference.
# AdamW's first steps move each weight by about lr * sign(gradient), so a gradient near 0 whose
# sign the order flips moves its weight by 2 lr: on some CPUs (OpenBLAS's Haswell kernels, this
# case at 3 steps) that is 1.04e-3 of a tensor, past 1e-4, with the losses still within 1e-5
WEIGHT_TOL=3e-3 case_ weipipe-interleave topologies/cpu-2x2.json 4 3 --pass-micro-batches 2
# replicated ends: the ends' all-reduce sums in another order than the reference (one micro-batch
# per rank: with two, the ring's gradient chain alone differs by 1.75e-4, with or without the flag)
LOSS_TOL=1e-3 WEIGHT_TOL=3.9e-3 case_ weipipe-interleave topologies/cpu-2x2.json 4 1 --replicate-ends
# working weights on the wire in fp32 (--weight-wire fp32, PyTorch FSDP's flat parameters without a
# MixedPrecision policy): rounded to bf16 on arrival, the bits they have when they move in bf16
LOSS_TOL=0 WEIGHT_TOL=0 case_ weipipe-interleave topologies/cpu-2x2.json 4 1 --weight-wire fp32
LOSS_TOL=1e-3 WEIGHT_TOL=3.9e-3 case_ fsdp topologies/cpu-2x2.json 4 1 --weight-wire fp32
LOSS_TOL=1e-3 WEIGHT_TOL=3.9e-3 case_ tawpipe topologies/cpu-2x2.json 4 1 --weight-wire fp32
export PREC="bf16 bf16" LOSS_TOL=1e-3 WEIGHT_TOL=5e-2
case_ weipipe-interleave topologies/cpu-2x2.json 4 1
case_ weipipe-interleave topologies/cpu-2x2.json 4 2 --replicate-ends   # the ends' all-reduce summing bf16
case_ 1f1b topologies/cpu-2x2.json 4 1
case_ fsdp topologies/cpu-2x2.json 4 1       # reduce-scatter summing bf16
case_ fsdp topologies/cpu-2x2.json 4 2 --fsdp-variant full-shard --weight-wire fp32   # fp32 gathers, bf16 scatters
case_ tawpipe topologies/cpu-2x2.json 4 1    # reduce and all-reduce summing bf16
for s in zb1 weipipe-zb1 weipipe-zb2; do case_ "$s" topologies/cpu-2x2.json 4 2; done
unset PREC LOSS_TOL WEIGHT_TOL
echo "parity matrix: $pass passed, $fail failed in $((SECONDS - t0)) s"
[ "$fail" -eq 0 ]
