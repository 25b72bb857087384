/* gpt's data: token streams and the (sample index -> window) mapping.
 *
 * Sources (the spec of --data, and of --val-data for token files):
 *   - llm.c token files, "tokens:GLOB" or a path/glob ending in .bin: each
 *     file a header of 256 little-endian int32 (magic 20240520, version 1,
 *     token count n) followed by n uint16 tokens; the files matching the
 *     glob, in lexicographic order, are one concatenated stream (64-bit
 *     offsets throughout; files are memory-mapped). A wrong magic, version
 *     or count, or a file shorter or longer than 1024 + 2n bytes, is a usage
 *     error naming the file and what was expected. The validation split is
 *     --val-data GLOB (llm.c's *_val_*.bin), or else the last val_fraction of
 *     the train stream.
 *   - "text:FILE": the file's bytes are the tokens (vocabulary 256); the
 *     validation split is its last val_fraction.
 *   - "synthetic": a generated stream for throughput runs and tests: a
 *     first-order Markov chain over V tokens whose next token is a fixed
 *     random successor of the current one with probability 205/256, else
 *     uniform (data.c gives the Philox words), restarted every 1024 tokens
 *     so any position is a pure function of (seed, split, position) computed
 *     from its block's start. The loss floor is the chain's entropy, about
 *     1.6 nats at V = 256 and 2.7 at 50257: well below ln V, reached by any
 *     model that learns the successor table.
 *
 * Samples (T = the sequence length):
 *   - train: n_train = floor(n / T) - 1 windows; sample i of epoch E covers
 *     tokens [o, o + T] with o = shift(E) + i*T and shift(E) = Philox(seed,
 *     RNG_AUGMENT, a = E, b = 0, index 0) mod T (0 with fixed_windows):
 *     tokens t = s[o..o+T-1],
 *     targets s[o+1..o+T]. A pure function of (seed, epoch, index), so the
 *     sampler's permutation of the indices gives N ranks exactly the 1-rank
 *     sample set; the shift moves the window boundaries between epochs.
 *   - val: n_val = ceil((n - 1) / T) windows at o = i*T; positions whose
 *     target lies past the end are unscored (target -1, token 0). Every
 *     validation token after the first is a target exactly once. */
#ifndef PLUMB_GPT_DATA_H
#define PLUMB_GPT_DATA_H
#include <stddef.h>
#include <stdint.h>
#include "core/err.h"

#define GPT_TOKEN_MAGIC 20240520
#define GPT_TOKEN_VERSION 1
#define GPT_SYNTH_BLOCK 1024

enum gpt_split { GPT_TRAIN = 0, GPT_VAL = 1 };

struct gpt_data_opts {
    uint64_t seed;          /* synthetic data */
    int vocab;              /* the model's vocabulary: synthetic tokens < vocab; 256 for text */
    uint64_t synth_train;   /* synthetic tokens per split (train, val) */
    uint64_t synth_val;
    double val_fraction;    /* hold-out share without --val-data (0.1) */
    int fixed_windows;      /* 1: no per-epoch shift (train window i at i*T every epoch) */
};

struct gpt_data;

/* spec as above; val_spec NULL or "" = hold out (or synthetic's own split). */
int gpt_data_open(const char *spec, const char *val_spec, const struct gpt_data_opts *o, struct gpt_data **out,
                  plumb_err *e);
void gpt_data_free(struct gpt_data *d);
/* tokens of a split */
uint64_t gpt_data_tokens(const struct gpt_data *d, int split);
/* the largest token id + 1 the source holds (token files: read at open;
 * text: 256; synthetic: its vocabulary) */
int gpt_data_vocab(const struct gpt_data *d);
/* the same for the validation files of val_spec alone (0 without them), so
 * a caller can name the option whose files hold an id too large */
int gpt_data_val_vocab(const struct gpt_data *d);
/* "3 token files (1.2 G tokens), val: 1 file (100 M tokens)" */
const char *gpt_data_describe(const struct gpt_data *d);
/* samples of sequence length T (see above); 0 when the split is too short */
long gpt_data_samples(const struct gpt_data *d, int split, int T);
/* tokens [pos, pos + n) of a split into out (int32), pos + n <= tokens.
 * Token files are read under a guard (core/mapguard.h): a file that shrank
 * since it was opened (truncated, or rewritten in place) is PLUMB_EIO
 * naming it, where the read used to end the process with SIGBUS. */
int gpt_data_read(const struct gpt_data *d, int split, uint64_t pos, size_t n, int32_t *out, plumb_err *e);
/* One sample: tok [T], tgt [T] (see above; epoch unused for val). Errors as
 * gpt_data_read's. */
int gpt_data_sample(const struct gpt_data *d, int split, int T, uint64_t seed, long epoch, long index, int32_t *tok,
                    int32_t *tgt, plumb_err *e);
/* A batch of `count` samples idx[] into rows 0..count-1 of tok/tgt [cap, T];
 * rows count..cap-1 are masked (tokens 0, targets -1). Errors as
 * gpt_data_read's (the first one when several rows fail). */
int gpt_data_fill(const struct gpt_data *d, int split, int T, uint64_t seed, long epoch, const uint32_t *idx,
                  int count, int cap, int32_t *tok, int32_t *tgt, plumb_err *e);
/* The window shift of an epoch (0..T-1; the data's: 0 with fixed_windows). */
int gpt_data_shift(uint64_t seed, long epoch, int T);

/* Writes an llm.c token file (header + uint16 tokens): tests and data
 * preparation. Tokens must be < 65536. */
int gpt_token_file_write(const char *path, const uint16_t *tok, size_t n, plumb_err *e);

#endif
