/* libFuzzer target: run folders read back (report/results.h, results_read)
 * and what the two readers of a run folder do with them: `plumb report`
 * (report/html.h, html_render over the folder's artifacts) and `plumb
 * compare` (report/compare.h, compare_runs of two folders, then its text
 * and HTML renderings).
 *
 * Input: up to three parts separated by NUL bytes:
 *   A's results.json \0 an artifact \0 B's results.json
 * The artifact bytes are written to each folder as metrics.jsonl,
 * checks/f/seeds.jsonl and checks/f/histograms.json (the artifact kinds the
 * readers open: line charts, per-seed results, histograms); the seeds name
 * them. Without a third part B is A. Checked: a document that
 * results_read accepts renders and compares without a crash or leak, and
 * compare's verdict is one of its documented values. */
#include "fuzz_util.h"
#include "report/compare.h"
#include "report/html.h"
#include "report/results.h"
#include <jansson.h>
#include <string.h>
#include <sys/stat.h>

static char dir_a[256], dir_b[256];
static FILE *devnull;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fuzz_quiet();
    char tmpl[] = "/tmp/plumb-fuzz-results-XXXXXX";
    const char *root = mkdtemp(tmpl);
    if (!root) abort();
    snprintf(dir_a, sizeof dir_a, "%s/a", root);
    snprintf(dir_b, sizeof dir_b, "%s/b", root);
    char p[300];
    const char *dirs[] = {dir_a, dir_b};
    for (int i = 0; i < 2; i++) {
        if (mkdir(dirs[i], 0700) || mkdir((snprintf(p, sizeof p, "%s/checks", dirs[i]), p), 0700) ||
            mkdir((snprintf(p, sizeof p, "%s/checks/f", dirs[i]), p), 0700))
            abort();
    }
    if (!(devnull = fopen("/dev/null", "w"))) abort();
    return 0;
}

static void put_folder(const char *dir, const uint8_t *doc, size_t ndoc, const uint8_t *art, size_t nart)
{
    static const char *const names[] = {"results.json", "metrics.jsonl", "checks/f/seeds.jsonl",
                                        "checks/f/histograms.json"};
    char p[400];
    for (int i = 0; i < 4; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        if (i == 0) fuzz_write_file(p, doc, ndoc);
        else fuzz_write_file(p, art, nart);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *part[3] = {data, NULL, NULL};
    size_t len[3] = {size, 0, 0};
    for (int k = 0; k < 2; k++) {
        const uint8_t *z = memchr(part[k], 0, len[k]);
        if (!z) break;
        part[k + 1] = z + 1;
        len[k + 1] = len[k] - (size_t)(z + 1 - part[k]);
        len[k] = (size_t)(z - part[k]);
    }
    if (!part[2]) part[2] = part[0], len[2] = len[0];
    put_folder(dir_a, part[0], len[0], part[1] ? part[1] : (const uint8_t *)"", len[1]);
    put_folder(dir_b, part[2], len[2], part[1] ? part[1] : (const uint8_t *)"", len[1]);

    json_t *a = NULL, *b = NULL;
    plumb_err e = {0};
    if (results_read(dir_a, &a, &e) != PLUMB_OK) {
        if (!e.msg[0]) abort();
        return 0;
    }
    (void)results_doc_verdict(a);
    char *html = html_render(a, dir_a); /* plumb report */
    free(html);

    plumb_err eb = {0};
    if (results_read(dir_b, &b, &eb) == PLUMB_OK) { /* plumb compare A B */
        struct compare_opts o;
        compare_opts_defaults(&o);
        json_t *cmp = NULL;
        plumb_err ec = {0};
        if (compare_runs(a, dir_a, b, dir_b, &o, &cmp, &ec) == PLUMB_OK) {
            const char *v = json_string_value(json_object_get(cmp, "verdict"));
            if (!v || (strcmp(v, "equivalent") && strcmp(v, "different") && strcmp(v, "undecided") &&
                       strcmp(v, "digests equal") && strcmp(v, "nothing to test")))
                abort();
            compare_print(devnull, cmp);
            char *ch = compare_html_render(cmp);
            free(ch);
            json_decref(cmp);
        } else if (!ec.msg[0]) {
            abort();
        }
        json_decref(b);
    }
    json_decref(a);
    return 0;
}
