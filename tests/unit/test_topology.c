/* Tests of the topology loader: every shipped topology loads, the DESIGN.md example reads as it
 * says, device-to-node and link lookups, and each class of bad input gives its exact one-line
 * message (bad files are written into a temporary directory). Runs from the repository root. */
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "check.h"
#include "input/topology.h"

static char tmpdir[] = "/tmp/wp-test-topology-XXXXXX";

/* Writes text to tmpdir/name, with ' turned into " so that JSON reads easily in C strings. */
static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (!f) { perror(path); exit(1); }
    for (const char *p = text; *p; p++) fputc(*p == '\'' ? '"' : *p, f);
    if (fclose(f) != 0) { perror(path); exit(1); }
}

static void test_shipped(void) {
    glob_t g;
    int rc = glob("topologies/*.json", 0, NULL, &g);
    CHECK(rc == 0 && g.gl_pathc >= 11, "topologies/*.json: %zu files (run from the repository root)",
          rc == 0 ? g.gl_pathc : 0);
    for (size_t i = 0; rc == 0 && i < g.gl_pathc; i++) {
        Topology t;
        char err[512];
        int ok = topology_load(g.gl_pathv[i], &t, err, sizeof err) == 0;
        CHECK(ok, "%s", err);
        if (!ok) continue;
        CHECK(t.ndevices > 0 && t.nnodes > 0, "%s: %d devices", t.path, t.ndevices);
        CHECK(strcmp(t.path, g.gl_pathv[i]) == 0, "%s: path %s", g.gl_pathv[i], t.path);
        /* Every node's devices follow the previous node's. */
        int next = 0;
        for (int n = 0; n < t.nnodes; n++) {
            CHECK(t.nodes[n].first_device == next, "%s: node %d starts at %d", t.path, n, t.nodes[n].first_device);
            next += t.nodes[n].ndevices;
        }
        CHECK(next == t.ndevices, "%s: %d devices in nodes, %d in all", t.path, next, t.ndevices);
        topology_free(&t);
    }
    if (rc == 0) globfree(&g);
}

static void test_design_example(void) {
    Topology t;
    char err[512];
    int rc = topology_load("topologies/weipipe-2x8-a800-nvlink-10gbe.json", &t, err, sizeof err);
    CHECK(rc == 0, "%s", err);
    if (rc) return;
    CHECK(strcmp(t.name, "2x8-a800-nvlink-10gbe") == 0, "name %s", t.name);
    CHECK(t.ntypes == 1 && strcmp(t.types[0].name, "A800") == 0, "types");
    CHECK_CLOSE(t.types[0].peak_flops, 312e12, 1e-12, 0, "peak FLOP/s");
    CHECK_CLOSE(t.types[0].mem_bytes, 80e9, 1e-12, 0, "memory bytes");
    CHECK_CLOSE(t.types[0].hbm_bw, 2039e9, 1e-12, 0, "HBM bytes/s");
    CHECK_CLOSE(t.types[0].efficiency, 0.5, 0, 0, "default efficiency");
    /* the defaults of the host link (an A800 is on PCIe 4 x16) and of a node's host memory */
    CHECK_CLOSE(t.types[0].host_bw, 25e9, 1e-12, 0, "default host link of an A800");
    CHECK_CLOSE(t.nodes[0].host_mem, HOST_MEM_DEFAULT_OF_DEVICES * 8 * 80e9, 1e-12, 0, "default host memory");
    CHECK(t.nnodes == 2 && t.ndevices == 16, "%d nodes, %d devices", t.nnodes, t.ndevices);
    CHECK(strcmp(t.nodes[1].name, "n1") == 0 && t.nodes[1].first_device == 8 && t.nodes[1].islands == 1, "node n1");
    CHECK(t.nodes[0].intra.type == LINK_NVL, "intra type");
    CHECK_CLOSE(t.nodes[0].intra.bw, 200e9, 1e-12, 0, "NVLink bytes/s");
    CHECK_CLOSE(t.nodes[0].intra.lat, 3e-6, 1e-12, 0, "NVLink latency");
    CHECK(t.net.type == LINK_NET && t.nics_per_node == 1, "network");
    CHECK_CLOSE(t.net.bw, 1.25e9, 1e-12, 0, "10 GbE bytes/s");
    CHECK_CLOSE(t.net.lat, 20e-6, 1e-12, 0, "network latency");

    int nodes_of[][2] = { { 0, 0 }, { 7, 0 }, { 8, 1 }, { 15, 1 }, { 16, -1 }, { -1, -1 } };
    for (size_t i = 0; i < sizeof nodes_of / sizeof nodes_of[0]; i++)
        CHECK(topology_node_of(&t, nodes_of[i][0]) == nodes_of[i][1], "node of %d: %d", nodes_of[i][0],
              topology_node_of(&t, nodes_of[i][0]));
    Link self = topology_link(&t, 3, 3), in = topology_link(&t, 3, 5), across = topology_link(&t, 7, 8);
    CHECK(self.type == LINK_LOC && self.bw == t.types[0].hbm_bw && self.lat == 0, "link 3-3: %s", link_type_name(self.type));
    CHECK(in.type == LINK_NVL && in.bw == 200e9, "link 3-5: %s", link_type_name(in.type));
    CHECK(across.type == LINK_NET && across.bw == 1.25e9, "link 7-8: %s", link_type_name(across.type));
    CHECK(topology_link(&t, 15, 0).type == LINK_NET, "link 15-0");
    topology_free(&t);
    CHECK(t.nodes == NULL && t.types == NULL && t.name == NULL, "freed topology zeroed");
}

