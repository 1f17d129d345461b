/* `wpgen probe`: the topology JSON (input/topology.c's format) of the machine it runs on, and the
 * merge of several hosts' probes into one cluster.
 *
 * What is read, all under a root directory ("/" normally; --sysroot DIR for recorded machines):
 *   GPUs        nvidia-smi --query-gpu=name,memory.total --format=csv (DIR/nvidia-smi-query-gpu.csv)
 *               and nvidia-smi topo -m (DIR/nvidia-smi-topo-m.txt): the devices, their type (the
 *               figures from a table of known GPUs), NVLink or PCIe between them, PCIe islands;
 *   CPUs        without GPUs, one device per NUMA node (sys/devices/system/node/node*: cpulist,
 *               meminfo), at nominal figures (calibrate measures the real ones);
 *   network     sys/class/net/<nic>/speed (Mb/s) of physical NICs (a device link) and
 *               sys/class/infiniband/<hca>/ports/<p>/rate: the fastest speed and how many NICs
 *               have it;
 *   name        DIR/etc/hostname, else the host name. */
#ifndef WP_PROBE_H
#define WP_PROBE_H

#include <stddef.h>
#include <jansson.h>
#include "input/smi_parse.h"

#define PROBE_MAX_NUMA 64

typedef struct ProbeHost {
    char name[256];
    int ngpus;                      /* 0: a CPU machine */
    SmiGpu gpus[SMI_MAX_GPUS];
    SmiTopo topo;
    int numa;                       /* NUMA nodes */
    int cores[PROBE_MAX_NUMA];      /* CPUs of each */
    double mem_bytes[PROBE_MAX_NUMA];
    double cpu_hz;                  /* the highest clock (cpuinfo_max_freq), 0 if not known */
    double nic_bps;                 /* the fastest NIC's bits per second, 0 if none known */
    int nics;                       /* NICs at that speed */
    int infiniband;                 /* those are InfiniBand ports */
} ProbeHost;

/* Reads the machine under root ("/" or a sysroot). smi_cmd: run nvidia-smi (1) or read its
 * recorded outputs under root (0). 0, or -1 with one line in err. */
int probe_host(const char *root, int smi_cmd, ProbeHost *h, char *err, size_t errlen);

/* The host as a topology of one node (the figures of its GPU type from the table; nominal for
 * CPUs). NULL with err: a GPU the table does not know (peak_tflops and hbm_GBps override). */
json_t *probe_topology(const ProbeHost *h, double peak_tflops, double hbm_GBps, char *err, size_t errlen);

/* Topologies of hosts (probe's outputs, or merges of them) as one cluster: their nodes in the
 * order given, device types shared by name (the same figures), the network the slowest host's.
 * NULL with one line in err naming the file. */
json_t *probe_merge(const char *const *paths, int n, char *err, size_t errlen);

#endif
