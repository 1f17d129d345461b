/* wpgen probe (probe.h): the machine read from /sys and nvidia-smi, written as topology JSON, and
 * several hosts' topologies merged into one cluster. Figures a machine does not tell (a GPU's
 * peak, a CPU's FLOP/s and memory bandwidth, link latencies) come from the tables here: rated
 * figures for known GPUs, nominal ones for CPUs and latencies, which `wpgen calibrate` replaces
 * with measured ones. */
#include <ctype.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <sys/stat.h>
#include "input/probe.h"
#include "input/topology.h"
#include "common/errmsg.h"

/* Rated figures of GPUs, the first row whose match is in nvidia-smi's name (case-insensitive)
 * applies: dense bf16 TFLOP/s, HBM GB/s, GB/s of one NVLink per direction, GB/s of the PCIe slot
 * per direction (Gen4 x16 about 25 effective, Gen5 about 50). From the vendors' datasheets. */
static const struct GpuFigures {
    const char *match;
    double tflops, hbm_GBps, nvlink_GBps, pcie_GBps;
} gpu_table[] = {
    { "H100 NVL", 835, 3900, 25, 50 },
    { "H100 PCIe", 756, 2000, 25, 50 },
    { "H100", 989, 3350, 25, 50 },      /* SXM5: "NVIDIA H100 80GB HBM3" */
    { "H200", 989, 4800, 25, 50 },
    { "H800", 989, 3350, 25, 50 },
    { "GH200", 989, 4000, 25, 50 },
    { "B200", 2250, 8000, 50, 50 },
    { "A100-PCIE-40GB", 312, 1555, 25, 25 },
    { "A100-SXM4-40GB", 312, 1555, 25, 25 },
    { "A100 80GB PCIe", 312, 1935, 25, 25 },
    { "A100-PCIE", 312, 1935, 25, 25 },
    { "A100", 312, 2039, 25, 25 },      /* SXM4 80GB */
    { "A800 80GB PCIe", 312, 1935, 25, 25 },
    { "A800-PCIE", 312, 1935, 25, 25 },
    { "A800", 312, 2039, 25, 25 },
    { "L40S", 362, 864, 0, 25 },
    { "L40", 181, 864, 0, 25 },
    { "L4", 121, 300, 0, 25 },
    { "A10G", 70, 600, 0, 25 },
    { "A10", 125, 600, 0, 25 },
    { "RTX 4090", 165, 1008, 0, 25 },
    { NULL, 0, 0, 0, 0 },
};

/* Nominal CPU figures: FLOPs per cycle and core in fp32 (two 8-wide FMA units), a clock where
 * the machine does not say, memory bandwidth per core; links as the CPU test topologies have. */
#define CPU_FLOPS_PER_CYCLE 32
#define CPU_DEFAULT_HZ 2.0e9
#define CPU_MEM_GBPS_PER_CORE 5.0
#define SHM_GBPS 10.0
#define SHM_LAT_US 1.0
#define NVL_LAT_US 3.0
#define PCI_LAT_US 5.0
#define ETH_LAT_US 10.0
#define IB_LAT_US 2.0

static const struct GpuFigures *gpu_figures(const char *name) {
    for (const struct GpuFigures *g = gpu_table; g->match; g++) {
        size_t n = strlen(g->match);
        for (const char *p = name; *p; p++)
            if (!strncasecmp(p, g->match, n)) return g;
    }
    return NULL;
}

/* The file root/rel into buf (NUL-terminated, at most len - 1 bytes). 0, or -1 if unreadable. */
static int read_file(const char *root, const char *rel, char *buf, size_t len) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    size_t n = fread(buf, 1, len - 1, f);
    int bad = ferror(f);
    fclose(f);
    buf[n] = 0;
    return bad ? -1 : 0;
}

