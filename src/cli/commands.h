/* The subcommand table (git's builtin/ pattern: one file per command,
 * cmd_<name>.c, each exporting `int cmd_<name>(int argc, char **argv)` that
 * returns the process exit code: 0 pass, 1 a check failed, 2 usage/input
 * error, 3 internal error). */
#ifndef PLUMB_COMMANDS_H
#define PLUMB_COMMANDS_H

struct command {
    const char *name;
    const char *summary;
    int (*run)(int argc, char **argv);
};

extern const struct command plumb_commands[];

/* Prints the error message as "plumb CMD: message" and maps the code to an
 * exit status. For use by cmd_*.c. */
int cli_fail(const char *cmd, const void *err /* plumb_err* */);

int cmd_accept(int argc, char **argv);
int cmd_doctor(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_version(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_health(int argc, char **argv);
int cmd_launch(int argc, char **argv);
int cmd_faults(int argc, char **argv);
int cmd_numerics(int argc, char **argv);
int cmd_rng(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_data(int argc, char **argv);
int cmd_comm(int argc, char **argv);
int cmd_compare(int argc, char **argv);
int cmd_attribute(int argc, char **argv);
#endif
