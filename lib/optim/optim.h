/* SPDX-License-Identifier: MIT */
/* The optimizer (internal): what lib/optim/optim.c (updates) and lib/optim/state.c (training
 * state files) share. The optimizer is written with the public tensor operations only
 * (nnt_tensor_adam_step, nnt_tensor_sgd_step, nnt_tensors_sumsq, nnt_tensor_fill, ...).
 *
 * Every parameter has a value and a gradient (borrowed from the caller or a layer) and the
 * optimizer's own state tensors, created with the value's shape and tiling when the
 * parameter is added (storage is allocated by the runtime on first write):
 *   AdamW, Adam            first and second moments m, v
 *   SGD, momentum > 0      the momentum buffer (in m; v is NULL)
 *   SGD, momentum == 0     none
 * They are written for the first time at the parameter's first update (Adam: zero-filled
 * first; SGD: the kernel writes the buffer without reading it at step 1) or by a load.
 */
#ifndef NNT_OPTIM_OPTIM_H
#define NNT_OPTIM_OPTIM_H

#include "../internal.h"

#define NNT_OPTIM_MAGIC 0x6e6e746fu   /* "nnto" */

/* Longest parameter name in bytes: the longest state tensor name, prefix "sgd_momentum."
 * included, must fit in a safetensors name (lib/io: NNT_IO_MAXNAME = 1024 bytes). */
#define NNT_OPTIM_MAXNAME 1000

#define NNT_OPTIM_NKINDS 3            /* nnt_optim_kind values 0 .. NNT_OPTIM_NKINDS - 1        */

typedef struct nnt_optim_param {
    char *name;                  /* unique within the optimizer                              */
    nnt_tensor *value, *grad;    /* borrowed; same shape and tiling                           */
    nnt_tensor *state[2];        /* owned: m, v (Adam) / momentum buffer, NULL (SGD) / none   */
    int decay;                   /* weight_decay applies                                      */
    int state_written;           /* the state tensors hold values (stepped once, or loaded)   */
} nnt_optim_param;

struct nnt_optim {
    unsigned magic;
    nnt_ctx *ctx;
    nnt_optim_options opts;
    int nparams, cap;
    nnt_optim_param *params;     /* in the order they were added                              */
    int64_t step;                /* updates done (or restored by a load)                      */
    double last_lr, last_grad_norm;
    int nlayers;
    nnt_layer **layers;          /* the trees added by nnt_optim_add_layer (borrowed)         */
    struct nnt_optim_inbwd *inbwd; /* an update during a backward in progress (backward.c)   */
    int has_model;               /* the parameters are exactly those of one model (added by
                                    nnt_optim_add_layer alone): its configuration below is
                                    recorded in training-state files                          */
    nnt_model_config model;
};

/* 0 if opt is a live optimizer whose context is alive, else a recorded failure naming fn
 * (NNT_E_INVAL for NULL or a dead handle, NNT_E_STATE for a destroyed context). */
int nnt_optim_check(const nnt_optim *opt, const char *fn);
/* Number of state tensors per parameter for these options (0, 1 or 2). */
int nnt_optim_nstate(const nnt_optim_options *opts);
/* Name of state tensor i of a parameter in a training-state file: "adam_m", "adam_v",
 * "sgd_momentum"; and of the optimizer kind: "adamw", "adam", "sgd". */
const char *nnt_optim_state_prefix(const nnt_optim_options *opts, int i);
const char *nnt_optim_kind_name(nnt_optim_kind kind);
/* The names nnt-train and the training record give them: "constant", "cosine", "linear",
 * "wsd"; "linear", "cosine", "1-sqrt". */
const char *nnt_schedule_name(nnt_schedule s);
const char *nnt_decay_shape_name(nnt_decay_shape d);
/* The schedule's learning rate at update number step >= 1 (no checks). */
double nnt_optim_schedule(const nnt_optim_options *opts, int64_t step);
/* Fill the Adam moments of p with zeros if they hold nothing yet (SGD: nothing to do). */
int nnt_optim_zero_moments(const nnt_optim *opt, nnt_optim_param *p);
/* Submit the update of p at update number step with this lr and gradient scale. */
int nnt_optim_update_param(const nnt_optim *opt, const nnt_optim_param *p, int64_t step,
                           double lr, double grad_scale);
/* nnt_fail for parameter p: "fn: parameter 'name': " and the message rc came with. */
int nnt_optim_fail_param(const nnt_optim *opt, const char *fn, const nnt_optim_param *p,
                         int rc);

/* lib/optim/backward.c: updates during the backward (nnt_optim_update_in_backward). The
 * step of an optimizer that is armed completes here, from nnt_optim_step; release: from
 * nnt_optim_destroy (disarms, drops what an unfinished step holds). */
int nnt_optim_inbwd_step(nnt_optim *opt);
/* 1 if nnt_optim_update_in_backward would arm opt (no clipping, a layer added, nothing
 * armed in its context), else 0; records no error. */
int nnt_optim_can_update_in_backward(const nnt_optim *opt);
void nnt_optim_inbwd_release(nnt_optim *opt);

#endif
