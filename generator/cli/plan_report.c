/* A verified plan reported: the text summary of `wpgen plan`, the JSON object of `--json`,
 * whether it fits the devices' memory, and sizes in bytes for people (B, KiB, MiB, ...). Memory
 * is broken down (ir/plan.h, PlanMem) for the rank with the highest peak; every rank's total is
 * in the JSON, so that 1,024 ranks stay a small object. */
#include <stdio.h>
#include <jansson.h>
#include "cli/cli.h"
#include "common/batch.h"

void human_bytes(double b, char *out, size_t len) {
    const char *u[] = { "B", "KiB", "MiB", "GiB", "TiB" };
    int i = 0;
    while (b >= 1024 && i < 4) b /= 1024, i++;
    snprintf(out, len, i ? "%.2f %s" : "%.0f %s", b, u[i]);
}

void print_summary(const Plan *p, const char *model_name, double intra, double inter, int fits) {
    const Topology *t = p->topo;
    char a[32], b[32], c[32], d[32];
    int nops = 0;
    for (int r = 0; r < p->nranks; r++) nops += p->ranks[r].nops;
    printf("strategy    %s\n", p->strategy);
    printf("cluster     %s: %d ranks on %d nodes, %d replica%s of %d\n", t->name, p->nranks, t->nnodes, p->replicas,
           p->replicas > 1 ? "s" : "", p->nranks / p->replicas);
    if (wp_cp(&p->model) > 1)
        printf("context     parallel %d: each rank is a group of %d devices of a node sharing each micro-batch, %zu tokens each; figures per member (docs/context-parallel.md)\n",
               wp_cp(&p->model), wp_cp(&p->model), wp_rank_tokens(&p->model));
    printf("model       %s: H=%d, %d layers, %d heads (%d kv), seq %d, %d sequence%s per micro-batch\n", model_name,
           p->model.hidden, p->model.layers, p->model.heads, p->model.kv_heads, p->model.seq, p->model.mbs,
           p->model.mbs > 1 ? "s" : "");
    char gb[96];
    wp_batch_describe((long)p->total_mbs * p->model.mbs, p->model.seq, gb, sizeof gb);
    printf("batch       %s: %d micro-batches per step (%d per rank)\n", gb, p->total_mbs, p->micro_batches);
    printf("tiles       mlp tile %d tokens, LM head %d tokens a block\n", wp_mlp_tile_tokens(&p->model),
           wp_ce_block_tokens(&p->model));
    printf("precision   %s weights in flight, activations and their gradients; %s weight gradients; fp32 masters and AdamW%s\n",
           wp_dtype_name(p->precision), wp_dtype_name(p->grad_precision),
           p->weight_wire_fp32 ? "; weights on the wire in fp32" : "");
    printf("chunks      %d:", p->nchunks);
    for (int c = 0; c < p->nchunks; c++) {
        printf(" [%d layer%s, ", p->chunks[c].nlayers, p->chunks[c].nlayers != 1 ? "s" : "");
        if (p->chunks[c].replicated) printf("replicated on every rank");
        else {
            printf("owner%s", p->chunks[c].nowners > 1 ? "s" : "");
            for (int i = 0; i < p->chunks[c].nowners && i < 4; i++) printf(" %d", p->chunks[c].owners[i]);
            if (p->chunks[c].nowners > 4) printf(" ...");
        }
        printf("]");
        if (c >= 7 && c < p->nchunks - 1) { printf(" ..."); break; }
    }
    printf("\n");
    human_bytes(intra, a, sizeof a);
    human_bytes(inter, b, sizeof b);
    human_bytes((double)p->peak_mem, c, sizeof c);
    human_bytes(t->types[t->nodes[p->ranks[p->peak_rank].node].type].mem_bytes, d, sizeof d);
    printf("turns       %d, %d operations\n", p->nturns, nops);
    printf("traffic     %s inside nodes, %s between nodes per step\n", a, b);
    printf("memory      peak %s on rank %d of %s: %s\n", c, p->peak_rank, d, fits ? "fits" : "DOES NOT FIT");
    const PlanMem *m = &p->ranks[p->peak_rank].mem;
    char e[5][32];
    size_t parts[5] = { m->weights, m->grads, m->masters, m->acts, m->workspace };
    for (int i = 0; i < 5; i++) human_bytes((double)parts[i], e[i], sizeof e[i]);
    printf("            rank %d: working weights %s, gradients %s, masters and AdamW %s, activations %s, workspace %s\n",
           p->peak_rank, e[0], e[1], e[2], e[3], e[4]);
    if (p->recompute == WP_RECOMPUTE_OFFLOAD) {
        int n = plan_host_node(p);
        human_bytes((double)plan_node_host(p, n), a, sizeof a);
        human_bytes((double)m->host, b, sizeof b);
        human_bytes(t->nodes[n].host_mem, c, sizeof c);
        printf("host memory %s on node %s of %s: %s (offloaded stashes; rank %d: %s)\n", a, t->nodes[n].name, c,
               (double)plan_node_host(p, n) <= t->nodes[n].host_mem ? "fits" : "DOES NOT FIT", p->peak_rank, b);
    }
    if (p->notes) printf("notes       %s", p->notes);
}