static void test_uneven_and_single(void) {
    Topology t;
    char err[512];
    int rc = topology_load("topologies/cpu-uneven.json", &t, err, sizeof err);
    CHECK(rc == 0, "%s", err);
    if (rc == 0) {
        int want[] = { 0, 0, 1, 2, 2, 2 };
        CHECK(t.ndevices == 6, "cpu-uneven: %d devices", t.ndevices);
        for (int d = 0; d < 6; d++)
            CHECK(topology_node_of(&t, d) == want[d], "cpu-uneven: node of %d is %d", d, topology_node_of(&t, d));
        CHECK(topology_link(&t, 3, 5).type == LINK_SHM, "cpu-uneven: 3-5 inside n2");
        CHECK(topology_link(&t, 1, 2).type == LINK_NET, "cpu-uneven: 1-2 across");
        CHECK(t.types[0].peak_flops == 0.05e12, "cpu peak from peak_tflops_fp32");
        topology_free(&t);
    }
    /* One node: "network" may be left out. */
    rc = topology_load("topologies/cpu-1x1.json", &t, err, sizeof err);
    CHECK(rc == 0 && t.ndevices == 1 && topology_link(&t, 0, 0).type == LINK_LOC, "cpu-1x1: %s", err);
    if (rc == 0) topology_free(&t);
    rc = topology_load("topologies/h100-16x8-ib400.json", &t, err, sizeof err);
    CHECK(rc == 0 && t.ndevices == 128 && t.nics_per_node == 8 && t.net.bw == 50e9, "h100 cluster: %s", err);
    CHECK(rc != 0 || t.types[0].host_bw == 55e9, "an H100's host link: PCIe 5 x16's 55 GB/s by default");
    if (rc == 0) topology_free(&t);
    rc = topology_load("topologies/cpu-2x2.json", &t, err, sizeof err);
    CHECK(rc == 0 && t.types[0].host_bw == t.types[0].hbm_bw, "a CPU device's host link: its memory's bandwidth: %s", err);
    if (rc == 0) topology_free(&t);

    /* what people write for the link classes loads as the class (docs/topology.md), in any case */
    const struct { const char *intra, *net; LinkType ti, tn; } alias[] = {
        { "NVLink", "IB", LINK_NVL, LINK_NET }, { "pcie", "InfiniBand", LINK_PCI, LINK_NET },
        { "nvswitch", "RoCE", LINK_NVL, LINK_NET }, { "nvl", "Ethernet", LINK_NVL, LINK_NET },
        { "shared memory", "efa", LINK_SHM, LINK_NET }, { "PCI", "shm", LINK_PCI, LINK_SHM },
    };
    for (size_t i = 0; i < sizeof alias / sizeof alias[0]; i++) {
        char doc[1024], path[256];
        snprintf(doc, sizeof doc, "{\"version\": 1, \"name\": \"x\", \"device_types\": {\"G\": {\"peak_tflops_bf16\": 1, "
                 "\"mem_gb\": 1, \"hbm_GBps\": 1}}, \"nodes\": [{\"name\": \"a\", \"devices\": 2, \"type\": \"G\", "
                 "\"intra\": {\"type\": \"%s\", \"bw_GBps\": 1, \"lat_us\": 1}}, {\"name\": \"b\", \"devices\": 2, \"type\": \"G\", "
                 "\"intra\": {\"type\": \"%s\", \"bw_GBps\": 1, \"lat_us\": 1}}], \"network\": {\"type\": \"%s\", "
                 "\"bw_GBps\": 1, \"lat_us\": 1}}", alias[i].intra, alias[i].intra, alias[i].net);
        snprintf(path, sizeof path, "%s/alias.json", tmpdir);
        write_file(path, doc);
        rc = topology_load(path, &t, err, sizeof err);
        CHECK(rc == 0 && t.nodes[0].intra.type == alias[i].ti && t.net.type == alias[i].tn, "aliases %s, %s: %s",
              alias[i].intra, alias[i].net, err);
        if (rc == 0) topology_free(&t);
        unlink(path);
    }

    const char *names[] = { "LOC", "SHM", "PCI", "NVL", "NET" };
    for (int i = 0; i < LINK__COUNT; i++)
        CHECK(strcmp(link_type_name((LinkType)i), names[i]) == 0, "link_type_name(%d) = %s", i, link_type_name((LinkType)i));
}

