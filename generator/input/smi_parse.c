/* nvidia-smi's text, parsed (smi_parse.h). `topo -m` prints a tab-separated matrix: a header line
 * of column names (GPU0 ... GPUn, then NIC columns and "CPU Affinity", "NUMA Affinity", "GPU NUMA
 * ID" on recent drivers), one line per GPU (and per NIC) starting with its name, cells such as
 * " X ", "NV18", "PIX", "SYS", then a blank line and the legend. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "input/smi_parse.h"
#include "common/errmsg.h"

/* Splits a line at tabs into trimmed cells; returns how many (at most max). */
static int split_tabs(char *line, char **cells, int max) {
    int n = 0;
    char *p = line;
    while (n < max) {
        char *tab = strchr(p, '\t');
        if (tab) *tab = 0;
        while (isspace((unsigned char)*p)) p++;
        char *e = p + strlen(p);
        while (e > p && isspace((unsigned char)e[-1])) *--e = 0;
        cells[n++] = p;
        if (!tab) break;
        p = tab + 1;
    }
    return n;
}

static int gpu_index(const char *s) {
    if (strncmp(s, "GPU", 3) || !isdigit((unsigned char)s[3])) return -1;
    char *end;
    long i = strtol(s + 3, &end, 10);
    return *end || i >= SMI_MAX_GPUS ? -1 : (int)i;
}

int smi_parse_topo(const char *name, const char *text, SmiTopo *t, char *err, size_t errlen) {
    memset(t, 0, sizeof *t);
    char *copy = strdup(text), *save = NULL;
    if (!copy) return errmsg(err, errlen, "%s: out of memory", name);
    int col_of_gpu[SMI_MAX_GPUS], ncols = 0, have_header = 0, rows = 0, rc = 0, lineno = 0;
    char *cells[256];
    for (char *line = strtok_r(copy, "\n", &save); line && !rc; line = strtok_r(NULL, "\n", &save)) {
        lineno++;
        char *cr = strchr(line, '\r');
        if (cr) *cr = 0;
        /* strip the colour escapes nvidia-smi writes to a terminal */
        for (char *p = line; (p = strchr(p, '\033'));) {
            char *m = strchr(p, 'm');
            if (!m) break;
            memmove(p, m + 1, strlen(m + 1) + 1);
        }
        int n = split_tabs(line, cells, 256);
        if (!have_header) {
            /* the header: starts with a tab (an empty first cell), then GPU0 ... */
            if (n < 2 || cells[0][0] || gpu_index(cells[1]) != 0) continue;
            for (int c = 1; c < n; c++) {
                int g = gpu_index(cells[c]);
                if (g < 0) break;
                if (g != ncols) { rc = errmsg(err, errlen, "%s: line %d: expected column GPU%d, got \"%.20s\"", name, lineno, ncols, cells[c]); break; }
                col_of_gpu[ncols++] = c;
            }
            have_header = 1;
            continue;
        }
        if (n == 0 || !cells[0][0]) { if (rows) break; continue; }   /* the blank line before the legend */
        int g = gpu_index(cells[0]);
        if (g < 0) continue;   /* a NIC row */
        if (g != rows) { rc = errmsg(err, errlen, "%s: line %d: expected the row of GPU%d, got \"%.20s\"", name, lineno, rows, cells[0]); break; }
        if (n <= col_of_gpu[ncols - 1]) { rc = errmsg(err, errlen, "%s: line %d: GPU%d's row has %d cells, expected at least %d", name, lineno, g, n - 1, ncols); break; }
        for (int j = 0; j < ncols; j++) {
            const char *c = cells[col_of_gpu[j]];
            int ok = (j == g) == !strcmp(c, "X") && (smi_nvlinks(c) > 0 || !strcmp(c, "X") || !strcmp(c, "PIX") || !strcmp(c, "PXB") ||
                     !strcmp(c, "PHB") || !strcmp(c, "NODE") || !strcmp(c, "SYS") || !strcmp(c, "SOC"));
            if (!ok) { rc = errmsg(err, errlen, "%s: line %d: GPU%d to GPU%d: expected X (itself), NV<n>, PIX, PXB, PHB, NODE or SYS, got \"%.20s\"", name, lineno, g, j, c); break; }
            snprintf(t->link[g][j], sizeof t->link[g][j], "%s", c);
        }
        rows++;
    }
    free(copy);
    if (rc) return -1;
    if (!have_header || ncols == 0) return errmsg(err, errlen, "%s: expected the matrix of nvidia-smi topo -m (a header line of GPU0, GPU1, ...)", name);
    if (rows != ncols) return errmsg(err, errlen, "%s: expected %d GPU rows (the header's columns), got %d", name, ncols, rows);
    for (int i = 0; i < ncols; i++)
        for (int j = 0; j < ncols; j++)
            if (strcmp(t->link[i][j], t->link[j][i]))
                return errmsg(err, errlen, "%s: GPU%d to GPU%d is %s but GPU%d to GPU%d is %s", name, i, j, t->link[i][j], j, i, t->link[j][i]);
    t->ngpus = ncols;
    return 0;
}

int smi_parse_query(const char *name, const char *text, SmiGpu *gpus, int max, char *err, size_t errlen) {
    char *copy = strdup(text), *save = NULL;
    if (!copy) return errmsg(err, errlen, "%s: out of memory", name);
    int n = 0, lineno = 0, rc = 0;
    for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        lineno++;
        char *cr = strchr(line, '\r');
        if (cr) *cr = 0;
        if (lineno == 1) {
            if (strncmp(line, "name, memory.total", 18)) { rc = errmsg(err, errlen, "%s: line 1: expected the header \"name, memory.total [MiB]\", got \"%.40s\"", name, line); break; }
            continue;
        }
        if (!*line) continue;
        char *comma = strrchr(line, ',');
        double mib = 0;
        char unit[8] = "";
        if (!comma || sscanf(comma + 1, " %lf %7s", &mib, unit) != 2 || strcmp(unit, "MiB") || mib <= 0) {
            rc = errmsg(err, errlen, "%s: line %d: expected \"NAME, MEMORY MiB\", got \"%.60s\"", name, lineno, line);
            break;
        }
        if (n == max) { rc = errmsg(err, errlen, "%s: more than %d GPUs", name, max); break; }
        *comma = 0;
        snprintf(gpus[n].name, sizeof gpus[n].name, "%s", line);
        gpus[n].mem_bytes = mib * 1048576.0;
        n++;
    }
    free(copy);
    if (rc) return -1;
    if (n == 0) return errmsg(err, errlen, "%s: no GPU listed", name);
    return n;
}

int smi_nvlinks(const char *cell) {
    if (strncmp(cell, "NV", 2) || !isdigit((unsigned char)cell[2])) return 0;
    return atoi(cell + 2);
}

int smi_same_switch(const char *cell) {
    return !strcmp(cell, "PIX") || !strcmp(cell, "PXB");
}