/* Everything a command prints into a malloc'd string, or NULL if it fails. */
static char *run_cmd(const char *cmd) {
    FILE *p = popen(cmd, "r");
    if (!p) return NULL;
    size_t cap = 4096, n = 0;
    char *s = malloc(cap);
    for (size_t k; s && (k = fread(s + n, 1, cap - n - 1, p)) > 0;) {
        n += k;
        if (n + 1 == cap) { char *t = realloc(s, cap *= 2); if (!t) { free(s); s = NULL; } else s = t; }
    }
    int rc = pclose(p);
    if (!s) return NULL;
    s[n] = 0;
    if (rc != 0) { free(s); return NULL; }
    return s;
}

/* CPUs in a cpulist: "0-55,112-167" -> 112. */
static int cpulist_count(const char *s) {
    int n = 0;
    while (*s) {
        char *end;
        long a = strtol(s, &end, 10), b = a;
        if (end == s) break;
        if (*end == '-') b = strtol(end + 1, &end, 10);
        if (b >= a) n += (int)(b - a + 1);
        s = end;
        while (*s == ',' || isspace((unsigned char)*s)) s++;
    }
    return n;
}

static int is_dir(const char *root, const char *rel) {
    char path[4200];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", root, rel);
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static void take_nic(ProbeHost *h, double bps, int ib) {
    if (bps > h->nic_bps * (1 + 1e-9)) { h->nic_bps = bps; h->nics = 1; h->infiniband = ib; }
    else if (fabs(bps - h->nic_bps) <= 1e-9 * bps) { h->nics++; h->infiniband |= ib; }
}

static void probe_nics(const char *root, ProbeHost *h) {
    char dir[4200], rel[1024], buf[256];
    snprintf(dir, sizeof dir, "%s/sys/class/net", root);
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));) {
        if (e->d_name[0] == '.' || !strcmp(e->d_name, "lo")) continue;
        snprintf(rel, sizeof rel, "sys/class/net/%s/device", e->d_name);
        char path[4200];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", root, rel);
        if (stat(path, &st) != 0) continue;   /* virtual: bridges, tunnels, ifb */
        snprintf(rel, sizeof rel, "sys/class/net/%s/speed", e->d_name);
        if (read_file(root, rel, buf, sizeof buf)) continue;
        long mbps = strtol(buf, NULL, 10);
        /* an InfiniBand port's net device (IPoIB) is counted as its HCA port below */
        snprintf(rel, sizeof rel, "sys/class/net/%s/type", e->d_name);
        char type[32] = "";
        if (read_file(root, rel, type, sizeof type) == 0 && atoi(type) == 32) continue;
        if (mbps > 0) take_nic(h, mbps * 1e6, 0);
    }
    if (d) closedir(d);
    snprintf(dir, sizeof dir, "%s/sys/class/infiniband", root);
    d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        char pdir[4600];
        snprintf(pdir, sizeof pdir, "%s/%s/ports", dir, e->d_name);
        DIR *pd = opendir(pdir);
        for (struct dirent *pe; pd && (pe = readdir(pd));) {
            if (pe->d_name[0] == '.') continue;
            snprintf(rel, sizeof rel, "sys/class/infiniband/%s/ports/%s/rate", e->d_name, pe->d_name);
            if (read_file(root, rel, buf, sizeof buf)) continue;
            /* "400 Gb/sec (4X NDR)"; a port that is down reads its rate too: state says */
            double gbps = strtod(buf, NULL);
            snprintf(rel, sizeof rel, "sys/class/infiniband/%s/ports/%s/state", e->d_name, pe->d_name);
            if (read_file(root, rel, buf, sizeof buf) == 0 && !strstr(buf, "ACTIVE")) continue;
            if (gbps > 0) take_nic(h, gbps * 1e9, 1);
        }
        if (pd) closedir(pd);
    }
    if (d) closedir(d);
}

