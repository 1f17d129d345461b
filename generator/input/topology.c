/* Loads a cluster description (topology JSON, version 1) with Jansson and checks it field by
 * field, so that everything downstream (Lua strategies, verifier, simulator) can trust it.
 *
 * Every error is one line: "FILE: JSON.PATH: expected WHAT, got WHAT", e.g.
 *   topologies/x.json: nodes[1].devices: expected a positive integer, got "8"
 * Unknown keys are rejected (they are usually typos of optional fields, which would otherwise be
 * silently replaced by their defaults).
 *
 * Units: the file says GB/s, GB, TFLOP/s and µs; the structures hold bytes/s, bytes, FLOP/s and
 * seconds. GB is 1e9 bytes (not GiB), as vendors quote memory and bandwidth, so that published
 * figures can be copied as they are. The network's bw_GBps is per NIC; a node has nics_per_node. */
#include <ctype.h>
#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <jansson.h>
#include "common/hash64.h"
#include "input/topology.h"
#include "common/errmsg.h"
#include "common/jsonfile.h"

#define GIGA 1e9
#define TERA 1e12
#define MICRO 1e-6
/* Sanity bounds, far beyond any real cluster, so that nothing downstream has to think about
 * overflow or about times that vanish next to others: at most 2^17 devices in all (device
 * indices, rank counts and per-rank tables stay small), and every figure within a range that
 * keeps the simulator's sums finite and meaningful (a zero, tiny or astronomical bandwidth would
 * make one transfer take forever or no time at all). Units as in the file. */
#define MAX_DEVICES (1 << 17)
#define MAX_TYPES 1024
static const double BW_RANGE[2] = { 1e-3, 1e6 };        /* GB/s: 1 MB/s to 1 PB/s (bw_GBps, hbm_GBps) */
static const double LAT_RANGE[2] = { 0, 1e6 };          /* µs: up to a second */
static const double TFLOPS_RANGE[2] = { 1e-6, 1e6 };    /* TFLOP/s: 1 MFLOP/s to an exaFLOP/s */
static const double MEM_RANGE[2] = { 1e-3, 1e6 };       /* GB: 1 MB to 1 PB */

/* A device type's host link (host_GBps) where the file gives none: what a pinned-memory copy
 * reaches in one direction on the link such a device sits on. The first row whose name the type's
 * name contains (any case) wins, so GH200 comes before H200. A GPU in no row gets PCIe 4 x16's;
 * a CPU device (rated in fp32) its own memory bandwidth: its host memory is its memory. */
static const struct { const char *name; double GBps; } host_link_defaults[] = {
    { "GH200", 450 },   /* NVLink-C2C to the Grace CPU, 450 GB/s each way */
    { "H100", 55 },     /* PCIe 5 x16: 64 GB/s raw, about 55 in a copy */
    { "H200", 55 },
    { "H800", 55 },
    { "B200", 55 },
    { "A100", 25 },     /* PCIe 4 x16: 32 GB/s raw, about 25 in a copy */
    { "A800", 25 },
};
#define HOST_LINK_OTHER_GPU_GBPS 25

/* Names seen so far -> their index (device types, nodes): an open-addressing hash table, so
 * that checking 10^5 node names for duplicates is linear (comparing every pair took 16 s).
 * Keys are borrowed: they live in the Topology being built. */
typedef struct NameIndex {
    const char **keys;
    int *vals;
    size_t cap;         /* a power of two, at least twice the entries */
} NameIndex;

static uint64_t name_hash(const char *s) { return wp_fnv1a_str(WP_FNV_OFFSET, s); }

static int names_init(NameIndex *ix, size_t n) {
    ix->cap = 16;
    while (ix->cap < 2 * n) ix->cap *= 2;
    ix->keys = calloc(ix->cap, sizeof *ix->keys);
    ix->vals = calloc(ix->cap, sizeof *ix->vals);
    return ix->keys && ix->vals ? 0 : -1;
}

static void names_free(NameIndex *ix) {
    free(ix->keys);
    free(ix->vals);
    memset(ix, 0, sizeof *ix);
}

