/* The backend-neutral half of the optimizer: AdamW's hyperparameters, the learning-rate schedule
 * (linear warm-up, then cosine, linear, constant or warmup-stable-decay) and global-norm gradient
 * clipping. Every rank derives the same learning rate and clipping scale from the same numbers,
 * whatever backend holds the weights; the update itself runs where the weights are (cpu/adamw.h on
 * the CPU, compute.h's compute_adamw). The settings a user can choose are one table
 * (wp_adamw_settings): the trainers' flags, their ranges, what a checkpoint records and what a
 * resume with another value does are all read from it. */
#ifndef WP_OPTIM_H
#define WP_OPTIM_H

#include <stddef.h>

/* The learning rate after the warm-up (--schedule), from lr at the warm-up's end to min_lr at
 * `steps`: a half cosine, a straight line, lr throughout (min_lr unused), or lr until the last
 * decay_fraction of the steps after the warm-up and a straight line to min_lr over those. */
typedef enum { WP_SCHED_COSINE, WP_SCHED_LINEAR, WP_SCHED_CONSTANT, WP_SCHED_WSD, WP_SCHED_COUNT } WpSchedule;

/* "cosine", "linear", "constant", "wsd", indexed by WpSchedule */
extern const char *const wp_schedule_names[WP_SCHED_COUNT];

typedef struct WpAdamW {
    float lr;             /* peak learning rate, reached at the end of the warm-up */
    float min_lr;         /* the rate at `steps`: 0.1 * lr by default */
    int warmup;           /* steps of linear warm-up */
    int steps;            /* total steps of training: the schedule reaches min_lr here */
    int schedule;         /* WpSchedule: cosine by default */
    float decay_fraction; /* wsd: the fraction of the steps after the warm-up spent decaying (0.2) */
    float beta1, beta2;   /* 0.9, 0.95 */
    float eps;            /* 1e-8 */
    float weight_decay;   /* decoupled; not applied to tensors marked no_decay (norms) */
    float clip;           /* global gradient-norm limit; 0 disables clipping */
} WpAdamW;

/* Fills o with the defaults above and the given peak rate, warm-up and length. */
void adamw_init(WpAdamW *o, float lr, int warmup, int steps);

/* Learning rate of step `step` (0-based): lr * (step+1)/warmup during the warm-up, then the
 * schedule from lr (at step `warmup`) down to min_lr at step `steps`, and min_lr after that
 * (lr for the constant schedule). */
float adamw_lr(const WpAdamW *o, long step);

/* Scale for the gradients given their global sum of squares: min(1, clip / (norm + 1e-6)), as
 * torch.nn.utils.clip_grad_norm_ computes it. *norm receives sqrt(sumsq) if not NULL. */
float adamw_clip_scale(const WpAdamW *o, double sumsq, float *norm);

/* ---- the settings a user chooses ---- */

/* What a resume does when a flag differs from the value its checkpoint records. */
typedef enum {
    WP_RESUME_WARN,     /* a deliberate act (a new rate, a longer run): allowed, saying old and new */
    WP_RESUME_REFUSE,   /* AdamW's moments are averages under it: changing it is refused, exit 2 */
} WpOnResume;

typedef enum { WP_SETTING_FLOAT, WP_SETTING_INT, WP_SETTING_SCHEDULE } WpSettingKind;

typedef struct WpAdamWSetting {
    const char *key;        /* the checkpoint's metadata key */
    const char *flag;       /* the trainers' flag */
    WpSettingKind kind;
    size_t offset;          /* of the float or int in WpAdamW */
    double lo, hi;          /* the valid range (numbers) */
    int lo_open, hi_open;   /* the range excludes lo, hi */
    WpOnResume on_resume;
    int wsd_only;           /* means something only to --schedule wsd (not compared under others) */
    /* Its value in checkpoints written before it was recorded (the fixed value of then), or NULL
     * when it was a flag then and is not known: such a checkpoint's setting is not compared. */
    const char *before;
} WpAdamWSetting;

extern const WpAdamWSetting wp_adamw_settings[];
extern const int wp_adamw_nsettings;

/* The setting's value in o as text: a float in %.9g with exact (read back to the same float, for
 * the checkpoint) or %g (for people), an int, a schedule's name. */
void adamw_setting_format(const WpAdamW *o, const WpAdamWSetting *s, int exact, char *buf, size_t len);

/* Sets the setting in o from text, checked against its range. 0, or -1 (not a value in range). */
int adamw_setting_parse(WpAdamW *o, const WpAdamWSetting *s, const char *text);

/* The setting's valid values in words, for an error: "a number in [0, 1)", "one of cosine, ...". */
void adamw_setting_range(const WpAdamWSetting *s, char *buf, size_t len);

/* Why text was refused, for an error after the flag's name: "expected RANGE, got \"TEXT\"" (the
 * value as the user wrote it), and when TEXT is in the range but its 32-bit float (AdamW's) is not
 * (--eps 1e-300 is 0, --beta2 0.9999999999 is 1), that and the nearest value that is. */
void adamw_setting_refusal(const WpAdamWSetting *s, const char *text, char *buf, size_t len);

#endif