json_t *plan_json(const Plan *p, double intra, double inter, int fits) {
    json_t *o = json_object();
    json_object_set_new(o, "strategy", json_string(p->strategy));
    json_object_set_new(o, "ranks", json_integer(p->nranks));
    json_object_set_new(o, "nodes", json_integer(p->topo->nnodes));
    json_object_set_new(o, "replicas", json_integer(p->replicas));
    json_object_set_new(o, "context_parallel", json_integer(wp_cp(&p->model)));
    json_object_set_new(o, "chunks", json_integer(p->nchunks));
    json_object_set_new(o, "micro_batches_per_rank", json_integer(p->micro_batches));
    json_object_set_new(o, "micro_batches", json_integer(p->total_mbs));
    json_object_set_new(o, "global_batch", json_integer((json_int_t)p->total_mbs * p->model.mbs));   /* sequences */
    json_object_set_new(o, "global_batch_tokens", json_integer((json_int_t)p->total_mbs * p->model.mbs * p->model.seq));
    json_object_set_new(o, "turns", json_integer(p->nturns));
    json_object_set_new(o, "bytes_intra_node", json_real(intra));
    json_object_set_new(o, "bytes_inter_node", json_real(inter));
    json_object_set_new(o, "peak_mem_bytes", json_integer((json_int_t)p->peak_mem));
    json_object_set_new(o, "peak_mem_rank", json_integer(p->peak_rank));
    json_object_set_new(o, "fits", json_boolean(fits));
    json_object_set_new(o, "precision", json_string(wp_dtype_name(p->precision)));
    json_object_set_new(o, "grad_precision", json_string(wp_dtype_name(p->grad_precision)));
    json_object_set_new(o, "weight_wire", json_string(wp_dtype_name(plan_carried_dtype(p, WHAT_W))));
    json_object_set_new(o, "mlp_tile_tokens", json_integer(wp_mlp_tile_tokens(&p->model)));
    const PlanMem *m = &p->ranks[p->peak_rank].mem;
    json_t *mem = json_object();
    json_object_set_new(mem, "rank", json_integer(p->peak_rank));
    json_object_set_new(mem, "working_weights", json_integer((json_int_t)m->weights));
    json_object_set_new(mem, "gradients", json_integer((json_int_t)m->grads));
    json_object_set_new(mem, "masters_optimizer", json_integer((json_int_t)m->masters));
    json_object_set_new(mem, "activations", json_integer((json_int_t)m->acts));
    json_object_set_new(mem, "workspace", json_integer((json_int_t)m->workspace));
    json_object_set_new(mem, "host", json_integer((json_int_t)m->host));
    json_object_set_new(o, "peak_mem_breakdown", mem);
    int hn = plan_host_node(p);
    json_object_set_new(o, "offload_activations", json_boolean(p->recompute == WP_RECOMPUTE_OFFLOAD));
    json_object_set_new(o, "host_mem_bytes", json_integer((json_int_t)plan_node_host(p, hn)));
    json_object_set_new(o, "host_mem_node", json_string(p->topo->nodes[hn].name));
    json_object_set_new(o, "host_mem_capacity_bytes", json_real(p->topo->nodes[hn].host_mem));
    json_t *per = json_array();
    for (int r = 0; r < p->nranks; r++) json_array_append_new(per, json_integer((json_int_t)p->ranks[r].peak_mem));
    json_object_set_new(o, "peak_mem_bytes_per_rank", per);
    return o;
}
