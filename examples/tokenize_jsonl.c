/* SPDX-License-Identifier: MIT */
/* nnt-tokenize --jsonl: JSON Lines files of prompt/answer records -> a token file with a loss
 * mask, in rows of T (nnt_sft_encode, nnt_token_writer_write_example). A line that fails is
 * named as FILE:LINE with the library's message; blank lines are skipped. */
#define _POSIX_C_SOURCE 200809L
#include "tokenize_jsonl.h"
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *prog = "nnt-tokenize";   /* the messages' prefix (jsonl_opts.program) */

static int fail_lib(const char *where, int rc)
{
    fprintf(stderr, "%s: %s: %s (%s)\n", prog, where, nnt_ctx_last_error(NULL),
            nnt_strerror(rc));
    return 1;
}

/* One encoded example into the writer (values: its row's, else NULL); counts into *st. */
static int write_one(const char *where, nnt_token_writer *w, int64_t T, const int32_t *ids,
                     const uint8_t *counts, size_t n, const float *values, jsonl_stats *st)
{
    int e = values ? nnt_token_writer_write_example_values(w, ids, counts, n, values)
                   : nnt_token_writer_write_example(w, ids, counts, n);
    if (e) {
        fail_lib(where, e);
        if (e == NNT_E_INVAL && (int64_t)n > T)
            fprintf(stderr, "%s: (%zu tokens: give --too-long cut to keep the first %lld, "
                    "or a larger --seq)\n", prog, n, (long long)T);
        return 1;
    }
    int64_t kept = (int64_t)n > T ? T : (int64_t)n, counted = 0;
    st->examples++;
    st->cut += (int64_t)n > T;
    for (int64_t i = 1; i < kept; i++)
        counted += counts[i] != 0;
    st->counted += counted;
    st->empty += counted == 0;
    return 0;
}

/* A classification record's text then its label (the one target that counts) into
 * *row / *counts (grown as needed): the text cut to T - 1 tokens with cut, else refused
 * when longer; *n the row's length. A record of values (o->problem): its text then a token
 * 0 that counts, its values into values. */
static int labelled_row(const char *where, nnt_sft *s, const char *record, size_t len,
                        const jsonl_opts *o, int32_t **row, uint8_t **counts, size_t *cap,
                        size_t *n, float *values, jsonl_stats *st)
{
    const int32_t *ids;
    size_t nids;
    int64_t label = 0;
    int e = o->problem ? nnt_sft_encode_valued(s, record, len, o->problem, o->num_labels, &ids,
                                               &nids, values)
                       : nnt_sft_encode_labelled(s, record, len, &ids, &nids, &label);
    if (e)
        return fail_lib(where, e);
    if (label >= o->num_labels) {
        fprintf(stderr, "%s: %s: the label %lld is not below the %lld labels (--num-labels)\n",
                prog, where, (long long)label, (long long)o->num_labels);
        return 1;
    }
    if ((int64_t)nids > o->seq - 1) {
        if (!o->cut) {
            fprintf(stderr, "%s: %s: the text has %zu tokens, more than the %lld a row holds "
                    "before its label: give --too-long cut to keep the first %lld, or a larger "
                    "--seq\n", prog, where, nids, (long long)o->seq - 1, (long long)o->seq - 1);
            return 1;
        }
        nids = (size_t)o->seq - 1;
        st->cut++;
    }
    if (nids + 1 > *cap) {
        int32_t *r = realloc(*row, (nids + 1) * sizeof *r);
        if (r)
            *row = r;
        uint8_t *c = r ? realloc(*counts, nids + 1) : NULL;
        if (!c) {
            fprintf(stderr, "%s: out of memory\n", prog);
            return 1;
        }
        *counts = c, *cap = nids + 1;
    }
    memcpy(*row, ids, nids * sizeof *ids);
    (*row)[nids] = (int32_t)label;
    memset(*counts, 0, nids);
    (*counts)[nids] = 1;
    *n = nids + 1;
    for (int64_t k = 0; o->problem && k < o->num_labels; k++)
        st->label_counts[k] += values[k] > 0.5f;
    if (!o->problem)
        st->label_counts[label]++;
    return 0;
}

/* Paired records read for KTO (nnt_sft_encode_unpaired_rows): TRL's unpair_preference_dataset
 * maps the dataset in batches of 1000 records, each batch's chosen rows then its rejected
 * ones; the chosen rows are written as read, the rejected ones held here until the chunk
 * ends. form: 0 before the first record, 1 unpaired records, 2 paired ones. */
enum { UNPAIR_CHUNK = 1000 };
typedef struct unpair_chunk {
    int form;
    char first[4200];          /* where the first record is (FILE:LINE)              */
    int64_t records;           /* in the chunk                                        */
    int32_t *ids[UNPAIR_CHUNK];  /* the chunk's rejected rows, held                   */
    uint8_t *counts[UNPAIR_CHUNK];
    size_t n[UNPAIR_CHUNK];
    char *where[UNPAIR_CHUNK];
} unpair_chunk;