int probe_host(const char *root, int smi_cmd, ProbeHost *h, char *err, size_t errlen) {
    memset(h, 0, sizeof *h);
    char buf[65536];
    if (read_file(root, "etc/hostname", h->name, sizeof h->name) || !h->name[0]) {
        if (gethostname(h->name, sizeof h->name)) snprintf(h->name, sizeof h->name, "host");
    }
    h->name[strcspn(h->name, " \t\r\n")] = 0;
    if (!h->name[0] || !host_name_ok(h->name)) snprintf(h->name, sizeof h->name, "host");
    /* NUMA nodes, each's CPUs and memory */
    for (int i = 0; i < PROBE_MAX_NUMA; i++) {
        char rel[256];
        snprintf(rel, sizeof rel, "sys/devices/system/node/node%d", i);
        if (!is_dir(root, rel)) break;
        snprintf(rel, sizeof rel, "sys/devices/system/node/node%d/cpulist", i);
        if (read_file(root, rel, buf, sizeof buf)) return errmsg(err, errlen, "%s/%s: cannot read", root, rel);
        h->cores[h->numa] = cpulist_count(buf);
        snprintf(rel, sizeof rel, "sys/devices/system/node/node%d/meminfo", i);
        const char *m = read_file(root, rel, buf, sizeof buf) == 0 ? strstr(buf, "MemTotal:") : NULL;
        h->mem_bytes[h->numa] = m ? strtod(m + 9, NULL) * 1024 : 0;
        if (h->cores[h->numa] > 0) h->numa++;   /* memory-only nodes hold no CPU to run a rank */
    }
    if (h->numa == 0) {
        /* no NUMA information: one node of every online CPU */
        if (read_file(root, "sys/devices/system/cpu/online", buf, sizeof buf))
            return errmsg(err, errlen, "%s/sys/devices/system/cpu/online: cannot read (no NUMA nodes either)", root);
        h->cores[0] = cpulist_count(buf);
        if (h->cores[0] <= 0) {
            buf[strcspn(buf, "\n")] = 0;
            return errmsg(err, errlen, "%s/sys/devices/system/cpu/online: expected a list of CPUs such as 0-15, got \"%.40s\"",
                          root, buf);
        }
        h->numa = 1;
    }
    if (read_file(root, "sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq", buf, sizeof buf) == 0) h->cpu_hz = strtod(buf, NULL) * 1e3;
    probe_nics(root, h);
    /* GPUs */
    char *query = NULL, *topo = NULL;
    if (smi_cmd) {
        query = run_cmd("nvidia-smi --query-gpu=name,memory.total --format=csv 2>/dev/null");
        if (query) topo = run_cmd("nvidia-smi topo -m 2>/dev/null");
    } else if (read_file(root, "nvidia-smi-query-gpu.csv", buf, sizeof buf) == 0) {
        query = strdup(buf);
        if (read_file(root, "nvidia-smi-topo-m.txt", buf, sizeof buf) == 0) topo = strdup(buf);
        else { free(query); return errmsg(err, errlen, "%s/nvidia-smi-topo-m.txt: cannot read (nvidia-smi-query-gpu.csv is there)", root); }
    }
    int rc = 0;
    if (query) {
        char qname[4400], tname[4400];
        snprintf(qname, sizeof qname, smi_cmd ? "nvidia-smi --query-gpu" : "%.4200s/nvidia-smi-query-gpu.csv", root);
        snprintf(tname, sizeof tname, smi_cmd ? "nvidia-smi topo -m" : "%.4200s/nvidia-smi-topo-m.txt", root);
        int n = smi_parse_query(qname, query, h->gpus, SMI_MAX_GPUS, err, errlen);
        if (n < 0) rc = -1;
        else if (!topo) rc = errmsg(err, errlen, "nvidia-smi topo -m failed");
        else if (smi_parse_topo(tname, topo, &h->topo, err, errlen)) rc = -1;
        else if (h->topo.ngpus != n) rc = errmsg(err, errlen, "%s lists %d GPUs, %s %d", qname, n, tname, h->topo.ngpus);
        else {
            h->ngpus = n;
            for (int i = 1; i < n; i++)
                if (strcmp(h->gpus[i].name, h->gpus[0].name))
                    rc = errmsg(err, errlen, "%s: GPU%d is a %s, GPU0 a %s: a node of one GPU type is all the topology format holds", qname, i, h->gpus[i].name, h->gpus[0].name);
        }
    }
    free(query); free(topo);
    return rc;
}

