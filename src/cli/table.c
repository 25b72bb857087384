#include "cli/table.h"
#include <string.h>
#include <unistd.h>

void table_cell(char *out, size_t n, const char *s, int width)
{
    size_t o = 0;
    int cols = 0;
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    size_t total = 0;
    for (const unsigned char *q = p; *q; q++) total += (*q & 0xC0) != 0x80;
    int limit = width > 0 && (int)total > width ? width - 3 : width;
    while (*p && o + 5 < n) {
        if (width > 0 && cols >= limit) break;
        if ((*p & 0xC0) == 0x80) { /* stray continuation byte */
            out[o++] = '?';
            p++;
            cols++;
            continue;
        }
        int len = *p < 0x80 ? 1 : (*p & 0xE0) == 0xC0 ? 2 : (*p & 0xF0) == 0xE0 ? 3 : (*p & 0xF8) == 0xF0 ? 4 : 0;
        int okseq = len > 0;
        for (int i = 1; i < len && okseq; i++) okseq = (p[i] & 0xC0) == 0x80;
        if (!okseq || (len == 1 && (*p < 0x20 || *p == 0x7F))) {
            out[o++] = '?';
            p++;
        } else {
            memcpy(out + o, p, (size_t)len);
            o += (size_t)len;
            p += len;
        }
        cols++;
    }
    if (*p && width > 0 && o + 4 <= n) {
        memcpy(out + o, "...", 3);
        o += 3;
    }
    out[o] = '\0';
}

void table_put(FILE *f, const char *s, int width, int gap)
{
    char buf[4096];
    table_cell(buf, sizeof buf, s, width);
    int cols = 0;
    for (const unsigned char *q = (const unsigned char *)buf; *q; q++) cols += (*q & 0xC0) != 0x80;
    fputs(buf, f);
    for (int i = cols; i < width + gap; i++) fputc(' ', f);
}

int table_stderr_tty(void) { return isatty(2); }
