/* SPDX-License-Identifier: MIT */
/* nnt-tokenize --jsonl (examples/tokenize_jsonl.c): prompt/answer records to a token file
 * with a loss mask, in rows of T. */
#ifndef NNT_TOKENIZE_JSONL_H
#define NNT_TOKENIZE_JSONL_H
#include <nnt.h>

typedef struct jsonl_opts {
    int64_t seq;                      /* T: the rows (nnt-train --seq)                    */
    int pack;                         /* 1: several whole examples a row; 0: one         */
    int cut;                          /* 1: cut an example longer than T; 0: refuse it   */
    nnt_chat_template chat_template;  /* NNT_CHAT_AUTO: tokenizer_config.json's          */
    const char *tokenizer_config;     /* NULL: the one beside tokenizer_json, if any     */
    const char *tokenizer_json;
    const char *chat_date;            /* Llama 3.1+'s "Today Date"; NULL: the template's */
    const char *program;              /* its messages' prefix; NULL: "nnt-tokenize"      */
    int all_tokens;                   /* 1: every token counts (nnt_sft_options)          */
    int assistant_only;               /* 1: a completion's assistant turns alone count   */
    int preference;                   /* 1: preference records (DPO): each record's chosen
                                         and rejected sequences in two rows, one a row      */
    int64_t num_labels;               /* >= 2: classification records {"text", "label"}:
                                         the text, then its label (below num_labels), the
                                         one target that counts; 0: none                   */
    const char *const *label_names;   /* classification records' labels may be these names
                                         (nlabel_names of them; NULL: indices only)        */
    int64_t nlabel_names;
    int problem;                      /* with num_labels: NNT_PROBLEM_DEFAULT, one label a
                                         record; NNT_PROBLEM_REGRESSION or _MULTI_LABEL:
                                         num_labels values a record, carried by its row
                                         (nnt_sft_encode_valued)                            */
    int unpaired;                     /* 1: unpaired preference records (KTO): one a row,
                                         its label (1 desirable, 0 undesirable) the row's
                                         value; or paired ones (all of the first's form),
                                         two rows each, as KTOTrainer unpairs them: per
                                         chunk of 1000 records, their chosen rows then
                                         their rejected ones (nnt_sft_encode_unpaired_rows) */
    int64_t pad_id;                   /* >= 0: the id rows are padded with (a classifier's
                                         --pad-id, which it pools by); -1: the tokenizer's
                                         (nnt_sft_pad_id: pad_token, else eos_token)        */
} jsonl_opts;

typedef struct jsonl_stats {
    int64_t examples, cut, rows, counted;   /* (preference: a pair two examples) */
    int64_t *label_counts;            /* num_labels: the examples of each label (malloc'd;
                                         on values: of each value above 0.5)               */
    int64_t empty;                    /* examples of which no token counts once cut to T */
    int32_t pad;                      /* the id rows are padded with (pad_id, else
                                         nnt_sft_pad_id)                                   */
    int64_t desirable;                /* unpaired records: the rows labelled true         */
    int64_t paired;                   /* unpaired: the paired records read as two rows    */
} jsonl_stats;

/* 0, or 1 after a message on stderr naming the file and line; the caller frees
 * st->label_counts either way. */
int tokenize_jsonl(const nnt_tokenizer *tok, const jsonl_opts *o, char **inputs, int ninputs,
                   const char *out, int bits, int64_t vocab, jsonl_stats *st);

#endif
