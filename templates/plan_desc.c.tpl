${P.first_c}
${P.header_c}

/* The static description of this plan for the runtime (runtime/common/step.h): the model, the chunks
 * and their owners, the groups of the collectives, and per rank its place, its buffers and its
 * step function. */
#include "plan.h"

/* ---- chunks: layers and the ranks holding their master weights ---- */
@ for i, c in ipairs(P.chunks) do
static const int owners_${i - 1}[] = { ${join(c.owners, 31 + #tostring(i - 1))} };
@ end

static const WpChunkDesc chunks[${#P.chunks}] = {
@ for i, c in ipairs(P.chunks) do
    { ${c.layer0}, ${c.nlayers}, ${#c.owners}, owners_${i - 1} },
@ end
};
@ local any_replicated = false
@ for _, c in ipairs(P.chunks) do any_replicated = any_replicated or c.replicated end
@ if any_replicated then
@   local rep = {}
@   for i, c in ipairs(P.chunks) do rep[i] = c.replicated and 1 or 0 end

/* ---- chunks every rank holds a master of (--replicate-ends): counted once ---- */
static const unsigned char replicated[${#P.chunks}] = { ${join(rep, 40)} };
@ end
@ if #P.groups > 0 then

/* ---- groups of the collectives: members in order (shard i lives on member i) ---- */
@   for i, g in ipairs(P.groups) do
static const int group_${i - 1}[] = { ${join(g.ranks, 30 + #tostring(i - 1))} };
@   end

static const WpGroupDesc groups[${#P.groups}] = {
@   for i, g in ipairs(P.groups) do
    { ${#g.ranks}, group_${i - 1} },
@   end
};
@ end

/* ---- ranks: buffers (name, kind, master, chunk, shard, nshards, elements, format, copy's format), steps,
 * the most activations (inputs and their gradients) and stashes each holds at once, its transfer
 * area and its device's peak FLOP/s ---- */
@ for _, d in ipairs(ranks) do
@   if #d.bufs > 0 then
static const WpBufDesc bufs_${d.id}[] = {
@     for _, b in ipairs(d.bufs) do
    { ${c_string(b.name)}, ${b.kind == "W" and "WP_BUF_W" or "WP_BUF_D"}, ${b.master and 1 or 0}, ${b.chunk}, ${b.shard}, ${b.nshards}, ${b.elems}, ${b.dtype == "bf16" and "WP_BF16" or "WP_FP32"}, ${b.copy_dtype == "bf16" and "WP_BF16" or "WP_FP32"} },
@     end
};
@   end
@ end

static const WpRankDesc ranks[${#ranks}] = {
@ for _, d in ipairs(ranks) do
    { ${d.node}, ${d.replica}, ${d.stage}, ${#d.bufs}, ${#d.bufs > 0 and "bufs_" .. d.id or "NULL"}, step_rank_${d.id}, ${d.max_acts}, ${d.max_stashes}, ${d.max_keeps}, ${d.xfer_bytes}, ${c_double(d.peak_flops)} },
@ end
};

@ local nodes = {}
@ for i, d in ipairs(ranks) do nodes[i] = d.node end
static const int rank_node[${#ranks}] = { ${join(nodes, 33 + #tostring(#ranks))} };

const WpPlanDesc WP_PLAN = {
    .wpgen_version = ${c_string(P.version)},
    .plan_hash = ${c_string(P.hash)},
    .strategy = ${c_string(P.strategy)},
    .model_name = ${c_string(P.model_name)},
    .topo_name = ${c_string(P.topo_name)},
    .model = { .hidden = ${P.model.hidden}, .layers = ${P.model.layers}, .heads = ${P.model.heads}, .kv_heads = ${P.model.kv_heads},
               .head_dim = ${P.model.head_dim}, .ffn = ${P.model.ffn}, .vocab = ${P.model.vocab}, .eps = ${c_float(P.model.eps)},
               .rope_theta = ${c_float(P.model.rope_theta)}, .tied = ${P.model.tied}, .seq = ${P.model.seq}, .mbs = ${P.model.mbs},
               .mlp_tile = ${P.model.mlp_tile},
@ local r = P.model.rope_scaling
@ if r then
               .rope_scaling = { .factor = ${c_float(r.factor)}, .low_freq_factor = ${c_float(r.low_freq_factor)},
                                 .high_freq_factor = ${c_float(r.high_freq_factor)}, .original_max_position_embeddings = ${r.original_max_position_embeddings} },
@ end
@ local ids = P.model.ids
@ if #ids.bos + #ids.pad + #ids.eos > 0 then
               .ids = { .nbos = ${#ids.bos}, .bos = ${ids.bos[1] or 0}, .npad = ${#ids.pad}, .pad = ${ids.pad[1] or 0},
                        .neos = ${#ids.eos}, .eos = { ${#ids.eos > 0 and table.concat(ids.eos, ", ") or "0"} }, .eos_list = ${ids.eos_list} },
@ end
             },
    .nranks = ${P.nranks}, .nnodes = ${P.nnodes}, .nchunks = ${#P.chunks}, .ngroups = ${#P.groups}, .nturns = ${P.nturns},
    .micro_batches = ${P.micro_batches}, .total_mbs = ${P.total_mbs}, .recompute = ${P.recompute},
    .precision = ${P.precision == "bf16" and "WP_BF16" or "WP_FP32"}, .grad_precision = ${P.grad_precision == "bf16" and "WP_BF16" or "WP_FP32"},
@ if P.weight_wire ~= P.precision then
    .weight_wire_fp32 = 1,   /* working weights move in fp32, stored at the precision on arrival */
@ end
    .chunks = chunks,
@ if any_replicated then
    .replicated = replicated,
@ end
    .groups = ${#P.groups > 0 and "groups" or "NULL"},
    .ranks = ranks,
    .rank_node = rank_node,
    .intra_bw = ${c_double(P.intra_bw)}, .intra_lat = ${c_double(P.intra_lat)},   /* bytes/s, s: for topology emulation */
    .inter_bw = ${c_double(P.inter_bw)}, .inter_lat = ${c_double(P.inter_lat)},
};