/* The slot of name: where it is, or the empty slot where it would go. */
static size_t names_slot(const NameIndex *ix, const char *name) {
    size_t i = (size_t)name_hash(name) & (ix->cap - 1);
    while (ix->keys[i] && strcmp(ix->keys[i], name) != 0) i = (i + 1) & (ix->cap - 1);
    return i;
}

static int names_find(const NameIndex *ix, const char *name) {
    size_t i = names_slot(ix, name);
    return ix->keys[i] ? ix->vals[i] : -1;
}

/* Adds name (not present; names_init sized the table for every entry). */
static void names_add(NameIndex *ix, const char *name, int value) {
    size_t i = names_slot(ix, name);
    ix->keys[i] = name;
    ix->vals[i] = value;
}

/* Where we are: the file (for messages), the caller's error buffer, and the names so far. */
typedef struct Ctx {
    const char *file;
    char *err;
    size_t errlen;
    NameIndex type_names, node_names;
} Ctx;

/* A message in the form of every JSON loader's (common/jsonfile.h): "FILE: ...", one line. */
#define fail(cx, ...) wp_json_fail((cx)->err, (cx)->errlen, (cx)->file, __VA_ARGS__)

/* The one message form of every JSON loader (common/jsonfile.h): "FILE: JPATH: expected WHAT, got <v>". */
static int expected(Ctx *cx, const char *jpath, const char *what, const json_t *v) {
    return wp_json_expected(cx->err, cx->errlen, cx->file, jpath, what, v);
}

static void join_path(char *out, size_t n, const char *parent, const char *key) {
    /* An absurdly long key is cut short: that only shortens a message. */
    int len = parent[0] ? snprintf(out, n, "%s.%s", parent, key) : snprintf(out, n, "%s", key);
    if (len < 0 && n) out[0] = '\0';
}

/* Rejects any key of obj not in allowed (NULL-terminated), naming the first one found. */
static int check_keys(Ctx *cx, const json_t *obj, const char *jpath, const char *const *allowed) {
    return wp_json_check_keys(cx->err, cx->errlen, cx->file, obj, jpath, allowed);
}

/* Field readers. Each takes the parent object and its path, and reports the field's own path.
 * opt_*: a missing field keeps *out as the caller's default. */
enum { POSITIVE, NONNEGATIVE, FRACTION };

/* A number of the given kind, then within range[0..1] (NULL: no range). */
static int get_number(Ctx *cx, const json_t *obj, const char *parent, const char *key, int kind,
                      const double *range, int required, double *out) {
    char jpath[256];
    join_path(jpath, sizeof jpath, parent, key);
    json_t *v = json_object_get(obj, key);
    if (!v && !required) return 0;
    static const char *const what[] = {
        [POSITIVE] = "a positive number", [NONNEGATIVE] = "a number >= 0",
        [FRACTION] = "a number in (0, 1]",
    };
    if (!json_is_number(v)) return expected(cx, jpath, what[kind], v);
    double x = json_number_value(v);
    int ok = kind == POSITIVE ? x > 0 : kind == NONNEGATIVE ? x >= 0 : (x > 0 && x <= 1);
    if (!ok) return expected(cx, jpath, what[kind], v);
    if (range && !(x >= range[0] && x <= range[1])) {
        char within[96];
        snprintf(within, sizeof within, "a number in [%g, %g]", range[0], range[1]);
        return expected(cx, jpath, within, v);
    }
    *out = x;
    return 0;
}

int host_name_ok(const char *s) {
    size_t n = strlen(s);
    if (n == 0 || n > 253 || s[0] == '-' || s[0] == '.') return 0;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && s[i] != '-' && s[i] != '.' && s[i] != '_') return 0;
    return 1;
}