/* The chunk's rejected rows into the writer (label 0; none when w is NULL), the chunk
 * emptied. */
static int unpair_flush(unpair_chunk *c, nnt_token_writer *w, int64_t T, jsonl_stats *st)
{
    const float undesirable = 0.0f;
    int rc = 0;
    for (int64_t k = 0; k < c->records; k++) {
        if (rc == 0 && w)
            rc = write_one(c->where[k], w, T, c->ids[k], c->counts[k], c->n[k], &undesirable, st);
        free(c->ids[k]), free(c->counts[k]), free(c->where[k]);
    }
    c->records = 0;
    return rc;
}

/* A paired record's rejected row held in the chunk (copied). */
static int unpair_hold(unpair_chunk *c, const char *where, const int32_t *ids,
                       const uint8_t *counts, size_t n)
{
    int64_t k = c->records;
    c->ids[k] = malloc((n ? n : 1) * sizeof *ids);
    c->counts[k] = malloc(n ? n : 1);
    c->where[k] = strdup(where);
    c->n[k] = n;
    c->records++;
    if (!c->ids[k] || !c->counts[k] || !c->where[k]) {
        fprintf(stderr, "%s: out of memory\n", prog);
        return 1;
    }
    memcpy(c->ids[k], ids, n * sizeof *ids);
    memcpy(c->counts[k], counts, n);
    return 0;
}

/* An unpaired or paired record read for KTO: its first row into ids[0], counts[0], n[0]
 * (its label into good[0]), a paired one's rejected row held in c; a record of the other
 * form than the first is refused. */
static int unpaired_record(const char *where, nnt_sft *s, const char *record, size_t len,
                           unpair_chunk *c, const int32_t *ids[2], const uint8_t *counts[2],
                           size_t n[2], int good[2])
{
    int rows = 0, e = nnt_sft_encode_unpaired_rows(s, record, len, ids, counts, n, good, &rows);
    if (e)
        return fail_lib(where, e);
    if (c->form == 0) {
        c->form = rows;
        snprintf(c->first, sizeof c->first, "%s", where);
    }
    if (c->form != rows) {
        const char *first = c->form == 2 ? "paired" : "unpaired";
        fprintf(stderr, "%s: %s: %s preference record among %s ones (the first, %s, is %s): "
                "give records of one form\n", prog, where,
                rows == 2 ? "a paired" : "an unpaired", first, c->first, first);
        return 1;
    }
    /* (the rejected row waits for the chunk's end) */
    return rows == 2 ? unpair_hold(c, where, ids[1], counts[1], n[1]) : 0;
}

/* The records of one file into the writer (preference: a record's chosen and rejected
 * sequences, each its row; num_labels: a record's text and label); counts into *st. */
static int one_file(const char *path, nnt_sft *s, nnt_token_writer *w, const jsonl_opts *o,
                    unpair_chunk *chunk, jsonl_stats *st)
{
    int64_t T = o->seq;
    int preference = o->preference;
    float label = 0.0f;   /* an unpaired record's (its row's value) */
    int32_t *row = NULL;
    uint8_t *row_counts = NULL;
    size_t row_cap = 0;
    float *values = o->problem ? malloc((size_t)o->num_labels * sizeof *values) : NULL;
    if (o->problem && !values) {
        fprintf(stderr, "%s: out of memory\n", prog);
        return 1;
    }
    FILE *f = fopen(path, "r");
    if (!f) {
        free(values);
        fprintf(stderr, "%s: %s: cannot open: %s\n", prog, path, strerror(errno));
        return 1;
    }
    char *line = NULL, where[4200];
    size_t cap = 0;
    ssize_t len;
    int rc = 0;
    for (long lineno = 1; rc == 0 && (len = getline(&line, &cap, f)) >= 0; lineno++) {
        snprintf(where, sizeof where, "%s:%ld", path, lineno);
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            len--;
        /* a UTF-8 byte-order mark before the first record: skipped */
        ssize_t bom = lineno == 1 && len >= 3 && memcmp(line, "\xEF\xBB\xBF", 3) == 0 ? 3 : 0;
        ssize_t k = bom;
        while (k < len && (line[k] == ' ' || line[k] == '\t'))
            k++;
        if (k == len)
            continue;   /* a blank line */
        const int32_t *ids[2];
        const uint8_t *counts[2];
        size_t n[2];
        if (o->num_labels) {
            if ((rc = labelled_row(where, s, line + bom, (size_t)(len - bom), o, &row,
                                   &row_counts, &row_cap, &n[0], values, st)) != 0)
                break;
            ids[0] = row, counts[0] = row_counts;
        } else if (o->unpaired) {
            int good[2] = {0, 0};
            if ((rc = unpaired_record(where, s, line + bom, (size_t)(len - bom), chunk, ids,
                                      counts, n, good)) != 0)
                break;
            label = (float)good[0];
            st->desirable += good[0];
            st->paired += chunk->form == 2;
        } else {
            int e = preference ?
                nnt_sft_encode_preference(s, line + bom, (size_t)(len - bom), ids, counts, n)
                : nnt_sft_encode(s, line + bom, (size_t)(len - bom), &ids[0], &counts[0],
                                 &n[0]);
            if (e) {
                rc = fail_lib(where, e);
                break;
            }
        }
        for (int k = 0; rc == 0 && k < 1 + preference; k++)
            rc = write_one(where, w, T, ids[k], counts[k], n[k], o->unpaired ? &label : values,
                           st);
        if (rc == 0 && chunk->records == UNPAIR_CHUNK)
            rc = unpair_flush(chunk, w, T, st);
    }
    if (rc == 0 && ferror(f)) {
        fprintf(stderr, "%s: %s: cannot read: %s\n", prog, path, strerror(errno));
        rc = 1;
    }
    free(line);
    free(row);
    free(row_counts);
    free(values);
    fclose(f);
    return rc;
}