/* The topology format's device type name of a GPU: nvidia-smi's name without "NVIDIA ", spaces
 * as dashes ("NVIDIA H100 80GB HBM3" -> "H100-80GB-HBM3"). */
static void type_name(const char *gpu, char *out, size_t len) {
    if (!strncmp(gpu, "NVIDIA ", 7)) gpu += 7;
    snprintf(out, len, "%s", gpu);
    for (char *p = out; *p; p++) if (isspace((unsigned char)*p)) *p = '-';
}

/* Rounds to 4 significant digits: figures as a person would write them. */
static double round4(double x) {
    if (x <= 0) return x;
    double m = pow(10, 3 - floor(log10(x)));
    return round(x * m) / m;
}

json_t *probe_topology(const ProbeHost *h, double peak_tflops, double hbm_GBps, char *err, size_t errlen) {
    json_t *root = json_object(), *types = json_object(), *node = json_object(), *intra = json_object();
    char about[1024], tname[128];
    if (h->ngpus > 0) {
        const struct GpuFigures *g = gpu_figures(h->gpus[0].name);
        if (!g && !(peak_tflops > 0 && hbm_GBps > 0)) {
            json_decref(root); json_decref(types); json_decref(node); json_decref(intra);
            errmsg(err, errlen, "no figures for the GPU \"%s\": give them with --peak-tflops (dense bf16) and --hbm-GBps", h->gpus[0].name);
            return NULL;
        }
        type_name(h->gpus[0].name, tname, sizeof tname);
        double tf = peak_tflops > 0 ? peak_tflops : g->tflops, hbm = hbm_GBps > 0 ? hbm_GBps : g->hbm_GBps;
        json_object_set_new(types, tname, json_pack("{s:f, s:f, s:f}", "peak_tflops_bf16", tf, "mem_gb", round4(h->gpus[0].mem_bytes / 1e9), "hbm_GBps", hbm));
        /* inside the node: NVLink if every pair has some (the fewest links decide), else PCIe with
         * the islands of GPUs behind one switch */
        int minlinks = 1 << 30, islands = 1;
        for (int i = 0; i < h->ngpus; i++)
            for (int j = 0; j < h->ngpus; j++)
                if (i != j && smi_nvlinks(h->topo.link[i][j]) < minlinks) minlinks = smi_nvlinks(h->topo.link[i][j]);
        if (h->ngpus == 1) minlinks = 0;
        double nvl = g ? g->nvlink_GBps : 25, pcie = g ? g->pcie_GBps : 25;
        if (minlinks > 0) {
            json_object_set_new(intra, "type", json_string("NVL"));
            json_object_set_new(intra, "bw_GBps", json_real(minlinks * nvl));
            json_object_set_new(intra, "lat_us", json_real(NVL_LAT_US));
        } else {
            /* islands: GPUs connected through switches only (PIX, PXB), if they come in equal groups */
            int comp[SMI_MAX_GPUS], ncomp = 0, size[SMI_MAX_GPUS] = { 0 };
            for (int i = 0; i < h->ngpus; i++) comp[i] = -1;
            for (int i = 0; i < h->ngpus; i++) {
                if (comp[i] >= 0) continue;
                comp[i] = ncomp;
                for (int j = i + 1; j < h->ngpus; j++)
                    if (comp[j] < 0 && smi_same_switch(h->topo.link[i][j])) comp[j] = ncomp;
                ncomp++;
            }
            for (int i = 0; i < h->ngpus; i++) size[comp[i]]++;
            int equal = 1;
            for (int c = 1; c < ncomp; c++) equal &= size[c] == size[0];
            islands = equal ? ncomp : 1;
            json_object_set_new(intra, "type", json_string("PCI"));
            json_object_set_new(intra, "bw_GBps", json_real(pcie));
            json_object_set_new(intra, "lat_us", json_real(PCI_LAT_US));
        }
        snprintf(about, sizeof about, "wpgen probe of %s: %d x %s (%s, %s); figures: the GPU's datasheet (probe's table), "
                 "link latencies nominal; wpgen calibrate measures them", h->name, h->ngpus, h->gpus[0].name,
                 minlinks > 0 ? "NVLink" : "PCIe", islands > 1 ? "PCIe islands" : "one PCIe domain");
        json_object_set_new(node, "name", json_string(h->name));
        json_object_set_new(node, "devices", json_integer(h->ngpus));
        if (islands > 1) json_object_set_new(node, "islands", json_integer(islands));
        json_object_set_new(node, "type", json_string(tname));
    } else {
        /* one device per NUMA node, the smallest's figures */
        int cores = h->cores[0];
        double mem = h->mem_bytes[0];
        for (int i = 1; i < h->numa; i++) {
            if (h->cores[i] < cores) cores = h->cores[i];
            if (h->mem_bytes[i] > 0 && (mem <= 0 || h->mem_bytes[i] < mem)) mem = h->mem_bytes[i];
        }
        if (mem <= 0) mem = 4e9;
        double hz = h->cpu_hz > 0 ? h->cpu_hz : CPU_DEFAULT_HZ;
        snprintf(tname, sizeof tname, "cpu");
        json_object_set_new(types, tname, json_pack("{s:f, s:f, s:f}", "peak_tflops_fp32", round4(cores * hz * CPU_FLOPS_PER_CYCLE / 1e12),
                                                    "mem_gb", round4(mem / 1e9), "hbm_GBps", round4(cores * CPU_MEM_GBPS_PER_CORE)));
        snprintf(about, sizeof about, "wpgen probe of %s: %d NUMA node%s of %d CPUs, one device each; FLOP/s nominal (%d per cycle and core "
                 "at %.3g GHz), memory bandwidth nominal; wpgen calibrate measures them", h->name, h->numa, h->numa > 1 ? "s" : "", cores,
                 CPU_FLOPS_PER_CYCLE, hz / 1e9);
        json_object_set_new(node, "name", json_string(h->name));
        json_object_set_new(node, "devices", json_integer(h->numa));
        json_object_set_new(node, "type", json_string(tname));
        /* the cores its ranks share: with more ranks than cores (a topology edited to run several
         * ranks per NUMA node) the simulator shares them (docs/calibration.md) */
        int total = 0;
        for (int i = 0; i < h->numa; i++) total += h->cores[i];
        json_object_set_new(node, "cores", json_integer(total));
        json_object_set_new(intra, "type", json_string("SHM"));
        json_object_set_new(intra, "bw_GBps", json_real(SHM_GBPS));
        json_object_set_new(intra, "lat_us", json_real(SHM_LAT_US));
    }
    json_object_set_new(node, "intra", intra);
    json_object_set_new(root, "version", json_integer(1));
    json_object_set_new(root, "name", json_string(h->name));
    json_object_set_new(root, "about", json_string(about));
    json_object_set_new(root, "device_types", types);
    json_t *nodes = json_array();
    json_array_append_new(nodes, node);
    json_object_set_new(root, "nodes", nodes);
    if (h->nic_bps > 0)
        json_object_set_new(root, "network", json_pack("{s:s, s:f, s:f, s:i}", "type", "NET", "bw_GBps", round4(h->nic_bps / 8e9),
                                                       "lat_us", h->infiniband ? IB_LAT_US : ETH_LAT_US, "nics_per_node", h->nics));
    return root;
}

