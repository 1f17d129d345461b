/* What every command that plans does first: the flags made into a strategy's options, the
 * topology and the model loaded and checked, and a strategy run into a verified plan; bad input
 * reported as one line. */
#include <stdio.h>
#include <string.h>
#include "input/topology.h"
#include "common/modelcfg.h"
#include "cli/cli.h"
#include "plan/make_plan.h"
#include "common/batch.h"

int bad(const char *fmt, const char *a, const char *b) {
    fprintf(stderr, "wpgen: ");
    fprintf(stderr, fmt, a, b);
    fprintf(stderr, "\n");
    return EXIT_BAD_INPUT;
}

/* What a user expects without --precision: GPUs train in bf16, so bf16 for --backend cuda and
 * for plans of a cluster whose devices are all GPUs (rated in bf16 in the topology); fp32 on CPU
 * clusters (emit too: the emitted program carries every buffer's format). */
static WpDtype default_precision(const Args *a, const Topology *topo) {
    if (!strcmp(a->backend, "cuda")) return WP_BF16;
    for (int i = 0; i < topo->ntypes; i++)
        if (!topo->types[i].rated_bf16) return WP_FP32;
    return topo->ntypes > 0 ? WP_BF16 : WP_FP32;
}

/* The strategy's options, as the flags give them. Weight gradients default to the precision: in
 * bf16 they travel in bf16, half the bytes. Measured (the default strategy on cpu-4x2, tiny on the
 * GPL text, 200 steps, bf16 weights): bf16 gradients ended at 1.684 and 1.599 (mean of the last 20
 * steps, seeds 1 and 2) against 1.658 and 1.606 with fp32 ones, within the spread of runs that
 * only round differently (wp-ref fp32 1.712, bf16 1.677). */
StrategyOpts opts_of(const Args *a, const Topology *topo) {
    StrategyOpts o = { .micro_batches = a->micro_batches, .replicas = a->replicas, .chunks = a->chunks,
                       .recompute = a->recompute ? (a->offload ? WP_RECOMPUTE_OFFLOAD : WP_RECOMPUTE) : WP_KEEP_ALL, .context_parallel = a->context_parallel > 1 ? a->context_parallel : 1, .lua_max_mib = a->lua_max_mib, .lua_max_minstr = a->lua_max_minstr, .lua_max_seconds = a->lua_max_seconds,
                       .precision = default_precision(a, topo) };
    for (int i = 0; i < a->ngiven; i++) opts_set(&o, &a->given[i]);
    if (a->precision) wp_dtype_parse(a->precision, &o.precision);   /* checked by main.c */
    o.grad_precision = o.precision;
    if (a->grad_precision) wp_dtype_parse(a->grad_precision, &o.grad_precision);
    o.weight_wire = a->weight_wire;
    return o;
}

SearchSpec search_spec_of(const Args *a, const Topology *topo) {
    /* emit runs no context-parallel plan yet: its -s auto keeps C = 1 unless told otherwise */
    SearchSpec sp = { .base = opts_of(a, topo), .fixed_replicas = a->set_replicas, .fixed_chunks = a->set_chunks,
                      .fixed_context_parallel = a->set_context_parallel || !strcmp(a->cmd, "emit"),
                      .fixed_precision = a->precision != NULL, .fixed_grad_precision = a->grad_precision != NULL,
                      .search_seconds = a->search_seconds, .calib = a->calib,
                      .strategies = strcmp(a->cmd, "compare") ? a->strategies : NULL };
    return sp;
}

int load_inputs(Args *a, Topology *topo, WpConfig *model, char *name, size_t namelen) {
    char err[4096];
    if (topology_load(a->topo, topo, err, sizeof err)) return bad("%s%s", err, "");
    if (a->calib) {
        /* a calibration of other device types would silently change nothing: refused */
        int named = 0;
        for (int i = 0; i < topo->ntypes; i++) named += calib_find(a->calib, topo->types[i].name) != NULL;
        if (!named && a->calib->ntypes > 0) {
            char types[256] = "";
            for (int i = 0; i < topo->ntypes; i++) {
                size_t l = strlen(types);
                snprintf(types + l, sizeof types - l, "%s%s", i ? ", " : "", topo->types[i].name);
            }
            topology_free(topo);
            return bad("--calibration %s: device_types: names none of the topology's device types (%s)", a->calib_path, types);
        }
        calib_apply_links(a->calib, topo);
    }
    if (model_load(a->model, model, name, namelen, err, sizeof err)) { topology_free(topo); return bad("%s%s", err, ""); }
    if (a->seq) model->seq = a->seq;
    if (a->mbs) model->mbs = a->mbs;
    if (a->mlp_tile) model->mlp_tile = a->mlp_tile;
    if (model_check(model, err, sizeof err)) { topology_free(topo); return bad("%s%s", err, ""); }
    /* --global-batch: the micro-batches per rank, by the one rule every tool uses (common/batch.h) */
    long seqs;
    int per = a->micro_batches;
    if (wp_batch_split(a->global_batch, a->global_batch_tokens, model->seq, topo->ndevices, model->mbs,
                       (int)cli_flag(NULL, "--micro-batches")->hi, &seqs, &per, err, sizeof err)) {
        topology_free(topo);
        return bad("%s%s", err, "");
    }
    if (wp_batch_agree(a->set_micro_batches ? a->micro_batches : 0, a->global_batch, a->global_batch_tokens, seqs,
                       topo->ndevices, model->mbs, per, err, sizeof err)) {
        topology_free(topo);
        return bad("%s%s", err, "");
    }
    a->micro_batches = per;
    /* a group size the cluster or the sequence cannot take is the flag's error, before any
     * strategy (compare and -s auto would else report every strategy refused) */
    Topology groups;
    if (a->context_parallel > 1 && cp_check(topo, model, a->context_parallel, &groups, err, sizeof err)) {
        topology_free(topo);
        return bad("%s%s", err, "");
    }
    if (a->context_parallel > 1) topology_free(&groups);
    return 0;
}
