/* The options of plumb train, bound once: each option names the
 * train_config field it sets (train/trainer.h), its kind, its range and its
 * default; a workload's presets (train/model.h, struct train_preset) give
 * the defaults that depend on the preset. plumb train parses its command
 * line through this table, the accept check and bench build their configs
 * through it, and the drills turn a config back into a command line with
 * it, so a default lives in one place.
 *
 * Ranges: "lo..hi" (either end may be left open: "0..", "..10"); for
 * numbers '(' before lo or ')' after hi makes that end exclusive ("(0..1)":
 * 0 < x < 1). A value out of range, of the wrong kind or not among the
 * choices is PLUMB_EUSAGE naming the option (plumb train exits 2). */
#ifndef PLUMB_TRAIN_OPTIONS_H
#define PLUMB_TRAIN_OPTIONS_H
#include <stddef.h>
#include "core/err.h"
#include "train/model.h"
#include "train/trainer.h"

enum topt_kind {
    TOPT_INT,    /* long field */
    TOPT_U64,    /* uint64_t field */
    TOPT_NUM,    /* double field */
    TOPT_STR,    /* const char * field (the caller's string, kept by pointer) */
    TOPT_CHOICE, /* const char * field, one of range "a|b|c" */
    TOPT_FLAG,   /* int field set to 1; takes no value */
    TOPT_OPTCHOICE, /* const char * field: given alone, `def` (the implicit value);
                       with a value, one of range "a|b"; NULL when not given */
};

/* Workload options (struct workload.options) store their validated text in
 * train_config.wl_opt[slot]: their `field` is TOPT_WL(slot). */
#define TOPT_WL(slot) (-1 - (long)(slot))

struct train_option {
    const char *name;     /* "--steps" */
    enum topt_kind kind;
    long field;           /* offsetof(struct train_config, ...), or TOPT_WL(slot) */
    const char *def;      /* default text (NULL: unset, or a preset's) */
    const char *help;
    const char *range;    /* see above; choices for TOPT_CHOICE */
    const char *metavar;
};

/* The options every workload has; ends with {0}. */
extern const struct train_option train_options[];

/* Every option at its table default for workload wl (its first preset). */
void train_config_defaults(struct train_config *c, const struct workload *wl);
/* Sets option `name` ("--steps") from text (NULL for a flag), validated;
 * marks it given, so no preset default overrides it. String options and
 * the workload's own options keep the pointer, not a copy: value must live
 * as long as c. */
int train_option_set(struct train_config *c, const char *name, const char *value, plumb_err *e);
/* After the options: the preset's defaults for options not given, the
 * derived fields (numerics, precision, skip list) and the checks that span
 * options. */
int train_config_finish(struct train_config *c, plumb_err *e);
/* The option called name (generic or wl's own), NULL when none; *index its
 * position in train_config.given. */
const struct train_option *train_option_find(const struct workload *wl, const char *name, int *index);
/* The text option `name` takes under preset when not given: the preset's
 * unconditional default, else the option table's; NULL when neither sets it. */
const char *train_option_preset_default(const struct workload *wl, const char *preset, const char *name);
/* "256", or "<preset> 256, <preset> 2048" when presets set it. */
void train_option_default_desc(const struct workload *wl, const struct train_option *o, char *buf, size_t n);
/* The given options of c as command-line words ("--steps", "40", ...): at
 * most max words in argv, their text in buf. Returns the count or -1 when
 * argv or buf is too small. */
int train_config_argv(const struct train_config *c, char **argv, int max, char *buf, size_t n);
/* Why workload wl does not read option o (its unused list, or --predictions
 * when its eval writes none), NULL when it does. */
const char *train_option_unused(const struct workload *wl, const struct train_option *o);
/* Iteration over every option of wl: generic first, then wl's own. */
int train_option_count(const struct workload *wl);
const struct train_option *train_option_at(const struct workload *wl, int i);

#endif
