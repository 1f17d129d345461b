/* Pictures of a simulated step: a Chrome trace (JSON "traceEvents", opens in Perfetto and
 * chrome://tracing) with one process per rank and a compute and a communication thread, and an
 * SVG timeline with one row per rank. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include "sim/sim.h"

static void op_label(const Plan *p, int r, int opi, char *out, size_t len) {
    const Op *op = &p->ranks[r].ops[opi];
    const OpNote *n = &p->ranks[r].notes[opi];
    switch ((OpKind)op->kind) {
    case OP_FWD: case OP_BWD: case OP_BWD_B: case OP_BWD_W:
        snprintf(out, len, "%s%d mb%d", op->kind == OP_FWD ? "F" : op->kind == OP_BWD ? "B" : op->kind == OP_BWD_B ? "Bb" : "Bw", op->chunk, op->mb);
        break;
    case OP_SEND: case OP_RECV:
        if (op->what == WHAT_A || op->what == WHAT_G)
            snprintf(out, len, "%s %s%d mb%d %s %d", op_names[op->kind], what_names[op->what], op->chunk, op->mb, op->kind == OP_SEND ? "to" : "from", op->peer);
        else snprintf(out, len, "%s %s%d %s %d", op_names[op->kind], what_names[op->what], n->chunk, op->kind == OP_SEND ? "to" : "from", op->peer);
        break;
    case OP_BCAST: case OP_REDUCE:
        snprintf(out, len, "%s chunk %d root %d", op_names[op->kind], n->chunk, op->peer);
        break;
    default:
        if (n->chunk >= 0) snprintf(out, len, "%s chunk %d", op_names[op->kind], n->chunk);
        else snprintf(out, len, "%s", op_names[op->kind]);
    }
}

int sim_write_trace(const Plan *p, const SimResult *r, const char *path) {
    FILE *f = fopen(path, "w");
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
        int comm = op->kind >= OP_SEND && op->kind <= OP_REDUCE_SCATTER;
        int tid = 0;
        if (comm) tid = 2 + (s->op - p->ranks[s->rank].turn_start[s->turn]);
        if (s->t1 <= s->t0 && !comm) continue;
        const char *cat = op->kind <= OP_BWD_W ? "compute" : comm ? "comm" : "local";
        fprintf(f, ",\n{\"ph\": \"X\", \"name\": \"%s\", \"cat\": \"%s\", \"pid\": %d, \"tid\": %d, \"ts\": %.3f, \"dur\": %.3f, "
                   "\"args\": {\"turn\": %d, \"posted_us\": %.3f, \"bytes\": %.0f}}",
                label, cat, s->rank, tid, s->t0 * 1e6, (s->t1 - s->t0) * 1e6, s->turn, s->t_post * 1e6, sim_op_bytes(p, s->rank, s->op));
    }
    fprintf(f, "\n]}\n");
    int bad = ferror(f);
    if (fclose(f) || bad) return -1;
    return 0;
}

/* ---- SVG timeline ---- */

static const char *const compute_colour[] = { "#3b78c4", "#e0823a", "#d9a62e", "#7b5bb5" };  /* FWD BWD BWD_B BWD_W */
static const char *const what_colour[] = { "#999999", "#2a9d5c", "#c8404a", "#4fa3d1", "#e39ab8" };  /* -, W, D, A, G */
static const char *const coll_colour = "#8c6d46";
static const char *const local_colour = "#6c6c6c";

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
    FILE *f = fopen(path, "w");
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
        { compute_colour[0], "forward" }, { compute_colour[1], "backward" }, { compute_colour[2], "backward (input grad)" },
        { compute_colour[3], "backward (weight grad)" }, { local_colour, "add / copy / optimizer" },
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
        const OpNote *nt = &p->ranks[s->rank].notes[s->op];
        double y = top + s->rank * rowh, x = left + s->t0 * sx, w = (s->t1 - s->t0) * sx;
        char label[128];
        op_label(p, s->rank, s->op, label, sizeof label);
        if (op->kind <= OP_BWD_W) {
            if (w <= 0) continue;
            fprintf(f, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" fill=\"%s\" stroke=\"white\" stroke-width=\"%.2f\">"
                       "<title>rank %d turn %d: %s, %.4g-%.4g s</title></rect>\n", x, y + 1, w, cw - 1, compute_colour[op->kind],
                    w > 3 ? 0.5 : 0.0, s->rank, s->turn, label, s->t0, s->t1);
            char tiny[16];
            snprintf(tiny, sizeof tiny, "%s%d", op->kind == OP_FWD ? "F" : "B", op->chunk);
            if (w > 7.0 * strlen(tiny) + 2)
                fprintf(f, "<text x=\"%.2f\" y=\"%.1f\" font-size=\"%.0f\" fill=\"white\" text-anchor=\"middle\" pointer-events=\"none\">%s</text>\n",
                        x + w / 2, y + cw * 0.72, rowh <= 22 ? 9.0 : 10.0, tiny);
        } else if (op->kind == OP_ACC || op->kind == OP_COPY || op->kind == OP_OPT) {
            if (w <= 0) continue;
            fprintf(f, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" fill=\"%s\"><title>rank %d turn %d: %s, %.4g-%.4g s</title></rect>\n",
                    x, y + 1, w > 0.5 ? w : 0.5, cw - 1, local_colour, s->rank, s->turn, label, s->t0, s->t1);
        } else if (op->kind == OP_SEND || (op->kind >= OP_BCAST && op->kind <= OP_REDUCE_SCATTER)) {
            /* outgoing transfers, stacked by their index within the turn */
            int k = s->op - p->ranks[s->rank].turn_start[s->turn], nk = 0;
            for (int j = p->ranks[s->rank].turn_start[s->turn]; j < p->ranks[s->rank].turn_start[s->turn + 1]; j++) {
                int kk = p->ranks[s->rank].ops[j].kind;
                nk += kk == OP_SEND || (kk >= OP_BCAST && kk <= OP_REDUCE_SCATTER);
            }
            int idx = 0;
            for (int j = p->ranks[s->rank].turn_start[s->turn]; j < s->op; j++) {
                int kk = p->ranks[s->rank].ops[j].kind;
                idx += kk == OP_SEND || (kk >= OP_BCAST && kk <= OP_REDUCE_SCATTER);
            }
            (void)k;
            double lane = rowh - cw - gap - 2, h = nk > 0 ? lane / nk : lane;
            if (h > 4) h = 4;
            const char *col = op->kind == OP_SEND ? what_colour[op->what] : coll_colour;
            double ww = w > 0.6 ? w : 0.6;
            fprintf(f, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"%s\" fill-opacity=\"0.9\">"
                       "<title>rank %d turn %d: %s, %.0f bytes, posted %.4g s, moving %.4g-%.4g s</title></rect>\n",
                    x, y + cw + gap + idx * h, ww, h > 0.8 ? h - 0.3 : h, col, s->rank, s->turn, label, sim_op_bytes(p, s->rank, s->op),
                    s->t_post, s->t0, s->t1);
            (void)nt;
        }
    }
    fprintf(f, "</svg>\n");
    int bad = ferror(f);
    if (fclose(f) || bad) return -1;
    return 0;
}
