/* Reader of bench/gpt_reference.py's state file (see refstate.h). */
#include "models/gpt/refstate.h"
#include "core/dtype.h"
#include "core/file.h"
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAGIC "PLUMBGPTREF1\n"

void gpt_ref_free(struct gpt_ref *r)
{
    if (r->json) json_decref((json_t *)r->json);
    free(r->data);
    memset(r, 0, sizeof *r);
}

static int cfg_int(const json_t *o, const char *k, int *out, const char *path, plumb_err *e)
{
    const json_t *v = json_object_get(o, k);
    if (!json_is_integer(v)) return err_set(e, PLUMB_EUSAGE, "%s: header field '%s' missing (expected an integer)", path, k);
    *out = (int)json_integer_value(v);
    return PLUMB_OK;
}

int gpt_ref_load(const char *path, struct gpt_ref *r, plumb_err *e)
{
    memset(r, 0, sizeof *r);
    int rc = file_read_all(path, &r->data, &r->len, e);
    if (rc) return rc;
    const size_t ml = strlen(MAGIC);
    if (r->len < ml || memcmp(r->data, MAGIC, ml)) {
        gpt_ref_free(r);
        return err_set(e, PLUMB_EUSAGE, "%s: not a gpt reference state (expected the line PLUMBGPTREF1 first)", path);
    }
    const char *nl = memchr(r->data + ml, '\n', r->len - ml);
    if (!nl) {
        gpt_ref_free(r);
        return err_set(e, PLUMB_EUSAGE, "%s: truncated header (expected a JSON line)", path);
    }
    json_error_t je;
    json_t *j = json_loadb(r->data + ml, (size_t)(nl - r->data - ml), 0, &je);
    if (!j) {
        gpt_ref_free(r);
        return err_set(e, PLUMB_EUSAGE, "%s: header is not JSON: %s", path, je.text);
    }
    r->json = j;
    r->payload = (size_t)(nl + 1 - r->data);
    const json_t *c = json_object_get(j, "config"), *o = json_object_get(j, "optimizer");
    if (!json_is_object(c) || !json_is_object(o)) {
        gpt_ref_free(r);
        return err_set(e, PLUMB_EUSAGE, "%s: header has no config or optimizer object", path);
    }
    snprintf(r->c.preset, sizeof r->c.preset, "reference");
    if ((rc = cfg_int(c, "n_layer", &r->c.n_layer, path, e)) || (rc = cfg_int(c, "n_head", &r->c.n_head, path, e)) ||
        (rc = cfg_int(c, "n_embd", &r->c.n_embd, path, e)) || (rc = cfg_int(c, "block_size", &r->c.block_size, path, e)) ||
        (rc = cfg_int(c, "vocab", &r->c.vocab, path, e)) || (rc = cfg_int(c, "vocab_padded", &r->c.vocab_padded, path, e)) ||
        (rc = cfg_int(j, "B", &r->B, path, e)) || (rc = cfg_int(j, "T", &r->T, path, e)) ||
        (rc = cfg_int(o, "steps", &r->steps, path, e))) {
        gpt_ref_free(r);
        return rc;
    }
    r->lr = json_number_value(json_object_get(o, "lr"));
    r->beta1 = json_number_value(json_object_get(o, "beta1"));
    r->beta2 = json_number_value(json_object_get(o, "beta2"));
    r->eps = json_number_value(json_object_get(o, "eps"));
    r->weight_decay = json_number_value(json_object_get(o, "weight_decay"));
    r->clip = json_number_value(json_object_get(o, "clip"));
    const char *tv = json_string_value(json_object_get(j, "torch"));
    snprintf(r->torch_version, sizeof r->torch_version, "%s", tv ? tv : "?");
    const json_t *ts = json_object_get(j, "tensors");
    size_t i;
    const json_t *t;
    if (!json_is_array(ts)) {
        gpt_ref_free(r);
        return err_set(e, PLUMB_EUSAGE, "%s: header has no tensor list", path);
    }
    json_array_foreach(ts, i, t)
    {
        const json_int_t off = json_integer_value(json_object_get(t, "offset"));
        const json_int_t nb = json_integer_value(json_object_get(t, "nbytes"));
        if (off < 0 || nb < 0 || r->payload + (size_t)off + (size_t)nb > r->len) {
            /* the message first: the name belongs to the header JSON that gpt_ref_free releases */
            const char *nm = json_string_value(json_object_get(t, "name"));
            rc = err_set(e, PLUMB_EUSAGE, "%s: tensor %s [%lld, +%lld) lies past the end of the payload (file has %zu bytes)",
                         path, nm ? nm : "?", (long long)off, (long long)nb, r->len);
            gpt_ref_free(r);
            return rc;
        }
    }
    if ((rc = gpt_config_validate(&r->c, e))) gpt_ref_free(r);
    return rc;
}

static const json_t *find(const struct gpt_ref *r, const char *name, size_t n, const char **dtype, plumb_err *e)
{
    const json_t *ts = json_object_get((const json_t *)r->json, "tensors"), *t;
    size_t i;
    json_array_foreach(ts, i, t)
    {
        const char *nm = json_string_value(json_object_get(t, "name"));
        if (!nm || strcmp(nm, name)) continue;
        *dtype = json_string_value(json_object_get(t, "dtype"));
        size_t numel = 1, k;
        const json_t *s;
        json_array_foreach(json_object_get(t, "shape"), k, s) numel *= (size_t)json_integer_value(s);
        if (numel != n) {
            err_set(e, PLUMB_EUSAGE, "reference tensor %s has %zu elements (expected %zu)", name, numel, n);
            return NULL;
        }
        return t;
    }
    err_set(e, PLUMB_EUSAGE, "reference state has no tensor %s", name);
    return NULL;
}

int gpt_ref_f32(const struct gpt_ref *r, const char *name, float *out, size_t n, plumb_err *e)
{
    const char *dt = NULL;
    const json_t *t = find(r, name, n, &dt, e);
    if (!t) return PLUMB_EUSAGE;
    const char *p = r->data + r->payload + (size_t)json_integer_value(json_object_get(t, "offset"));
    if (dt && !strcmp(dt, "f32")) {
        memcpy(out, p, n * sizeof(float));
    } else if (dt && !strcmp(dt, "bf16")) {
        for (size_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, p + 2 * i, 2);
            out[i] = bf16_to_f32(h);
        }
    } else {
        return err_set(e, PLUMB_EUSAGE, "reference tensor %s is %s (expected f32 or bf16)", name, dt ? dt : "?");
    }
    return PLUMB_OK;
}

int gpt_ref_i32(const struct gpt_ref *r, const char *name, int32_t *out, size_t n, plumb_err *e)
{
    const char *dt = NULL;
    const json_t *t = find(r, name, n, &dt, e);
    if (!t) return PLUMB_EUSAGE;
    if (!dt || strcmp(dt, "i32")) return err_set(e, PLUMB_EUSAGE, "reference tensor %s is %s (expected i32)", name, dt ? dt : "?");
    memcpy(out, r->data + r->payload + (size_t)json_integer_value(json_object_get(t, "offset")), n * sizeof(int32_t));
    return PLUMB_OK;
}
