/* The calibration of `wpgen calibrate` (docs/calibration.md): measured runs of emitted programs
 * (their traces, their plans built again) in, the simulator's rates fitted to them (cost/fit.c)
 * and every run predicted with the result out. The command (cli/cmd_calibrate.c) parses the flags
 * and prints; what it prints is computed here.
 *
 * Each trace is read with the plan.json beside it (or another): the plan is built again from the
 * options plan.json records, on the run's topology, and must have the same hash. Every forward,
 * backward and optimizer span of the steps after the first is a sample: its features
 * (cost/costs.h) against its measured time; the samples of each device type give its rates by
 * least squares. A link benchmark's result (scripts/linkbench.sh) gives the links. Then every run
 * is simulated with the new calibration and its predicted step set beside the measured one (the
 * median of its steps after the first), the fitted runs and the held-out ones (not fitted) apart;
 * traces of one plan on one topology (a run repeated) are one row, measured over their steps
 * pooled.
 *
 * Ranks that share cores (a node of the topology with "cores" fewer than its ranks): a span
 * measured there took longer than its work at the rank's own rate, by the share of the cores it
 * got. The ranks' clocks in a trace do not agree, so which spans overlapped is not read from the
 * trace: the simulator, which models the sharing (sim.c), says what share each operation got,
 * and the fit divides it out (span time x share = the time alone). The shares depend on the
 * rates a little (what overlaps what), so the fit is repeated: first with no sharing, then
 * with the shares of a simulation at the rates of the fit before, until the rates settle.
 *
 * Ranks that receive on a CPU: MPI copies a message inside the receiver's first MPI call after
 * it arrived, which is between two layers of the span it is computing (or in its wait). Which
 * span that is, the simulator says again (SimSpan.recv_bytes); those bytes are one more feature
 * of the span (COST_RECV), so the fit finds the core's receiving rate beside its compute rates,
 * in the same rounds as the shares. Without fitted runs that receive, a rank takes in its bytes
 * at half the fitted memory rate (a read and a write). */
#ifndef WP_CALIBRATE_H
#define WP_CALIBRATE_H

#include <stddef.h>
#include "calibrate/trace_read.h"
#include "cost/calib.h"
#include "input/topology.h"
#include "ir/plan.h"

/* One measured run: what the command line names (trace, plan_path, topo_path, held_out), the
 * rest filled by calibrate_load_run. */
typedef struct CalibRun {
    const char *trace, *plan_path, *topo_path;
    char plan_buf[4200];
    int held_out;
    Topology topo;
    WpConfig model;
    char model_name[256];
    Plan *plan;
    TraceRun tr;
    double *share;          /* per span of tr: the share of its rank's cores it computed at (the
                               simulator's, where the node's ranks outnumber its cores); NULL: 1 */
    double *recv;           /* per span of tr: bytes the simulator says arrived during it, which
                               its rank's core took in (CPU ranks that receive); NULL: none */
    double predicted, measured;
    int group;              /* the first run of its row (calibrate_predict): the runs of one plan pooled */
} CalibRun;


/* A run's topology, trace and plan (built again from its plan.json and checked by its hash), and
 * that the trace is of that plan. 0, or -1 with one line in err. */
int calibrate_load_run(CalibRun *r, char *err, size_t errlen);
void calibrate_run_free(CalibRun *r);

/* A link benchmark's result (scripts/linkbench.c) into cal's links. 0, or -1 with err. */
int calibrate_load_links(const char *path, Calibration *cal, char *err, size_t errlen);

/* What the fit found for one device type. */
typedef struct CalibTypeFit {
    int nspans, nkinds;     /* the spans fitted, and the kinds of work they came to */
    double rms;             /* the fit's relative rms error */
} CalibTypeFit;

/* Fits the device types of the fitted runs into cal (its types replaced), again with the shares
 * and received bytes the simulator gives at the rates found until they settle; fits[k] says how
 * cal->types[k] was fitted (64 entries). Then every run's shares at the final rates (the spans
 * column). *shared: the fitted runs' ranks share cores. 0, or -1 with err. */
int calibrate_fit(CalibRun *runs, int nruns, Calibration *cal, CalibTypeFit *fits, int *shared, char *err, size_t errlen);

/* One row of the comparison: the runs of one plan on one topology and role (fitted or held out),
 * predicted with the calibration beside the median of their steps pooled. */
typedef struct CalibRow {
    int run;                /* its first run (runs[run].trace, .plan) */
    int held_out;
    int nruns;              /* runs pooled */
    double predicted, measured;
    double lo, hi;          /* the runs' own medians, smallest and largest */
    double spans;           /* the median over its runs of measured over calibrated span time */
} CalibRow;

/* Every row (fitted rows first, then the held-out ones, each in the order of their first runs)
 * into rows (nruns entries), *nrows set. 0, or -1 with err. */
int calibrate_predict(CalibRun *runs, int nruns, const Calibration *cal, CalibRow *rows, int *nrows, char *err, size_t errlen);

#endif
