/* The cluster as wpgen sees it: device types, nodes, the links inside a node and the network
 * between nodes, loaded from topology JSON (version 1) and checked field by field. */
#ifndef WP_TOPOLOGY_H
#define WP_TOPOLOGY_H

#include <stddef.h>

typedef enum { LINK_LOC, LINK_SHM, LINK_PCI, LINK_NVL, LINK_NET, LINK__COUNT } LinkType;

typedef struct Link {
    LinkType type;
    double bw;          /* bytes per second */
    double lat;         /* seconds */
} Link;

typedef struct DeviceType {
    char *name;
    double peak_flops;  /* bf16 (GPU) or fp32 (CPU) FLOP/s */
    int rated_bf16;     /* peak_flops is a bf16 figure (peak_tflops_bf16): a GPU, which trains in bf16 */
    double mem_bytes;
    double hbm_bw;      /* bytes per second */
    double efficiency;  /* fraction of peak that compute reaches; default 0.5 */
    int efficiency_set; /* given in the file (the simulator's cost table has its own default) */
    double host_bw;     /* bytes per second, one direction, between a device and its node's host
                           memory (host_GBps; default: topology.c's host_link_defaults) */
} DeviceType;

typedef struct Node {
    char *name;
    int ndevices;
    int type;           /* index into Topology.types */
    Link intra;
    int first_device;   /* global index of its first device */
    int islands;        /* PCIe islands (groups of devices behind one switch); default 1 */
    int cores;          /* CPU cores its devices (ranks) share; 0: not given, each device its own
                           (the simulator shares compute when more ranks compute than cores) */
    double host_mem;    /* bytes of host memory its ranks may keep offloaded stashes in
                           (host_mem_gb; default HOST_MEM_DEFAULT_OF_DEVICES x its devices' memory) */
} Node;

/* A node's host memory where the file gives none, as a multiple of its devices' memory together:
 * a DGX H100 has 2 TB beside 8 x 80 GB (3.1x); 2x leaves the rest to the OS and the data. */
#define HOST_MEM_DEFAULT_OF_DEVICES 2.0

typedef struct Topology {
    char *name;
    char *path;         /* as given on the command line (for messages) */
    DeviceType *types; int ntypes;
    Node *nodes; int nnodes;
    Link net;           /* between nodes */
    int nics_per_node;
    int ndevices;       /* sum over nodes */
} Topology;

/* Loads and checks path. On error returns -1 and writes one line to err:
 * "PATH: JSON.PATH: expected ..., got ...". Nothing is allocated on error. Limits far beyond any
 * real cluster are refused the same way: more than 2^17 devices, figures outside [1e-3, 1e6]
 * GB/s (links, HBM), [0, 1e6] µs, [1e-6, 1e6] TFLOP/s, [1e-3, 1e6] GB of memory. */
int topology_load(const char *path, Topology *t, char *err, size_t errlen);
/* The same from text in memory; name stands for the file in messages and in t->path. */
int topology_load_buffer(const char *name, const char *text, size_t len, Topology *t, char *err, size_t errlen);
void topology_free(Topology *t);

/* What a GPU's fp32 compute reaches of its bf16 rating: the matrix products of an fp32 run go to
 * TF32 tensor cores, half the bf16 rate on A100/A800 (156 of 312 TFLOP/s) and H100 (495 of 989). */
#define TOPOLOGY_GPU_FP32_OF_BF16 0.5

/* A device type's peak FLOP/s for a plan in fp32 (fp32 = 1) or bf16: its rating, of which a GPU
 * reaches TOPOLOGY_GPU_FP32_OF_BF16 in fp32; a CPU's rating is its fp32 rate either way. The
 * simulator's rates and the trainers' MFU start from it. */
double topology_peak_flops(const DeviceType *d, int fp32);

/* The topology a context-parallel plan is planned over (docs/context-parallel.md): each node's
 * devices in consecutive groups of C, each group one device of out, whose port inside the node is
 * its C members' ports together (C times the bandwidth: a transfer between two groups moves 1/C
 * from each member to its peer); the network between nodes, its NICs and their bandwidth as they
 * are (the bytes leaving a node do not change). C must divide every node's devices and, on a node
 * of PCIe islands, an island's. 0, or -1 with one line in err naming --context-parallel. */
int topology_groups(const Topology *t, int C, Topology *out, char *err, size_t errlen);

/* Node of a global device index. */
int topology_node_of(const Topology *t, int device);
/* The link a transfer between two devices uses (LOC for a device with itself). */
Link topology_link(const Topology *t, int a, int b);
const char *link_type_name(LinkType t);

/* A node's name is a host name: 1 to 253 letters, digits, '-', '.' or '_', not starting with '-'
 * or '.' (it goes into the emitted rankfile, one line per rank). */
#define HOST_NAME_RULE "a host name (1 to 253 letters, digits, '-', '.' or '_', not starting with '-' or '.')"
int host_name_ok(const char *s);

#endif
