/* A calibration file (JSON, version 1): measured compute rates per device type and, optionally,
 * measured links, which `sim`, `compare` and `-s auto` take with --calibration FILE in place of
 * the cost table's defaults (cost/costs.c) and the topology's link figures. `wpgen calibrate`
 * writes it (cmd_calibrate.c). The format is in docs/calibration.md:
 *
 *   { "version": 1, "about": "...",
 *     "device_types": { "cpu": { "precision": "fp32", "matmul_tflops": 0.031, "matmul_knee_mnk": 2e6,
 *                                "attn_fwd_tflops": 0.01, "attn_bwd_tflops": 0.008, "mem_GBps": 6,
 *                                "op_overhead_us": 40, "recv_GBps": 3.5 } },
 *     "links": { "intra": { "bw_GBps": 5, "lat_us": 2 }, "network": { "bw_GBps": 1.1, "lat_us": 30 } },
 *     "fit": { ...what calibrate measured; for people, not read... } }
 *
 * recv_GBps (optional): how fast a CPU rank's core takes in the bytes MPI delivers to it; without
 * it, half of mem_GBps.
 *
 * Every error is one line naming the file and the JSON path, as the topology loader's are. */
#ifndef WP_CALIB_H
#define WP_CALIB_H

#include <stddef.h>
#include "cost/costs.h"

typedef struct CalibType {
    char *name;             /* a device type of the topology */
    WpDtype precision;      /* the precision the rates were measured in */
    CostRates rates;
} CalibType;

typedef struct CalibLink {
    int set;                /* given in the file */
    double bw, lat;         /* bytes/s, seconds */
} CalibLink;

typedef struct Calibration {
    CalibType *types; int ntypes;
    CalibLink intra, net;   /* every node's link inside it; the network between nodes */
    char *about;
    char *fit_json;         /* the "fit" object as text (written back as it is), or NULL */
} Calibration;

/* 0, or -1 with "FILE: JSON.PATH: expected ..., got ..." in err. */
int calib_load(const char *path, Calibration *c, char *err, size_t errlen);
/* Writes c to path through a temporary file; refuses (-1, err) a path that exists unless force.
 * Numbers with 17 digits: reading the file back gives the same doubles. */
int calib_save(const char *path, const Calibration *c, int force, char *err, size_t errlen);
void calib_free(Calibration *c);

/* The entry of a device type, or NULL. */
const CalibType *calib_find(const Calibration *c, const char *type);

/* The coefficients (cost/costs.h) of a topology's device type for a plan's precision: the
 * calibration's where it names the type (c may be NULL), else the defaults table's. */
void calib_coefs(const Calibration *c, const DeviceType *d, WpDtype precision, double coef[COST__COUNT]);

/* Sets the topology's links to the calibration's measured ones (every node's intra link, the
 * network), where it has them. */
void calib_apply_links(const Calibration *c, Topology *t);

#endif