/* Pieces of a valid document, to break one thing at a time. */
#define TYPES "'device_types': {'A800': {'peak_tflops_bf16': 312, 'mem_gb': 80, 'hbm_GBps': 2039}}"
#define INTRA "'intra': {'type': 'NVL', 'bw_GBps': 200, 'lat_us': 3}"
#define NODE(name) "{'name': '" name "', 'devices': 8, 'type': 'A800', " INTRA "}"
#define NET "'network': {'type': 'NET', 'bw_GBps': 1.25, 'lat_us': 20}"
#define DOC(...) "{'version': 1, 'name': 'x', " __VA_ARGS__ "}"

static const struct { const char *name, *json, *message; } bad[] = {
    { "malformed", "{'version': 1,\n 'name': 'x',\n}",
      "line 3, column 1: malformed JSON: string or '}' expected near '}'" },
    { "duplicate-key", "{'version': 1, 'version': 1}",
      "line 1, column 24: malformed JSON: duplicate object key near '\"version\"'" },
    { "toplevel-array", "[1, 2]", "top level: expected an object, got an array" },
    { "no-version", "{'name': 'x'}", "version: expected 1, got nothing" },
    { "version-2", "{'version': 2}", "version: expected 1, got 2" },
    { "version-string", "{'version': '1'}", "version: expected 1, got \"1\"" },
    { "unknown-top-key", DOC(TYPES ", 'nodes': [" NODE("n0") "], 'netwrk': {}"),
      "top level: expected only the keys version, name, about, device_types, nodes, network, got \"netwrk\"" },
    { "no-name", "{'version': 1, " TYPES ", 'nodes': [" NODE("n0") "]}", "name: expected a non-empty string, got nothing" },
    { "name-number", "{'version': 1, 'name': 7, " TYPES ", 'nodes': [" NODE("n0") "]}",
      "name: expected a non-empty string, got 7" },
    { "about-number", DOC("'about': 1, " TYPES ", 'nodes': [" NODE("n0") "]"), "about: expected a string, got 1" },
    { "no-types", DOC("'nodes': [" NODE("n0") "]"), "device_types: expected an object, got nothing" },
    { "empty-types", DOC("'device_types': {}, 'nodes': [" NODE("n0") "]"),
      "device_types: expected at least one device type, got an empty object" },
    { "type-not-object", DOC("'device_types': {'A800': 312}, 'nodes': [" NODE("n0") "]"),
      "device_types.A800: expected an object, got 312" },
    { "no-peak", DOC("'device_types': {'A800': {'mem_gb': 80, 'hbm_GBps': 2039}}, 'nodes': [" NODE("n0") "]"),
      "device_types.A800.peak_tflops_bf16: expected a positive number, got nothing" },
    { "both-peaks", DOC("'device_types': {'A800': {'peak_tflops_bf16': 312, 'peak_tflops_fp32': 19, 'mem_gb': 80, 'hbm_GBps': 2039}}, 'nodes': [" NODE("n0") "]"),
      "device_types.A800: expected one of peak_tflops_bf16 and peak_tflops_fp32, got both" },
    { "mem-zero", DOC("'device_types': {'A800': {'peak_tflops_bf16': 312, 'mem_gb': 0, 'hbm_GBps': 2039}}, 'nodes': [" NODE("n0") "]"),
      "device_types.A800.mem_gb: expected a positive number, got 0" },
    { "hbm-string", DOC("'device_types': {'A800': {'peak_tflops_bf16': 312, 'mem_gb': 80, 'hbm_GBps': '2039'}}, 'nodes': [" NODE("n0") "]"),
      "device_types.A800.hbm_GBps: expected a positive number, got \"2039\"" },
    { "efficiency-big", DOC("'device_types': {'A800': {'peak_tflops_bf16': 312, 'mem_gb': 80, 'hbm_GBps': 2039, 'efficiency': 1.5}}, 'nodes': [" NODE("n0") "]"),
      "device_types.A800.efficiency: expected a number in (0, 1], got 1.5" },
    { "type-typo-key", DOC("'device_types': {'A800': {'peak_tflops_bf16': 312, 'mem_gb': 80, 'hbm_gbps': 2039}}, 'nodes': [" NODE("n0") "]"),
      "device_types.A800: expected only the keys peak_tflops_bf16, peak_tflops_fp32, mem_gb, hbm_GBps, efficiency, host_GBps, got \"hbm_gbps\"" },
    { "no-nodes", DOC(TYPES), "nodes: expected a non-empty array, got nothing" },
    { "empty-nodes", DOC(TYPES ", 'nodes': []"), "nodes: expected a non-empty array, got an empty array" },
    { "node-not-object", DOC(TYPES ", 'nodes': [" NODE("n0") ", 'n1'], " NET), "nodes[1]: expected an object, got \"n1\"" },
    { "devices-string", DOC(TYPES ", 'nodes': [" NODE("n0") ", {'name': 'n1', 'devices': '8', 'type': 'A800', " INTRA "}], " NET),
      "nodes[1].devices: expected an integer in [1, 131072], got \"8\"" },
    { "devices-zero", DOC(TYPES ", 'nodes': [{'name': 'n0', 'devices': 0, 'type': 'A800', " INTRA "}]"),
      "nodes[0].devices: expected an integer in [1, 131072], got 0" },
    { "devices-real", DOC(TYPES ", 'nodes': [{'name': 'n0', 'devices': 8.0, 'type': 'A800', " INTRA "}]"),
      "nodes[0].devices: expected an integer in [1, 131072], got 8.0" },
    { "no-devices", DOC(TYPES ", 'nodes': [{'name': 'n0', 'type': 'A800', " INTRA "}]"),
      "nodes[0].devices: expected an integer in [1, 131072], got nothing" },
    { "node-typo-key", DOC(TYPES ", 'nodes': [{'name': 'n0', 'devcies': 8, 'type': 'A800', " INTRA "}]"),
      "nodes[0]: expected only the keys name, devices, type, intra, islands, cores, host_mem_gb, got \"devcies\"" },
    { "unknown-device-type", DOC(TYPES ", 'nodes': [{'name': 'n0', 'devices': 8, 'type': 'H100', " INTRA "}]"),
      "nodes[0].type: expected a device type from device_types (A800), got \"H100\"" },
    { "duplicate-node", DOC(TYPES ", 'nodes': [" NODE("n0") ", " NODE("n1") ", " NODE("n0") "], " NET),
      "nodes[2].name: expected a name no other node has, got \"n0\" (also nodes[0])" },
    { "no-intra", DOC(TYPES ", 'nodes': [{'name': 'n0', 'devices': 8, 'type': 'A800'}]"),
      "nodes[0].intra: expected an object, got nothing" },
    { "unknown-link", DOC(TYPES ", 'nodes': [{'name': 'n0', 'devices': 8, 'type': 'A800', 'intra': {'type': 'CXL', 'bw_GBps': 1, 'lat_us': 1}}]"),
      "nodes[0].intra.type: expected a link type inside a node: NVL (also NVLink, NVSwitch, xGMI, Infinity Fabric), PCI (also PCIe), SHM (also shared memory) or LOC (docs/topology.md), got \"CXL\"" },
    { "intra-ib", DOC(TYPES ", 'nodes': [{'name': 'n0', 'devices': 8, 'type': 'A800', 'intra': {'type': 'IB', 'bw_GBps': 1, 'lat_us': 1}}]"),
      "nodes[0].intra.type: expected a link type inside a node: NVL (also NVLink, NVSwitch, xGMI, Infinity Fabric), PCI (also PCIe), SHM (also shared memory) or LOC (docs/topology.md), got \"IB\"" },
    { "intra-net", DOC(TYPES ", 'nodes': [{'name': 'n0', 'devices': 8, 'type': 'A800', 'intra': {'type': 'NET', 'bw_GBps': 1, 'lat_us': 1}}]"),
      "nodes[0].intra.type: expected a link type inside a node: NVL (also NVLink, NVSwitch, xGMI, Infinity Fabric), PCI (also PCIe), SHM (also shared memory) or LOC (docs/topology.md), got \"NET\"" },
    { "bw-zero", DOC(TYPES ", 'nodes': [{'name': 'n0', 'devices': 8, 'type': 'A800', 'intra': {'type': 'NVL', 'bw_GBps': 0, 'lat_us': 1}}]"),
      "nodes[0].intra.bw_GBps: expected a positive number, got 0" },
    { "lat-negative", DOC(TYPES ", 'nodes': [{'name': 'n0', 'devices': 8, 'type': 'A800', 'intra': {'type': 'NVL', 'bw_GBps': 200, 'lat_us': -0.5}}]"),
      "nodes[0].intra.lat_us: expected a number >= 0, got -0.5" },
    { "intra-typo-key", DOC(TYPES ", 'nodes': [{'name': 'n0', 'devices': 8, 'type': 'A800', 'intra': {'type': 'NVL', 'bw_GBps': 200, 'lat': 1}}]"),
      "nodes[0].intra: expected only the keys type, bw_GBps, lat_us, got \"lat\"" },
    { "islands-not-divisor", DOC(TYPES ", 'nodes': [{'name': 'n0', 'devices': 8, 'type': 'A800', " INTRA ", 'islands': 3}]"),
      "nodes[0].islands: expected a divisor of devices (8), got 3" },
    { "cores-zero", DOC(TYPES ", 'nodes': [{'name': 'n0', 'devices': 8, 'type': 'A800', " INTRA ", 'cores': 0}]"),
      "nodes[0].cores: expected an integer in [1, 131072], got 0" },
    { "host-mem-zero", DOC(TYPES ", 'nodes': [{'name': 'n0', 'devices': 8, 'type': 'A800', " INTRA ", 'host_mem_gb': 0}]"),
      "nodes[0].host_mem_gb: expected a positive number, got 0" },
    { "host-mem-huge", DOC(TYPES ", 'nodes': [{'name': 'n0', 'devices': 8, 'type': 'A800', " INTRA ", 'host_mem_gb': 2e6}]"),
      "nodes[0].host_mem_gb: expected a number in [0.001, 1e+06], got 2000000.0" },
    { "host-mem-string", DOC(TYPES ", 'nodes': [{'name': 'n0', 'devices': 8, 'type': 'A800', " INTRA ", 'host_mem_gb': '2TB'}]"),
      "nodes[0].host_mem_gb: expected a positive number, got \"2TB\"" },
    { "host-bw-negative", DOC("'device_types': {'A800': {'peak_tflops_bf16': 312, 'mem_gb': 80, 'hbm_GBps': 2039, 'host_GBps': -25}}, 'nodes': [" NODE("n0") "]"),
      "device_types.A800.host_GBps: expected a positive number, got -25" },
    { "host-bw-huge", DOC("'device_types': {'A800': {'peak_tflops_bf16': 312, 'mem_gb': 80, 'hbm_GBps': 2039, 'host_GBps': 1e7}}, 'nodes': [" NODE("n0") "]"),
      "device_types.A800.host_GBps: expected a number in [0.001, 1e+06], got 10000000.0" },
    { "no-network", DOC(TYPES ", 'nodes': [" NODE("n0") ", " NODE("n1") "]"),
      "network: expected an object (required with more than one node), got nothing" },
    { "network-nvl", DOC(TYPES ", 'nodes': [" NODE("n0") ", " NODE("n1") "], 'network': {'type': 'NVL', 'bw_GBps': 1, 'lat_us': 1}"),
      "network.type: expected a link type between nodes: NET (also IB, InfiniBand, RoCE, Ethernet, EFA, TCP) or SHM (also shared memory) (docs/topology.md), got \"NVL\"" },
    { "network-nvlink", DOC(TYPES ", 'nodes': [" NODE("n0") ", " NODE("n1") "], 'network': {'type': 'nvlink', 'bw_GBps': 1, 'lat_us': 1}"),
      "network.type: expected a link type between nodes: NET (also IB, InfiniBand, RoCE, Ethernet, EFA, TCP) or SHM (also shared memory) (docs/topology.md), got \"nvlink\"" },
    { "network-no-bw", DOC(TYPES ", 'nodes': [" NODE("n0") ", " NODE("n1") "], 'network': {'type': 'NET', 'lat_us': 1}"),
      "network.bw_GBps: expected a positive number, got nothing" },
    { "nics-zero", DOC(TYPES ", 'nodes': [" NODE("n0") ", " NODE("n1") "], 'network': {'type': 'NET', 'bw_GBps': 1, 'lat_us': 1, 'nics_per_node': 0}"),
      "network.nics_per_node: expected an integer in [1, 131072], got 0" },
    { "network-typo-key", DOC(TYPES ", 'nodes': [" NODE("n0") ", " NODE("n1") "], 'network': {'type': 'NET', 'bw_GBps': 1, 'lat_us': 1, 'nics': 2}"),
      "network: expected only the keys type, bw_GBps, lat_us, nics_per_node, got \"nics\"" },
    /* Figures no real hardware has: they used to load and end in "simulation stuck". */
    { "bw-huge", DOC(TYPES ", 'nodes': [{'name': 'n0', 'devices': 8, 'type': 'A800', 'intra': {'type': 'NVL', 'bw_GBps': 1e30, 'lat_us': 1}}]"),
      "nodes[0].intra.bw_GBps: expected a number in [0.001, 1e+06], got 1e30" },
    { "bw-tiny", DOC(TYPES ", 'nodes': [" NODE("n0") ", " NODE("n1") "], 'network': {'type': 'NET', 'bw_GBps': 1e-30, 'lat_us': 1}"),
      "network.bw_GBps: expected a number in [0.001, 1e+06], got 1e-30" },
    { "lat-huge", DOC(TYPES ", 'nodes': [{'name': 'n0', 'devices': 8, 'type': 'A800', 'intra': {'type': 'NVL', 'bw_GBps': 200, 'lat_us': 1e300}}]"),
      "nodes[0].intra.lat_us: expected a number in [0, 1e+06], got 1e300" },
    { "peak-huge", DOC("'device_types': {'A800': {'peak_tflops_bf16': 1e30, 'mem_gb': 80, 'hbm_GBps': 2039}}, 'nodes': [" NODE("n0") "]"),
      "device_types.A800.peak_tflops_bf16: expected a number in [1e-06, 1e+06], got 1e30" },
    { "mem-huge", DOC("'device_types': {'A800': {'peak_tflops_bf16': 312, 'mem_gb': 1e20, 'hbm_GBps': 2039}}, 'nodes': [" NODE("n0") "]"),
      "device_types.A800.mem_gb: expected a number in [0.001, 1e+06], got 1e20" },
    { "hbm-tiny", DOC("'device_types': {'A800': {'peak_tflops_bf16': 312, 'mem_gb': 80, 'hbm_GBps': 1e-9}}, 'nodes': [" NODE("n0") "]"),
      "device_types.A800.hbm_GBps: expected a number in [0.001, 1e+06], got 1e-9" },
    { "devices-huge", DOC(TYPES ", 'nodes': [{'name': 'n0', 'devices': 1000000, 'type': 'A800', " INTRA "}]"),
      "nodes[0].devices: expected an integer in [1, 131072], got 1000000" },
    { "devices-total", DOC(TYPES ", 'nodes': [{'name': 'n0', 'devices': 131072, 'type': 'A800', " INTRA "}, "
                           "{'name': 'n1', 'devices': 1, 'type': 'A800', " INTRA "}], " NET),
      "nodes: expected at most 131072 devices in all, got 131073" },
    /* A name with a newline: the message stays one line. */
    { "newline-name", DOC(TYPES ", 'nodes': [{'name': 'n0', 'devices': 8, 'type': 'A\\n800', " INTRA "}]"),
      "nodes[0].type: expected a device type from device_types (A800), got \"A\\n800\"" },
    { "newline-type", DOC("'device_types': {'A\\n800': {'peak_tflops_bf16': 312, 'mem_gb': 80, 'hbm_GBps': 2039}}, 'nodes': [{'name': 'n0', 'devices': 8, 'type': 'x', " INTRA "}]"),
      "nodes[0].type: expected a device type from device_types (A?800), got \"x\"" },
    /* A node's name goes into the emitted rankfile, one line per rank: a host name only (a
     * newline would forge a line of it). */
    { "rankfile-forged", DOC(TYPES ", 'nodes': [{'name': 'n0\\nrank 9=evil slot=0', 'devices': 8, 'type': 'A800', " INTRA "}]"),
      "nodes[0].name: expected " HOST_NAME_RULE ", got \"n0\\nrank 9=evil slot=0\"" },
    { "name-space", DOC(TYPES ", 'nodes': [{'name': 'gpu 1', 'devices': 8, 'type': 'A800', " INTRA "}]"),
      "nodes[0].name: expected " HOST_NAME_RULE ", got \"gpu 1\"" },
    { "name-dash", DOC(TYPES ", 'nodes': [{'name': '-n0', 'devices': 8, 'type': 'A800', " INTRA "}]"),
      "nodes[0].name: expected " HOST_NAME_RULE ", got \"-n0\"" },
};