json_t *probe_merge(const char *const *paths, int n, char *err, size_t errlen) {
    json_t *out = json_object(), *types = json_object(), *nodes = json_array(), *net = NULL;
    char name[256] = "";
    int rc = 0;
    const char **node_file = calloc(1, sizeof *node_file);
    for (int i = 0; i < n && !rc; i++) {
        Topology t;
        char terr[1024];
        if (topology_load(paths[i], &t, terr, sizeof terr)) { rc = errmsg(err, errlen, "%s", terr); break; }
        topology_free(&t);
        json_t *root = json_load_file(paths[i], JSON_REJECT_DUPLICATES, NULL);
        const char *key;
        json_t *v;
        json_object_foreach(json_object_get(root, "device_types"), key, v) {
            json_t *have = json_object_get(types, key);
            if (have && !json_equal(have, v)) { rc = errmsg(err, errlen, "%s: device_types.%s: other figures than the %s of an earlier file", paths[i], key, key); break; }
            if (!have) json_object_set(types, key, v);
        }
        size_t k;
        json_array_foreach(json_object_get(root, "nodes"), k, v) {
            if (rc) break;
            const char *nn = json_string_value(json_object_get(v, "name"));
            for (size_t q = 0; q < json_array_size(nodes); q++)
                if (!strcmp(nn, json_string_value(json_object_get(json_array_get(nodes, q), "name"))))
                    rc = errmsg(err, errlen, "%s: nodes[%zu].name: \"%s\" is also a node of %s (probe each host once; rename one)", paths[i], k, nn, node_file[q]);
            const char **nf = realloc(node_file, (json_array_size(nodes) + 2) * sizeof *nf);
            if (!nf) { rc = errmsg(err, errlen, "out of memory"); break; }
            node_file = nf;
            node_file[json_array_size(nodes)] = paths[i];
            json_array_append(nodes, v);
        }
        json_t *nw = json_object_get(root, "network");
        if (!rc && !nw) rc = errmsg(err, errlen, "%s: network: expected the host's network (probe found no NIC speed there; add one)", paths[i]);
        if (!rc) {
            if (!net) net = json_deep_copy(nw);
            else {
                /* the slowest host's network: its bandwidth, the largest latency, the fewest NICs */
                json_t *b = json_object_get(nw, "bw_GBps"), *l = json_object_get(nw, "lat_us"), *c = json_object_get(nw, "nics_per_node");
                if (json_number_value(b) < json_number_value(json_object_get(net, "bw_GBps"))) json_object_set(net, "bw_GBps", b);
                if (json_number_value(l) > json_number_value(json_object_get(net, "lat_us"))) json_object_set(net, "lat_us", l);
                long nc = c ? (long)json_integer_value(c) : 1, have = json_object_get(net, "nics_per_node") ? (long)json_integer_value(json_object_get(net, "nics_per_node")) : 1;
                json_object_set_new(net, "nics_per_node", json_integer(nc < have ? nc : have));
            }
            size_t l = strlen(name);
            snprintf(name + l, sizeof name - l, "%s%s", l ? "+" : "", json_string_value(json_object_get(root, "name")));
        }
        json_decref(root);
    }
    free(node_file);
    if (rc) { json_decref(out); json_decref(types); json_decref(nodes); json_decref(net); return NULL; }
    char about[512];
    snprintf(about, sizeof about, "wpgen probe --merge of %d host%s: the network is the slowest host's", n, n > 1 ? "s" : "");
    json_object_set_new(out, "version", json_integer(1));
    json_object_set_new(out, "name", json_string(name));
    json_object_set_new(out, "about", json_string(about));
    json_object_set_new(out, "device_types", types);
    json_object_set_new(out, "nodes", nodes);
    if (net) json_object_set_new(out, "network", net);
    return out;
}
