/* Pictures of a simulated step: a Chrome trace (JSON "traceEvents", opens in Perfetto and
 * chrome://tracing) with one process per rank and a compute and a communication thread, and an
 * SVG timeline with one row per rank. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include "util/interrupt.h"
#include "sim/sim.h"
#include "ir/op_table.h"

static void op_label(const Plan *p, int r, int opi, char *out, size_t len) {
    const Op *op = &p->ranks[r].ops[opi];
    const OpNote *n = &p->ranks[r].notes[opi];
    const OpInfo *in = op_info(op->kind);
    if (in->phase == OP_PHASE_COMPUTE) snprintf(out, len, "%s%d mb%d", in->label, op->chunk, op->mb);
    else if (in->p2p) {
        const char *dir = in->p2p == P2P_SEND ? "to" : "from";
        if (op_moves_activation(op)) snprintf(out, len, "%s %s%d mb%d %s %d", in->name, what_names[op->what], op->chunk, op->mb, dir, op->peer);
        else snprintf(out, len, "%s %s%d %s %d", in->name, what_names[op->what], n->chunk, dir, op->peer);
    } else if (in->root) snprintf(out, len, "%s chunk %d root %d", in->name, n->chunk, op->peer);
    else if (n->chunk >= 0) snprintf(out, len, "%s chunk %d", in->name, n->chunk);
    else snprintf(out, len, "%s", in->name);
}

/* Trace categories of the phases. */
static const char *const trace_cat[OP_PHASE__COUNT] = { [OP_PHASE_TRANSFER] = "comm", [OP_PHASE_COMPUTE] = "compute", [OP_PHASE_LOCAL] = "local" };

int sim_write_trace(const Plan *p, const SimResult *r, const char *path) {
    char tmp[4200];
    FILE *f = interrupt_fopen(path, tmp, sizeof tmp);   /* written beside, renamed into place */
    if (!f) return -1;
    fprintf(f, "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n");
    int first = 1;
    for (int q = 0; q < p->nranks; q++) {
        fprintf(f, "%s{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": %d, \"args\": {\"name\": \"rank %d (node %d)\"}},\n", first ? "" : ",", q, q, p->ranks[q].node);
        first = 0;
        fprintf(f, "{\"ph\": \"M\", \"name\": \"process_sort_index\", \"pid\": %d, \"args\": {\"sort_index\": %d}},\n", q, q);
        fprintf(f, "{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": %d, \"tid\": 0, \"args\": {\"name\": \"compute\"}},\n", q);
        fprintf(f, "{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": %d, \"tid\": 1, \"args\": {\"name\": \"turns\"}}", q);
        for (int t = 0; t < p->nturns; t++) {
            double a = r->turn_t[q][t], b = r->turn_t[q][t + 1];
            if (b <= a) continue;
            fprintf(f, ",\n{\"ph\": \"X\", \"name\": \"turn %d\", \"cat\": \"turn\", \"pid\": %d, \"tid\": 1, \"ts\": %.3f, \"dur\": %.3f}", t, q, a * 1e6, (b - a) * 1e6);
        }
    }
    /* Transfers overlap each other, so each gets its own track: tid 2 + its index within the turn. */
    for (int i = 0; i < r->nspans; i++) {
        const SimSpan *s = &r->spans[i];
        const Op *op = &p->ranks[s->rank].ops[s->op];
        char label[128];
        op_label(p, s->rank, s->op, label, sizeof label);
        int phase = op_info(op->kind)->phase, comm = phase == OP_PHASE_TRANSFER;
        int tid = 0;
        if (comm) {   /* its index among the turn's operations other than RINGs (which ride a compute) */
            tid = 2 + (s->op - p->ranks[s->rank].turn_start[s->turn]);
            for (int k = p->ranks[s->rank].turn_start[s->turn]; k < s->op; k++) tid -= op_rides(p->ranks[s->rank].ops[k].kind);
        }
        if (s->t1 <= s->t0 && !comm) continue;
        const char *cat = trace_cat[phase];
        char received[64] = "";   /* a CPU rank's compute: what arrived meanwhile (its core copied it) */
        if (s->recv_bytes > 0) snprintf(received, sizeof received, ", \"received_bytes\": %.0f", s->recv_bytes);
        fprintf(f, ",\n{\"ph\": \"X\", \"name\": \"%s\", \"cat\": \"%s\", \"pid\": %d, \"tid\": %d, \"ts\": %.3f, \"dur\": %.3f, "
                   "\"args\": {\"turn\": %d, \"posted_us\": %.3f, \"bytes\": %.0f%s}}",
                label, cat, s->rank, tid, s->t0 * 1e6, (s->t1 - s->t0) * 1e6, s->turn, s->t_post * 1e6, sim_op_bytes(p, s->rank, s->op), received);
    }
    fprintf(f, "\n]}\n");
    return interrupt_commit(f, tmp, path);
}