static int get_count(Ctx *cx, const json_t *obj, const char *parent, const char *key, int required, int *out) {
    char jpath[256];
    join_path(jpath, sizeof jpath, parent, key);
    json_t *v = json_object_get(obj, key);
    if (!v && !required) return 0;
    /* An integer in JSON, not 8.0: counts are written as counts. */
    if (!json_is_integer(v) || json_integer_value(v) <= 0 || json_integer_value(v) > MAX_DEVICES) {
        char within[64];
        snprintf(within, sizeof within, "an integer in [1, %d]", MAX_DEVICES);
        return expected(cx, jpath, within, v);
    }
    *out = (int)json_integer_value(v);
    return 0;
}

static int get_string(Ctx *cx, const json_t *obj, const char *parent, const char *key, const char **out) {
    char jpath[256];
    join_path(jpath, sizeof jpath, parent, key);
    json_t *v = json_object_get(obj, key);
    if (!json_is_string(v) || json_string_length(v) == 0) return expected(cx, jpath, "a non-empty string", v);
    *out = json_string_value(v);
    return 0;
}

static int get_object(Ctx *cx, const json_t *obj, const char *parent, const char *key, const json_t **out) {
    char jpath[256];
    join_path(jpath, sizeof jpath, parent, key);
    json_t *v = json_object_get(obj, key);
    if (!json_is_object(v)) return expected(cx, jpath, "an object", v);
    *out = v;
    return 0;
}

