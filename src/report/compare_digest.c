/* Digest rows of plumb compare (report/compare.h): numbers that must be the
 * same bits on every platform, so that equal is pass and any difference is a
 * fault, never a tolerance question:
 *   rng:             every Philox stream's u32 / uniform / normal digests and
 *                    the known-answer words (check rng, details.streams/kat);
 *   numerics-golden: every golden op's output digest (check numerics with
 *                    details.numerics = "golden", details.ops[].digest);
 *   train-golden:    the golden training's parameter digest (checks train-<workload>,
 *                    details.golden_param_digest; and plumb train's own check where both
 *                    sides trained golden with the same configuration hash and steps:
 *                    details.param_digest, details.config_hash, details.train);
 *   ladder-golden:   the ladder's golden rung, per seed (compare_ladder.c).
 * Fast-mode digests differ between platforms by design and are not rows. */
#include "core/jsonx.h"
#include "report/compare.h"
#include <stdio.h>
#include <string.h>

static const char *s_or(const json_t *o, const char *k, const char *d)
{
    const char *s = jsonx_str(o, k);
    return s ? s : d;
}

static void add_row(json_t *rows, const char *kind, const char *item, const char *a, const char *b)
{
    json_array_append_new(rows, json_pack("{s:s, s:s, s:s, s:s, s:b}", "kind", kind, "item", item, "a", a ? a : "",
                                          "b", b ? b : "", "equal", a && b && !strcmp(a, b)));
}

static void rng_rows(const json_t *ca, const json_t *cb, json_t *rows)
{
    const json_t *sa = json_object_get(json_object_get(ca, "details"), "streams");
    const json_t *sb = json_object_get(json_object_get(cb, "details"), "streams");
    static const char *fields[] = {"digest_u32", "digest_uniform", "digest_normal"};
    size_t i, j;
    json_t *x, *y;
    json_array_foreach(sa, i, x)
    {
        const char *name = s_or(x, "name", "?");
        const json_t *match = NULL;
        json_array_foreach(sb, j, y) if (!strcmp(s_or(y, "name", ""), name)) match = y;
        for (int f = 0; f < 3; f++) {
            if (!jsonx_str(x, fields[f])) continue;
            char item[160];
            snprintf(item, sizeof item, "stream %s %s", name, fields[f] + 7);
            add_row(rows, "rng", item, jsonx_str(x, fields[f]), match ? jsonx_str(match, fields[f]) : NULL);
        }
    }
    const json_t *ka = json_object_get(json_object_get(ca, "details"), "kat");
    const json_t *kb = json_object_get(json_object_get(cb, "details"), "kat");
    json_array_foreach(ka, i, x)
    {
        const char *v = s_or(x, "vector", "?");
        const json_t *match = NULL;
        json_array_foreach(kb, j, y) if (!strcmp(s_or(y, "vector", ""), v)) match = y;
        char item[160];
        snprintf(item, sizeof item, "known answer %s", v);
        add_row(rows, "rng", item, jsonx_str(x, "got"), match ? jsonx_str(match, "got") : NULL);
    }
}

static void golden_op_rows(const json_t *ca, const json_t *cb, json_t *rows)
{
    const json_t *oa = json_object_get(json_object_get(ca, "details"), "ops");
    const json_t *ob = json_object_get(json_object_get(cb, "details"), "ops");
    size_t i, j;
    json_t *x, *y;
    json_array_foreach(oa, i, x)
    {
        const char *op = s_or(x, "op", "?"), *dt = s_or(x, "dtype", ""), *sh = s_or(x, "shape", "");
        if (!jsonx_str(x, "digest")) continue;
        const json_t *match = NULL;
        json_array_foreach(ob, j, y) if (!strcmp(s_or(y, "op", ""), op) && !strcmp(s_or(y, "dtype", ""), dt) &&
                                         !strcmp(s_or(y, "shape", ""), sh)) match = y;
        char item[200];
        snprintf(item, sizeof item, "%s %s %s", op, dt, sh);
        add_row(rows, "numerics-golden", item, jsonx_str(x, "digest"), match ? jsonx_str(match, "digest") : NULL);
    }
}

