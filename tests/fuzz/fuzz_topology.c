/* libFuzzer harness: topology JSON (generator/input/topology.c). Any input either loads into a
 * topology that keeps every documented bound (devices, figures finite and in range, nodes in
 * device order, links that exist) or is refused with one line naming the file. */
#include <math.h>
#include "fuzz/fuzz.h"
#include "input/topology.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    Topology t;
    char err[512];
    if (topology_load_buffer("fuzz.json", (const char *)data, size, &t, err, sizeof err) != 0) {
        fuzz_check_message(err, "fuzz.json: ");
        FUZZ_REQUIRE(t.nodes == NULL && t.types == NULL && t.name == NULL, "a refused topology left allocations");
        return 0;
    }
    FUZZ_REQUIRE(t.ndevices >= 1 && t.ndevices <= (1 << 17), "%d devices", t.ndevices);
    FUZZ_REQUIRE(t.nnodes >= 1 && t.nnodes <= t.ndevices, "%d nodes", t.nnodes);
    FUZZ_REQUIRE(t.ntypes >= 1, "%d types", t.ntypes);
    for (int i = 0; i < t.ntypes; i++) {
        const DeviceType *d = &t.types[i];
        FUZZ_REQUIRE(isfinite(d->peak_flops) && d->peak_flops >= 1e6 && d->peak_flops <= 1e18, "type %d peak %g", i, d->peak_flops);
        FUZZ_REQUIRE(isfinite(d->mem_bytes) && d->mem_bytes >= 1e6 && d->mem_bytes <= 1e15, "type %d memory %g", i, d->mem_bytes);
        FUZZ_REQUIRE(isfinite(d->hbm_bw) && d->hbm_bw >= 1e6 && d->hbm_bw <= 1e15, "type %d HBM %g", i, d->hbm_bw);
        FUZZ_REQUIRE(d->efficiency > 0 && d->efficiency <= 1, "type %d efficiency %g", i, d->efficiency);
    }
    int next = 0;
    for (int n = 0; n < t.nnodes; n++) {
        const Node *nd = &t.nodes[n];
        FUZZ_REQUIRE(nd->first_device == next, "node %d starts at %d, expected %d", n, nd->first_device, next);
        FUZZ_REQUIRE(nd->ndevices >= 1 && nd->type >= 0 && nd->type < t.ntypes, "node %d", n);
        FUZZ_REQUIRE(nd->islands >= 1 && nd->ndevices % nd->islands == 0, "node %d islands %d", n, nd->islands);
        FUZZ_REQUIRE(isfinite(nd->intra.bw) && nd->intra.bw >= 1e6 && nd->intra.bw <= 1e15, "node %d bw %g", n, nd->intra.bw);
        FUZZ_REQUIRE(isfinite(nd->intra.lat) && nd->intra.lat >= 0 && nd->intra.lat <= 1, "node %d lat %g", n, nd->intra.lat);
        for (int m = 0; m < n && n < 64; m++)
            FUZZ_REQUIRE(strcmp(t.nodes[m].name, nd->name) != 0, "nodes %d and %d share a name", m, n);
        next += nd->ndevices;
    }
    FUZZ_REQUIRE(next == t.ndevices, "%d devices in nodes, %d in all", next, t.ndevices);
    if (t.nnodes > 1) FUZZ_REQUIRE(isfinite(t.net.bw) && t.net.bw >= 1e6 && t.net.bw <= 1e15, "network bw %g", t.net.bw);
    /* Lookups at the edges of the device range. */
    int probe[] = { 0, t.ndevices - 1, t.ndevices / 2 };
    for (int i = 0; i < 3; i++) {
        int v = topology_node_of(&t, probe[i]);
        FUZZ_REQUIRE(v >= 0 && v < t.nnodes && t.nodes[v].first_device <= probe[i] &&
                     probe[i] < t.nodes[v].first_device + t.nodes[v].ndevices, "device %d in node %d", probe[i], v);
        for (int j = 0; j < 3; j++) {
            Link l = topology_link(&t, probe[i], probe[j]);
            FUZZ_REQUIRE(l.bw > 0 && isfinite(l.bw), "link %d-%d bw %g", probe[i], probe[j], l.bw);
        }
    }
    FUZZ_REQUIRE(topology_node_of(&t, t.ndevices) == -1 && topology_node_of(&t, -1) == -1, "out-of-range device");
    topology_free(&t);
    return 0;
}