/* 10^5 nodes load in linear time: the duplicate-name check compared every pair (16 s). And a
 * topology past the device limit is refused before anything is allocated for it. */
static void test_large(void) {
    char path[256], err[512];
    snprintf(path, sizeof path, "%s/large.json", tmpdir);
    FILE *f = fopen(path, "w");
    if (!f) { perror(path); exit(1); }
    enum { N = 100000 };
    fprintf(f, "{\"version\": 1, \"name\": \"large\", \"device_types\": {\"c\": {\"peak_tflops_fp32\": 1, \"mem_gb\": 1, "
               "\"hbm_GBps\": 10}}, \"network\": {\"type\": \"NET\", \"bw_GBps\": 1, \"lat_us\": 1}, \"nodes\": [");
    for (int i = 0; i < N; i++)
        fprintf(f, "%s{\"name\": \"node-%d\", \"devices\": 1, \"type\": \"c\", \"intra\": {\"type\": \"SHM\", \"bw_GBps\": 10, "
                   "\"lat_us\": 1}}", i ? ", " : "", i);
    fprintf(f, "]}\n");
    fclose(f);
    Topology t;
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    int rc = topology_load(path, &t, err, sizeof err);
    clock_gettime(CLOCK_MONOTONIC, &b);
    double s = (double)(b.tv_sec - a.tv_sec) + 1e-9 * (double)(b.tv_nsec - a.tv_nsec);
    CHECK(rc == 0 && t.nnodes == N && t.ndevices == N, "100k nodes: %s", err);
    CHECK(s < 6.0, "100k nodes took %.2f s (quadratic?)", s);
    printf("  %d nodes loaded in %.3f s\n", N, s);
    if (rc == 0) {
        CHECK(topology_node_of(&t, N - 1) == N - 1 && strcmp(t.nodes[N - 1].name, "node-99999") == 0, "last node");
        topology_free(&t);
    }
    /* A duplicate far apart is still found. */
    f = fopen(path, "w");
    fprintf(f, "{\"version\": 1, \"name\": \"dup\", \"device_types\": {\"c\": {\"peak_tflops_fp32\": 1, \"mem_gb\": 1, "
               "\"hbm_GBps\": 10}}, \"network\": {\"type\": \"NET\", \"bw_GBps\": 1, \"lat_us\": 1}, \"nodes\": [");
    for (int i = 0; i < 5000; i++)
        fprintf(f, "%s{\"name\": \"n%d\", \"devices\": 1, \"type\": \"c\", \"intra\": {\"type\": \"SHM\", \"bw_GBps\": 10, "
                   "\"lat_us\": 1}}", i ? ", " : "", i == 4999 ? 17 : i);
    fprintf(f, "]}\n");
    fclose(f);
    rc = topology_load(path, &t, err, sizeof err);
    CHECK(rc == -1 && strstr(err, "nodes[4999].name: expected a name no other node has, got \"n17\" (also nodes[17])"),
          "far duplicate: %s", err);
    unlink(path);
}

