/* The PyTorch reference state of gpt-tiny (bench/gpt_reference.py writes it;
 * the format is described there): a JSON header naming tensors in a binary
 * payload. Loaded whole into host memory; tensors come back as fp32 (bf16
 * widened exactly) or int32. */
#ifndef PLUMB_GPT_REFSTATE_H
#define PLUMB_GPT_REFSTATE_H
#include <stddef.h>
#include <stdint.h>
#include "core/err.h"
#include "models/gpt/gpt.h"

struct gpt_ref {
    struct gpt_config c;
    int B, T;
    double lr, beta1, beta2, eps, weight_decay, clip;
    int steps;
    char torch_version[32];
    void *json;  /* json_t * of the header */
    char *data;  /* the whole file */
    size_t len;
    size_t payload; /* offset of the payload in data */
};

/* Reads and checks the file: magic, header, every tensor inside the
 * payload. Errors name the file and what was expected. */
int gpt_ref_load(const char *path, struct gpt_ref *r, plumb_err *e);
void gpt_ref_free(struct gpt_ref *r);
/* Tensor `name` into out (n elements: fp32 for "f32"/"bf16" tensors, int32
 * for "i32"); the element count must be n. */
int gpt_ref_f32(const struct gpt_ref *r, const char *name, float *out, size_t n, plumb_err *e);
int gpt_ref_i32(const struct gpt_ref *r, const char *name, int32_t *out, size_t n, plumb_err *e);

#endif
