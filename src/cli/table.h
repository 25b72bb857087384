/* Plain-text tables for the CLI: cells are cut to a width on a UTF-8
 * boundary and control characters are shown as '?', so a hostile value from
 * the environment cannot move the cursor or recolour the terminal. */
#ifndef PLUMB_CLI_TABLE_H
#define PLUMB_CLI_TABLE_H
#include <stdio.h>
#include <stddef.h>

/* Copies s into out (size n) for display: at most width columns (code points),
 * "..." when cut, controls replaced. */
void table_cell(char *out, size_t n, const char *s, int width);
/* Prints s padded to width columns (cut as table_cell) then `gap` spaces. */
void table_put(FILE *f, const char *s, int width, int gap);
/* Is stderr a terminal (progress is drawn only then)? */
int table_stderr_tty(void);

#endif
