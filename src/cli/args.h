/* Declarative option parsing for subcommands: each command lists its options
 * with a default and help text; `--help` prints them all with defaults; a bad
 * value is a PLUMB_EUSAGE error naming the option, the value and what was
 * expected. Accepts "--name value" and "--name=value". */
#ifndef PLUMB_ARGS_H
#define PLUMB_ARGS_H
#include "core/err.h"

enum opt_kind {
    OPT_STR,    /* const char **dst                                    */
    OPT_INT,    /* long *dst                                           */
    OPT_DOUBLE, /* double *dst                                         */
    OPT_FLAG,   /* int *dst, set to 1, takes no value                  */
    OPT_CHOICE, /* const char **dst, value must be one of `choices`    */
    OPT_OPTCHOICE, /* const char **dst: alone ("--resume") sets "", with a value
                      ("--resume auto", "--resume=auto") one of `choices`; the
                      next word is its value only when it is one of them */
};

struct opt {
    const char *name;    /* "--count" */
    enum opt_kind kind;
    void *dst;
    const char *def;     /* default as text (NULL: none / unset) */
    const char *help;
    const char *choices; /* OPT_CHOICE: "fast|golden"; OPT_INT: "min..max" optional */
    const char *metavar; /* "N", "DIR"... (optional) */
};

#define ARGS_HELP (-1) /* returned when --help was printed: exit 0 */

/* usage: "plumb rng [options]"; summary: one paragraph. opts ends with {0}.
 * Positional arguments are collected in order into pos[] (at most max_pos);
 * *npos gets their count; "--" ends option parsing. */
int args_parse(const char *usage, const char *summary, const struct opt *opts, int argc,
               char **argv, char **pos, int max_pos, int *npos, plumb_err *e);
void args_print_help(const char *usage, const char *summary, const struct opt *opts);

/* Comma lists, e.g. "--precision fp32,bf16": splits into out (pointers into
 * a copy kept in buf). Returns count or -1 if more than max. */
int args_split_list(const char *s, char *buf, size_t bufn, char **out, int max);

/* The command line as given, for a run folder's record: "plumb" and argv[0..argc)
 * (argv[0] the command's name, as main passes it), cut to fit buf. */
void args_command_line(int argc, char **argv, char *buf, size_t n);

#endif