int tokenize_jsonl(const nnt_tokenizer *tok, const jsonl_opts *o, char **inputs, int ninputs,
                   const char *out, int bits, int64_t vocab, jsonl_stats *st)
{
    memset(st, 0, sizeof *st);
    prog = o->program ? o->program : "nnt-tokenize";
    if (o->num_labels &&
        !(st->label_counts = calloc((size_t)o->num_labels, sizeof *st->label_counts))) {
        fprintf(stderr, "%s: out of memory\n", prog);
        return 1;
    }
    char *found = o->tokenizer_config ? NULL : cli_config_beside(o->tokenizer_json);
    nnt_sft_options so = NNT_SFT_OPTIONS_INIT;
    so.tokenizer_config = o->tokenizer_config ? o->tokenizer_config : found;
    so.chat_template = o->chat_template;
    so.date = o->chat_date;
    so.all_tokens = o->all_tokens;
    so.assistant_only = o->assistant_only;
    nnt_sft *s = NULL;
    int rc = nnt_sft_create(tok, &so, &s);
    free(found);
    if (rc)
        return fail_lib("nnt_sft_create", rc);
    if (o->label_names && (rc = nnt_sft_set_label_names(s, o->label_names, o->nlabel_names))) {
        nnt_sft_destroy(s);
        return fail_lib("--label-names", rc);
    }
    nnt_token_writer_options wo = NNT_TOKEN_WRITER_OPTIONS_INIT;
    wo.bits = bits, wo.vocab = vocab, wo.mask = 1, wo.block = o->seq;
    wo.pack = o->pack && !o->preference && !o->unpaired, wo.cut = o->cut;   /* (a pair: two
                                                                               rows) */
    wo.row_values = o->problem ? o->num_labels : o->unpaired ? 1 : 0;
    if (o->pad_id >= 0)
        wo.pad = (int32_t)o->pad_id;
    else
        nnt_sft_pad_id(s, &wo.pad);
    st->pad = wo.pad;
    nnt_token_writer *w = NULL;
    if ((rc = nnt_token_writer_open(NULL, out, &wo, &w)) != 0) {
        nnt_sft_destroy(s);
        return fail_lib("nnt_token_writer_open", rc);
    }
    unpair_chunk *chunk = calloc(1, sizeof *chunk);   /* (the inputs make one dataset) */
    if (!chunk) {
        fprintf(stderr, "%s: out of memory\n", prog);
        rc = 1;
    }
    for (int i = 0; rc == 0 && i < ninputs; i++)
        rc = one_file(inputs[i], s, w, o, chunk, st);
    if (chunk) {
        int flushed = unpair_flush(chunk, rc ? NULL : w, o->seq, st);   /* (frees them) */
        rc = rc ? rc : flushed;
    }
    free(chunk);
    nnt_sft_destroy(s);
    int64_t n = 0;
    nnt_token_writer_count(w, &n);
    if (rc) {
        nnt_token_writer_destroy(w);
        return rc;
    }
    if (st->examples == 0) {
        nnt_token_writer_destroy(w);
        fprintf(stderr, "%s: no records in the input\n", prog);
        return 1;
    }
    if (st->empty == st->examples) {
        nnt_token_writer_destroy(w);
        fprintf(stderr, "%s: no example keeps a token that counts in the loss once cut to %lld "
                "tokens (the answers lie beyond them): give a larger --seq\n", prog,
                (long long)o->seq);
        return 1;
    }
    if ((rc = nnt_token_writer_close(w)) != 0)
        return fail_lib("nnt_token_writer_close", rc);
    if (st->empty > 0)
        fprintf(stderr, "%s: warning: %lld of the %lld examples keep no token that counts in "
                "the loss once cut to %lld tokens (their answers lie beyond them): a larger "
                "--seq keeps them\n", prog, (long long)st->empty, (long long)st->examples,
                (long long)o->seq);
    st->rows = (n + o->seq - 1) / o->seq;   /* close filled the last one */
    return 0;
}
