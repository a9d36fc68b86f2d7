/* SPDX-License-Identifier: MIT */
/* Text generation's shared parts (internal, lib/models/sample.c): the argument checks and
 * the choice of the next token from the logits of the last position, for
 * nnt_model_generate and nnt_gpt_generate (lib/models/generate.c).
 *
 * The choice: temperature 0 is greedy (argmax, lowest id on ties; top_k and the PRNG
 * unused). Otherwise one uniform draw u in [0, 1) from the sequence's xoshiro256** (seeded
 * through splitmix64 with its seed, nnt_sampler_seed) per token, and the token is the first candidate whose running sum
 * of softmax((logit - max) / temperature) exceeds u times the sum; the candidates are the
 * top_k largest logits ordered by logit then id (top_k > 0 and < V), else every token by id;
 * with top_p in (0, 1) (set after nnt_sampler_init), only the first of those in (logit, id)
 * order whose weights sum to >= top_p times the candidates' total (at least one); with min_p
 * in (0, 1], only those whose weight is at least min_p times the largest weight (that of the
 * largest logit: 1), in the order they had; then with typical_p in (0, 1), epsilon_cutoff in
 * (0, 1) and eta_cutoff in (0, 1), the cuts of transformers' TypicalLogitsWarper,
 * EpsilonLogitsWarper and EtaLogitsWarper over the candidates left (their probabilities the
 * softmax over those), in that order, each keeping the order of those it keeps. Everything in
 * double on the host. Before all that (greedy too), with repetition_penalty other than 1, the
 * logits of the tokens in the sequence so far (prompt and generated) are divided by it where
 * positive and multiplied where negative, in float, and with no_repeat_ngram n > 0 the tokens
 * that would end an n-gram already in the sequence get -inf (are no candidates):
 * transformers' order (RepetitionPenaltyLogitsProcessor, NoRepeatNGramLogitsProcessor, then
 * the temperature, top_k, top_p, min_p, typical, epsilon and eta warpers). */
#ifndef NNT_MODELS_SAMPLE_H
#define NNT_MODELS_SAMPLE_H

#include "../internal.h"

/* A candidate token: its logit (then its weight) and id. */
typedef struct nnt_sample_cand {
    double logit;
    int32_t id;
} nnt_sample_cand;

/* The settings and scratch of the choice, for any number of sequences (each with its own
 * logits and generator state). */
typedef struct nnt_sampler {
    double temperature;       /* 0: greedy                                                  */
    int64_t top_k;            /* > 0: only the top_k largest logits; 0: all                 */
    double top_p;             /* in (0, 1): nucleus of the candidates; else all             */
    double min_p;             /* in (0, 1]: the candidates of weight >= min_p; 0: all        */
    double repetition_penalty;   /* > 0; 1: none (the init value)                          */
    double typical_p;         /* in (0, 1): the typical candidates; else all                 */
    double epsilon_cutoff;    /* in (0, 1): the candidates of probability >= it; else all    */
    double eta_cutoff;        /* in (0, 1): eta sampling's cut; else none                    */
    int64_t no_repeat_ngram;  /* > 0: tokens that would repeat an n-gram of the sequence are
                                 banned; 0: none                                             */
    int64_t V;
    nnt_sample_cand *cand;    // (V)
    nnt_sample_cand *order;   // (V) typical_p's order of the candidates (at its first use)
    float *penalized;         // (V) the logits with the penalty or bans (at their first use)
    int64_t *stamp;           // (V) the pick that last penalized each token
    int64_t picks;            /* picks that applied the penalty                              */
} nnt_sampler;

/* The sequence a pick continues: its prompt, then the tokens generated so far. */
typedef struct nnt_sample_seq {
    const int32_t *prompt;
    int64_t nprompt;
    const int32_t *gen;
    int64_t ngen;
} nnt_sample_seq;

/* The checks of a generate call over a vocabulary of V, errors NNT_E_INVAL naming fn: prompt
 * and out (when ngen > 0) not NULL, nprompt >= 1, ngen >= 0, every prompt id in [0, V),
 * temperature finite and >= 0, top_k >= 0 (greedy: pass 0 and 0). */
int nnt_generate_check(const nnt_ctx *ctx, const char *fn, int64_t V, const int32_t *prompt,
                       int64_t nprompt, int64_t ngen, double temperature, int64_t top_k,
                       const int32_t *out);

/* A sampler over V tokens (NNT_E_NOMEM naming fn), top_p 1, min_p 0, repetition_penalty 1,
 * typical_p 1, no cutoffs and no n-gram bans (set them after); free it with nnt_sampler_free,
 * also after a failure. */
int nnt_sampler_init(nnt_sampler *sm, const nnt_ctx *ctx, const char *fn, int64_t V,
                     double temperature, int64_t top_k);
void nnt_sampler_free(nnt_sampler *sm);

/* A sequence's generator state rng (xoshiro256**) seeded with seed. */
void nnt_sampler_seed(uint64_t rng[4], uint64_t seed);
/* The next token from logits (V) of the last position of sequence seq (NULL: no penalty
 * and no bans), with the sequence's generator rng (advanced when sampling); NNT_E_STATE
 * naming fn if a logit is not finite or the n-gram bans leave no token, NNT_E_NOMEM. */
int nnt_sampler_pick(nnt_sampler *sm, const nnt_ctx *ctx, const char *fn, const float *logits,
                     const nnt_sample_seq *seq, uint64_t rng[4], int32_t *token);

/* The steps of a pick, for tests: the logits with the repetition penalty and the n-gram
 * bans (-inf) for seq (logits itself when there are none; NULL out of memory); the
 * candidates of logits l (finite or -inf, not all -inf), *max the largest, left in
 * sm->cand[0..k), k returned (temperature > 0), *max then the largest of theirs. */
const float *nnt_sampler_penalize(nnt_sampler *sm, const float *logits,
                                  const nnt_sample_seq *seq);
int64_t nnt_sampler_candidates(nnt_sampler *sm, const float *l, double *max);

/* Token i of the sequence so far: the prompt, then what has been generated. */
static inline int32_t nnt_generate_token_at(const int32_t *prompt, int64_t nprompt,
                                            const int32_t *out, int64_t i)
{
    return i < nprompt ? prompt[i] : out[i - nprompt];
}

#endif