static void test_bad_inputs(void) {
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char path[256], want[1024], err[1024];
        snprintf(path, sizeof path, "%s/bad-%s.json", tmpdir, bad[i].name);
        write_file(path, bad[i].json);
        snprintf(want, sizeof want, "%s: %s", path, bad[i].message);
        Topology t;
        memset(&t, 0xff, sizeof t);   /* the loader must clear it, even on error */
        int rc = topology_load(path, &t, err, sizeof err);
        CHECK(rc == -1, "%s: loaded", bad[i].name);
        CHECK(strcmp(err, want) == 0, "%s:\n  got  %s\n  want %s", bad[i].name, err, want);
        CHECK(t.nodes == NULL && t.types == NULL && t.name == NULL && t.path == NULL, "%s: not cleared", bad[i].name);
        unlink(path);
    }
    /* A file that is not there. */
    char path[256], want[512], err[512];
    Topology t;
    snprintf(path, sizeof path, "%s/missing.json", tmpdir);
    snprintf(want, sizeof want, "%s: cannot open: No such file or directory", path);
    CHECK(topology_load(path, &t, err, sizeof err) == -1 && strcmp(err, want) == 0, "missing file: %s", err);
    /* The same file with a valid document loads: the pieces above are right. */
    snprintf(path, sizeof path, "%s/good.json", tmpdir);
    write_file(path, DOC("'about': 'ok', " TYPES ", 'nodes': [" NODE("n0") ", " NODE("n1") "], " NET));
    int rc = topology_load(path, &t, err, sizeof err);
    CHECK(rc == 0 && t.ndevices == 16, "good.json: %s", err);
    if (rc == 0) topology_free(&t);
    unlink(path);
    /* A short error buffer truncates, never overflows. */
    snprintf(path, sizeof path, "%s/bad-short.json", tmpdir);
    write_file(path, "[]");
    char small[8];
    CHECK(topology_load(path, &t, small, sizeof small) == -1 && strlen(small) == sizeof small - 1, "short buffer");
    unlink(path);
}

int main(void) {
    if (!mkdtemp(tmpdir)) { perror("mkdtemp"); return 1; }
    test_shipped();
    test_design_example();
    test_uneven_and_single();
    test_bad_inputs();
    test_large();
    rmdir(tmpdir);
    return check_summary("test_topology");
}