/* ---- SVG timeline ---- */

static const char *const compute_colour[OP__COUNT] = { [OP_FWD] = "#3b78c4", [OP_BWD] = "#e0823a", [OP_BWD_B] = "#d9a62e", [OP_BWD_W] = "#7b5bb5" };
static const char *const what_colour[] = { "#999999", "#2a9d5c", "#c8404a", "#4fa3d1", "#e39ab8" };  /* -, W, D, A, G */
static const char *const coll_colour = "#8c6d46";
static const char *const local_colour = "#6c6c6c";

/* What a rank's row shows below its compute: what it sends and the collectives it joins. */
static int outgoing(int kind) {
    return op_is_transfer(kind) && op_info(kind)->p2p != P2P_RECV;
}

static double nice_step(double span, int want) {
    double raw = span / want, p = pow(10, floor(log10(raw)));
    double m = raw / p;
    return (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p;
}

static void esc(FILE *f, const char *s) {
    for (; *s; s++) {
        if (*s == '<') fputs("&lt;", f);
        else if (*s == '>') fputs("&gt;", f);
        else if (*s == '&') fputs("&amp;", f);
        else fputc(*s, f);
    }
}

int sim_write_svg(const Plan *p, const SimResult *r, const char *title, const char *path) {
    char tmp[4200];
    FILE *f = interrupt_fopen(path, tmp, sizeof tmp);   /* written beside, renamed into place */
    if (!f) return -1;
    int n = p->nranks;
    double W = 1600, left = 96, right = 16, top = 64, rowh = n <= 16 ? 30 : 22, bottom = 44;
    double cw = rowh * 0.58, gap = rowh * 0.08;           /* compute lane, comm lane below it */
    double plotw = W - left - right, H = top + n * rowh + bottom;
    double T = r->step_time > 0 ? r->step_time : 1;
    double sx = plotw / T;
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
               "font-family=\"Helvetica, Arial, sans-serif\">\n", W, H, W, H);
    fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
    fprintf(f, "<text x=\"%.0f\" y=\"20\" font-size=\"15\" font-weight=\"bold\">", left);
    esc(f, title);
    fprintf(f, "</text>\n");
    /* legend */
    struct { const char *c, *label; } leg[] = {
        { compute_colour[OP_FWD], "forward" }, { compute_colour[OP_BWD], "backward" }, { compute_colour[OP_BWD_B], "backward (input grad)" },
        { compute_colour[OP_BWD_W], "backward (weight grad)" }, { local_colour, "add / copy / optimizer" },
        { what_colour[WHAT_W], "weights sent" }, { what_colour[WHAT_D], "gradients sent" }, { what_colour[WHAT_A], "activations sent" },
        { what_colour[WHAT_G], "activation grads sent" }, { coll_colour, "collective" } };
    double lx = left;
    for (size_t i = 0; i < sizeof leg / sizeof *leg; i++) {
        fprintf(f, "<rect x=\"%.1f\" y=\"32\" width=\"12\" height=\"10\" fill=\"%s\"/>"
                   "<text x=\"%.1f\" y=\"41\" font-size=\"11\">%s</text>\n", lx, leg[i].c, lx + 16, leg[i].label);
        lx += 24 + 6.2 * strlen(leg[i].label);
    }
    fprintf(f, "<text x=\"%.0f\" y=\"56\" font-size=\"10\" fill=\"#555\">each row: a rank (its node); compute on top, its outgoing "
               "transfers and collectives below; shaded bands: its turns, alternately; the plan has %d turns</text>\n", left, p->nturns);
    /* rows: turn bands, label */
    for (int q = 0; q < n; q++) {
        double y = top + q * rowh;
        if (q > 0 && p->ranks[q].node != p->ranks[q - 1].node)
            fprintf(f, "<line x1=\"4\" x2=\"%.0f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#333\" stroke-width=\"1\"/>\n", W - right, y - 1, y - 1);
        fprintf(f, "<text x=\"6\" y=\"%.1f\" font-size=\"%.0f\">rank %d (%s)</text>\n", y + cw * 0.8, rowh <= 22 ? 10.0 : 12.0, q,
                p->topo->nodes[p->ranks[q].node].name);
        for (int t = 0; t < p->nturns; t++) {
            double a = r->turn_t[q][t], b = r->turn_t[q][t + 1];
            if (b <= a) continue;
            fprintf(f, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" fill=\"%s\"><title>rank %d turn %d: %.4g-%.4g s</title></rect>\n",
                    left + a * sx, y, (b - a) * sx, rowh - 2, t % 2 ? "#eef1f6" : "#f8f9fb", q, t, a, b);
        }
    }
    /* time axis */
    double step = nice_step(T, 10);
    double unit = T < 1e-3 ? 1e6 : T < 1 ? 1e3 : 1;
    const char *uname = T < 1e-3 ? "us" : T < 1 ? "ms" : "s";
    double ay = top + n * rowh + 4;
    for (double x = 0; x <= T * (1 + 1e-9); x += step) {
        fprintf(f, "<line x1=\"%.2f\" x2=\"%.2f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#bbb\" stroke-width=\"0.5\"/>"
                   "<text x=\"%.2f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"middle\">%g %s</text>\n",
                left + x * sx, left + x * sx, top - 2, ay, left + x * sx, ay + 14, x * unit, uname);
    }
    fprintf(f, "<text x=\"%.0f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\">step %.4g s, bubble %.1f%%</text>\n", W - right, ay + 30,
            r->step_time, 100 * r->bubble_ratio);
    /* operations */
    for (int i = 0; i < r->nspans; i++) {
        const SimSpan *s = &r->spans[i];
        const Op *op = &p->ranks[s->rank].ops[s->op];
        double y = top + s->rank * rowh, x = left + s->t0 * sx, w = (s->t1 - s->t0) * sx;
        char label[128];
        op_label(p, s->rank, s->op, label, sizeof label);
        const OpInfo *in = op_info(op->kind);
        if (in->phase == OP_PHASE_COMPUTE) {
            if (w <= 0) continue;
            const char *colour = compute_colour[op->kind] ? compute_colour[op->kind] : local_colour;
            fprintf(f, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" fill=\"%s\" stroke=\"white\" stroke-width=\"%.2f\">"
                       "<title>rank %d turn %d: %s, %.4g-%.4g s</title></rect>\n", x, y + 1, w, cw - 1, colour,
                    w > 3 ? 0.5 : 0.0, s->rank, s->turn, label, s->t0, s->t1);
            char tiny[16];
            snprintf(tiny, sizeof tiny, "%.1s%d", in->label, op->chunk);   /* F or B */
            if (w > 7.0 * strlen(tiny) + 2)
                fprintf(f, "<text x=\"%.2f\" y=\"%.1f\" font-size=\"%.0f\" fill=\"white\" text-anchor=\"middle\" pointer-events=\"none\">%s</text>\n",
                        x + w / 2, y + cw * 0.72, rowh <= 22 ? 9.0 : 10.0, tiny);
        } else if (in->phase == OP_PHASE_LOCAL) {
            if (w <= 0) continue;   /* FREE takes no time */
            fprintf(f, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" fill=\"%s\"><title>rank %d turn %d: %s, %.4g-%.4g s</title></rect>\n",
                    x, y + 1, w > 0.5 ? w : 0.5, cw - 1, local_colour, s->rank, s->turn, label, s->t0, s->t1);
        } else if (outgoing(op->kind)) {
            /* outgoing transfers, stacked by their index among the turn's */
            const PlanRank *rk = &p->ranks[s->rank];
            int nk = 0, idx = 0;
            for (int j = rk->turn_start[s->turn]; j < rk->turn_start[s->turn + 1]; j++) {
                nk += outgoing(rk->ops[j].kind);
                idx += j < s->op && outgoing(rk->ops[j].kind);
            }
            double lane = rowh - cw - gap - 2, h = nk > 0 ? lane / nk : lane;
            if (h > 4) h = 4;
            const char *col = in->p2p ? what_colour[op->what] : coll_colour;
            double ww = w > 0.6 ? w : 0.6;
            fprintf(f, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"%s\" fill-opacity=\"0.9\">"
                       "<title>rank %d turn %d: %s, %.0f bytes, posted %.4g s, moving %.4g-%.4g s</title></rect>\n",
                    x, y + cw + gap + idx * h, ww, h > 0.8 ? h - 0.3 : h, col, s->rank, s->turn, label, sim_op_bytes(p, s->rank, s->op),
                    s->t_post, s->t0, s->t1);
        }
    }
    fprintf(f, "</svg>\n");
    return interrupt_commit(f, tmp, path);
}