static char *dup_or_null(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

static const char *const link_names[LINK__COUNT] = {
    [LINK_LOC] = "LOC", [LINK_SHM] = "SHM", [LINK_PCI] = "PCI", [LINK_NVL] = "NVL", [LINK_NET] = "NET",
};

const char *link_type_name(LinkType t) {
    return (unsigned)t < LINK__COUNT ? link_names[t] : "?";
}

/* What people write for the classes (docs/topology.md), matched without regard to case as the
 * class names are: the simulator tells the classes apart, not the products. */
static const struct { const char *name; LinkType type; } link_aliases[] = {
    { "NVLink", LINK_NVL }, { "NVSwitch", LINK_NVL }, { "xGMI", LINK_NVL }, { "Infinity Fabric", LINK_NVL },
    { "PCIe", LINK_PCI },
    { "shared memory", LINK_SHM },
    { "IB", LINK_NET }, { "InfiniBand", LINK_NET }, { "RoCE", LINK_NET }, { "Ethernet", LINK_NET },
    { "EFA", LINK_NET }, { "TCP", LINK_NET },
};
enum { NLINK_ALIASES = sizeof link_aliases / sizeof link_aliases[0] };

/* The class a link's "type" names (a class or one of its aliases), or -1. */
static int link_type_of(const char *s) {
    for (int i = 0; i < LINK__COUNT; i++)
        if (!strcasecmp(s, link_names[i])) return i;
    for (int i = 0; i < NLINK_ALIASES; i++)
        if (!strcasecmp(s, link_aliases[i].name)) return link_aliases[i].type;
    return -1;
}

/* A link object { "type", "bw_GBps", "lat_us" } plus the caller's extra keys; the type must be
 * one of allowed (given in the order the message lists them). */
static int parse_link(Ctx *cx, const json_t *obj, const char *jpath, const LinkType *allowed, int nallowed,
                      const char *const *keys, Link *out) {
    if (check_keys(cx, obj, jpath, keys)) return -1;
    char tpath[256], list[400] = "";
    join_path(tpath, sizeof tpath, jpath, "type");
    /* the classes this link may be, each with what else names it: "NET (or IB, InfiniBand, ...)" */
    for (int i = 0; i < nallowed; i++) {
        size_t len = strlen(list);
        snprintf(list + len, sizeof list - len, "%s%s", i == 0 ? "" : i == nallowed - 1 ? " or " : ", ",
                 link_names[allowed[i]]);
        for (int a = 0, n = 0; a < NLINK_ALIASES; a++) {
            if (link_aliases[a].type != allowed[i]) continue;
            len = strlen(list);
            snprintf(list + len, sizeof list - len, "%s%s", n++ ? ", " : " (also ", link_aliases[a].name);
            if (a + 1 == NLINK_ALIASES || link_aliases[a + 1].type != allowed[i]) {
                len = strlen(list);
                snprintf(list + len, sizeof list - len, ")");
            }
        }
    }
    char what[480];
    snprintf(what, sizeof what, "a link type %s: %s (docs/topology.md)", strcmp(jpath, "network") ? "inside a node" : "between nodes", list);
    json_t *tv = json_object_get(obj, "type");
    int type = json_is_string(tv) ? link_type_of(json_string_value(tv)) : -1;
    int allowed_here = 0;
    for (int i = 0; i < nallowed; i++) allowed_here |= type == (int)allowed[i];
    if (!allowed_here) return expected(cx, tpath, what, tv);
    double bw = 0, lat = 0;
    if (get_number(cx, obj, jpath, "bw_GBps", POSITIVE, BW_RANGE, 1, &bw)) return -1;
    if (get_number(cx, obj, jpath, "lat_us", NONNEGATIVE, LAT_RANGE, 1, &lat)) return -1;
    out->type = (LinkType)type;
    out->bw = bw * GIGA;
    out->lat = lat * MICRO;
    return 0;
}

static int parse_device_types(Ctx *cx, const json_t *root, Topology *t) {
    const json_t *types = NULL;
    if (get_object(cx, root, "", "device_types", &types)) return -1;
    size_t n = json_object_size(types);
    if (n == 0) return expected(cx, "device_types", "at least one device type", types);
    if (n > MAX_TYPES) return fail(cx, "device_types: expected at most %d device types, got %zu", MAX_TYPES, n);
    t->types = calloc(n, sizeof *t->types);
    if (!t->types || names_init(&cx->type_names, n)) return fail(cx, "out of memory");
    static const char *const keys[] = {
        "peak_tflops_bf16", "peak_tflops_fp32", "mem_gb", "hbm_GBps", "efficiency", "host_GBps", NULL };
    const char *name = NULL;
    json_t *dt;
    json_object_foreach((json_t *)types, name, dt) {
        char jpath[256];
        join_path(jpath, sizeof jpath, "device_types", name);
        if (!json_is_object(dt)) return expected(cx, jpath, "an object", dt);
        if (check_keys(cx, dt, jpath, keys)) return -1;
        DeviceType *d = &t->types[t->ntypes];
        /* GPUs are rated in bf16 (what they train in), CPUs in fp32 (what the CPU backend runs). */
        int has_bf16 = json_object_get(dt, "peak_tflops_bf16") != NULL;
        int has_fp32 = json_object_get(dt, "peak_tflops_fp32") != NULL;
        if (has_bf16 && has_fp32)
            return fail(cx, "%s: expected one of peak_tflops_bf16 and peak_tflops_fp32, got both", jpath);
        double peak = 0;
        if (get_number(cx, dt, jpath, has_fp32 ? "peak_tflops_fp32" : "peak_tflops_bf16", POSITIVE, TFLOPS_RANGE, 1, &peak))
            return -1;
        double mem = 0, hbm = 0, eff = 0.5;
        if (get_number(cx, dt, jpath, "mem_gb", POSITIVE, MEM_RANGE, 1, &mem)) return -1;
        if (get_number(cx, dt, jpath, "hbm_GBps", POSITIVE, BW_RANGE, 1, &hbm)) return -1;
        if (get_number(cx, dt, jpath, "efficiency", FRACTION, NULL, 0, &eff)) return -1;
        double host = has_fp32 ? hbm : HOST_LINK_OTHER_GPU_GBPS;
        for (size_t i = 0; !has_fp32 && i < sizeof host_link_defaults / sizeof *host_link_defaults; i++)
            if (strcasestr(name, host_link_defaults[i].name)) { host = host_link_defaults[i].GBps; break; }
        if (get_number(cx, dt, jpath, "host_GBps", POSITIVE, BW_RANGE, 0, &host)) return -1;
        if (!(d->name = dup_or_null(name))) return fail(cx, "out of memory");
        names_add(&cx->type_names, d->name, t->ntypes);   /* unique: the JSON has no duplicate keys */
        t->ntypes++;
        d->peak_flops = peak * TERA;
        d->rated_bf16 = !has_fp32;
        d->mem_bytes = mem * GIGA;
        d->hbm_bw = hbm * GIGA;
        d->efficiency = eff;
        d->efficiency_set = json_object_get(dt, "efficiency") != NULL;
        d->host_bw = host * GIGA;
    }
    return 0;
}

static int parse_node(Ctx *cx, const json_t *nv, const char *jpath, Topology *t, Node *node) {
    static const char *const keys[] = { "name", "devices", "type", "intra", "islands", "cores", "host_mem_gb", NULL };
    static const char *const link_keys[] = { "type", "bw_GBps", "lat_us", NULL };
    static const LinkType intra_types[] = { LINK_NVL, LINK_PCI, LINK_SHM, LINK_LOC };
    if (!json_is_object(nv)) return expected(cx, jpath, "an object", nv);
    if (check_keys(cx, nv, jpath, keys)) return -1;
    const char *name = NULL, *type = NULL;
    if (get_string(cx, nv, jpath, "name", &name)) return -1;
    char fpath[256];
    join_path(fpath, sizeof fpath, jpath, "name");
    /* the name goes into the emitted rankfile and the batch script: a host name and nothing else */
    if (!host_name_ok(name)) return expected(cx, fpath, HOST_NAME_RULE, json_object_get(nv, "name"));
    int other = names_find(&cx->node_names, name);
    if (other >= 0)
        return fail(cx, "%s: expected a name no other node has, got \"%s\" (also nodes[%d])", fpath, name, other);
    if (get_count(cx, nv, jpath, "devices", 1, &node->ndevices)) return -1;
    if (get_string(cx, nv, jpath, "type", &type)) return -1;
    if ((node->type = names_find(&cx->type_names, type)) < 0) {
        char list[160] = "";
        for (int i = 0; i < t->ntypes; i++) {
            size_t len = strlen(list);
            snprintf(list + len, sizeof list - len, "%s%s", i ? ", " : "", t->types[i].name);
        }
        char what[224];
        join_path(fpath, sizeof fpath, jpath, "type");
        snprintf(what, sizeof what, "a device type from device_types (%s)", list);
        return expected(cx, fpath, what, json_object_get(nv, "type"));
    }
    const json_t *intra = NULL;
    if (get_object(cx, nv, jpath, "intra", &intra)) return -1;
    join_path(fpath, sizeof fpath, jpath, "intra");
    if (parse_link(cx, intra, fpath, intra_types, 4, link_keys, &node->intra)) return -1;
    node->islands = 1;
    if (get_count(cx, nv, jpath, "islands", 0, &node->islands)) return -1;
    if (node->ndevices % node->islands != 0) {
        char what[64];
        join_path(fpath, sizeof fpath, jpath, "islands");
        snprintf(what, sizeof what, "a divisor of devices (%d)", node->ndevices);
        return expected(cx, fpath, what, json_object_get(nv, "islands"));
    }
    node->cores = 0;
    if (get_count(cx, nv, jpath, "cores", 0, &node->cores)) return -1;
    double host_gb = HOST_MEM_DEFAULT_OF_DEVICES * node->ndevices * t->types[node->type].mem_bytes / GIGA;
    if (get_number(cx, nv, jpath, "host_mem_gb", POSITIVE, MEM_RANGE, 0, &host_gb)) return -1;
    node->host_mem = host_gb * GIGA;
    if (!(node->name = dup_or_null(name))) return fail(cx, "out of memory");
    names_add(&cx->node_names, node->name, (int)(node - t->nodes));
    return 0;
}

static int parse_nodes(Ctx *cx, const json_t *root, Topology *t) {
    json_t *nodes = json_object_get(root, "nodes");
    if (!json_is_array(nodes) || json_array_size(nodes) == 0)
        return expected(cx, "nodes", "a non-empty array", nodes);
    size_t n = json_array_size(nodes);
    /* Every node has a device: more nodes than devices allowed is refused before allocating. */
    if (n > MAX_DEVICES) return fail(cx, "nodes: expected at most %d nodes, got %zu", MAX_DEVICES, n);
    t->nodes = calloc(n, sizeof *t->nodes);
    if (!t->nodes || names_init(&cx->node_names, n)) return fail(cx, "out of memory");
    long long total = 0;
    for (size_t i = 0; i < n; i++) {
        char jpath[64];
        snprintf(jpath, sizeof jpath, "nodes[%zu]", i);
        Node *node = &t->nodes[i];
        int rc = parse_node(cx, json_array_get(nodes, i), jpath, t, node);
        t->nnodes++;   /* counted even on failure, so that topology_free() frees its name */
        if (rc) return -1;
        node->first_device = (int)total;
        total += node->ndevices;
        if (total > MAX_DEVICES)
            return fail(cx, "nodes: expected at most %d devices in all, got %lld", MAX_DEVICES, total);
    }
    t->ndevices = (int)total;
    return 0;
}

static int parse_network(Ctx *cx, const json_t *root, Topology *t) {
    static const char *const keys[] = { "type", "bw_GBps", "lat_us", "nics_per_node", NULL };
    /* CPU test clusters may model "nodes" as processes on one machine, hence SHM. */
    static const LinkType net_types[] = { LINK_NET, LINK_SHM };
    json_t *net = json_object_get(root, "network");
    t->nics_per_node = 1;
    if (!net && t->nnodes == 1) {
        /* Never used: one node has no traffic between nodes. Zero bandwidth makes any misuse
         * show up as an infinite time rather than a plausible one. */
        t->net = (Link){ LINK_NET, 0, 0 };
        return 0;
    }
    if (!json_is_object(net))
        return expected(cx, "network", net ? "an object" : "an object (required with more than one node)", net);
    if (parse_link(cx, net, "network", net_types, 2, keys, &t->net)) return -1;
    return get_count(cx, net, "network", "nics_per_node", 0, &t->nics_per_node);
}

static int parse_topology(Ctx *cx, const json_t *root, Topology *t) {
    static const char *const keys[] = { "version", "name", "about", "device_types", "nodes", "network", NULL };
    if (!json_is_object(root)) return expected(cx, "top level", "an object", root);
    /* The version first: a file of a later version may well have keys this one does not know. */
    json_t *version = json_object_get(root, "version");
    if (!json_is_integer(version) || json_integer_value(version) != 1)
        return expected(cx, "version", "1", version);
    if (check_keys(cx, root, "", keys)) return -1;
    const char *name = NULL;
    if (get_string(cx, root, "", "name", &name)) return -1;
    /* "about" is free text for people (where the figures come from); checked, not kept. */
    json_t *about = json_object_get(root, "about");
    if (about && !json_is_string(about)) return expected(cx, "about", "a string", about);
    if (!(t->name = dup_or_null(name))) return fail(cx, "out of memory");
    if (parse_device_types(cx, root, t)) return -1;
    if (parse_nodes(cx, root, t)) return -1;
    return parse_network(cx, root, t);
}

/* Checks the parsed document (NULL: jerr says why it did not parse) into t. */
static int load_root(Ctx *cx, json_t *root, const json_error_t *jerr, Topology *t) {
    if (!root) return fail(cx, "line %d, column %d: malformed JSON: %s", jerr->line, jerr->column, jerr->text);
    Topology tmp = { 0 };
    int rc = parse_topology(cx, root, &tmp);
    json_decref(root);
    names_free(&cx->type_names);
    names_free(&cx->node_names);
    if (rc == 0 && !(tmp.path = dup_or_null(cx->file))) rc = fail(cx, "out of memory");
    if (rc) {
        topology_free(&tmp);
        return -1;
    }
    *t = tmp;
    return 0;
}

/* Duplicate keys are rejected: the second would silently win otherwise. */
int topology_load(const char *path, Topology *t, char *err, size_t errlen) {
    Ctx cx = { path, err, errlen, { 0 }, { 0 } };
    memset(t, 0, sizeof *t);
    if (err && errlen) err[0] = '\0';
    FILE *f = fopen(path, "rb");
    if (!f) return fail(&cx, "cannot open: %s", strerror(errno));
    json_error_t jerr;
    json_t *root = json_loadf(f, JSON_REJECT_DUPLICATES, &jerr);
    fclose(f);
    return load_root(&cx, root, &jerr, t);
}

int topology_load_buffer(const char *name, const char *text, size_t len, Topology *t, char *err, size_t errlen) {
    Ctx cx = { name, err, errlen, { 0 }, { 0 } };
    memset(t, 0, sizeof *t);
    if (err && errlen) err[0] = '\0';
    json_error_t jerr;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    return load_root(&cx, root, &jerr, t);
}

void topology_free(Topology *t) {
    for (int i = 0; i < t->ntypes; i++) free(t->types[i].name);
    for (int i = 0; i < t->nnodes; i++) free(t->nodes[i].name);
    free(t->types);
    free(t->nodes);
    free(t->name);
    free(t->path);
    memset(t, 0, sizeof *t);
}

int topology_groups(const Topology *t, int C, Topology *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    for (int i = 0; i < t->nnodes; i++) {
        const Node *n = &t->nodes[i];
        int per_island = n->ndevices / (n->islands > 0 ? n->islands : 1);
        if (C > 0 && n->ndevices % C == 0 && per_island % C == 0) continue;
        if (n->islands > 1 && n->ndevices % C == 0)
            snprintf(err, errlen, "--context-parallel %d: a group must stay inside one PCIe island, and node %s's islands hold %d devices each (%s: nodes[%d].islands); C must divide %d",
                     C, n->name, per_island, t->path ? t->path : t->name, i, per_island);
        else
            snprintf(err, errlen, "--context-parallel %d: does not divide node %s's %d devices (%s: nodes[%d].devices); a group of C ranks must fit inside one node",
                     C, n->name, n->ndevices, t->path ? t->path : t->name, i);
        return -1;
    }
    *out = *t;
    out->name = strdup(t->name ? t->name : "");
    out->path = t->path ? strdup(t->path) : NULL;
    out->types = calloc((size_t)t->ntypes, sizeof *out->types);
    out->nodes = calloc((size_t)t->nnodes, sizeof *out->nodes);
    if (!out->name || !out->types || !out->nodes) { topology_free(out); snprintf(err, errlen, "out of memory"); return -1; }
    for (int i = 0; i < t->ntypes; i++) {
        out->types[i] = t->types[i];
        out->types[i].name = strdup(t->types[i].name);
    }
    int first = 0;
    for (int i = 0; i < t->nnodes; i++) {
        Node *n = &out->nodes[i];
        *n = t->nodes[i];
        n->name = strdup(t->nodes[i].name);
        n->ndevices /= C;
        n->first_device = first;
        first += n->ndevices;
        n->intra.bw *= C;
        /* C ranks of a CPU node still share its cores: a group stands for C of them */
        if (n->cores > 0) n->cores = n->cores / C > 0 ? n->cores / C : 1;
    }
    out->ndevices = first;
    return 0;
}

int topology_node_of(const Topology *t, int device) {
    if (device < 0 || device >= t->ndevices) return -1;
    /* Nodes are in device order: binary search on first_device. */
    int lo = 0, hi = t->nnodes - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (t->nodes[mid].first_device <= device) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

Link topology_link(const Topology *t, int a, int b) {
    int na = topology_node_of(t, a), nb = topology_node_of(t, b);
    assert(na >= 0 && nb >= 0);
    if (na < 0 || nb < 0) return (Link){ LINK_NET, 0, 0 };   /* no bandwidth: shows as infinite time */
    if (a == b) {
        /* A copy within one device's memory: it reads and writes at HBM speed, no latency. */
        return (Link){ LINK_LOC, t->types[t->nodes[na].type].hbm_bw, 0 };
    }
    return na == nb ? t->nodes[na].intra : t->net;
}

double topology_peak_flops(const DeviceType *d, int fp32) {
    return d->rated_bf16 && fp32 ? d->peak_flops * TOPOLOGY_GPU_FP32_OF_BF16 : d->peak_flops;
}