/* plumb train's checks (details.param_digest) of two golden runs of one
 * configuration (details.config_hash: the model, data, seeds, batch,
 * optimizer, precision; not the device) to the same step: their digests
 * must be equal on any device and rank count. Runs of other configurations
 * or lengths give no row: their digests differ by design. */
static int same_golden_training(const json_t *da, const json_t *db)
{
    const json_t *ta = json_object_get(da, "train"), *tb = json_object_get(db, "train");
    const char *na = jsonx_str(ta, "numerics"), *nb = jsonx_str(tb, "numerics");
    const char *ha = jsonx_str(da, "config_hash"), *hb = jsonx_str(db, "config_hash");
    const json_t *sa = json_object_get(ta, "steps"), *sb = json_object_get(tb, "steps");
    return na && nb && !strcmp(na, "golden") && !strcmp(nb, "golden") && ha && hb && !strcmp(ha, hb) &&
           jsonx_str(da, "param_digest") && jsonx_str(db, "param_digest") && json_is_integer(sa) &&
           json_is_integer(sb) && json_integer_value(sa) == json_integer_value(sb);
}

void compare_digest_rows(const json_t *ca, const json_t *cb, json_t *rows)
{
    const char *name = s_or(ca, "name", "");
    const json_t *da = json_object_get(ca, "details"), *db = json_object_get(cb, "details");
    if (!strcmp(name, "rng")) rng_rows(ca, cb, rows);
    const char *mode = jsonx_str(da, "numerics");
    if (!strcmp(name, "numerics") && mode && !strcmp(mode, "golden")) golden_op_rows(ca, cb, rows);
    if (jsonx_str(da, "golden_param_digest") || jsonx_str(db, "golden_param_digest")) {
        char item[160];
        snprintf(item, sizeof item, "%s golden training parameters", name);
        add_row(rows, "train-golden", item, jsonx_str(da, "golden_param_digest"), jsonx_str(db, "golden_param_digest"));
    }
    if (same_golden_training(da, db)) {
        char item[160];
        snprintf(item, sizeof item, "%s golden training parameters (%lld steps)", name,
                 (long long)json_integer_value(json_object_get(json_object_get(da, "train"), "steps")));
        add_row(rows, "train-golden", item, jsonx_str(da, "param_digest"), jsonx_str(db, "param_digest"));
    }
}

json_t *compare_digest_fault(const json_t *rows)
{
    size_t i;
    json_t *r;
    json_array_foreach(rows, i, r)
    {
        if (json_is_true(json_object_get(r, "equal"))) continue;
        const char *kind = s_or(r, "kind", "?"), *item = s_or(r, "item", "?");
        const char *a = s_or(r, "a", ""), *b = s_or(r, "b", "");
        char msg[768];
        if (!*a || !*b)
            snprintf(msg, sizeof msg, "%s %s: only one side has it (%s), the other did not record it", kind, item,
                     *a ? "A" : "B");
        else if (!strcmp(kind, "rng"))
            snprintf(msg, sizeof msg, "rng %s: %.16s... on A, %.16s... on B; Philox streams are integer arithmetic and "
                     "the same bits on every device: a hardware, driver or plugin fault", item, a, b);
        else
            snprintf(msg, sizeof msg, "%s first differs at %s: %.16s... on A, %.16s... on B; golden arithmetic has one "
                     "evaluation order on every device, so this is a hardware or driver fault, not a tolerance question",
                     !strcmp(kind, "numerics-golden") ? "golden numerics" : kind, item, a, b);
        return json_pack("{s:s, s:s, s:s}", "kind", kind, "item", item, "message", msg);
    }
    return NULL;
}
