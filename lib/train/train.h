/* SPDX-License-Identifier: MIT */
/* The training loop (internal): the shuffled order of the trainer's sequences, the loss
 * curve's SVG. */
#ifndef NNT_TRAIN_TRAIN_H
#define NNT_TRAIN_TRAIN_H

#include <stdint.h>

/* The row read i-th (i = 0, 1, ...) of training data cut into nrows sequences (rows): epoch
 * e = i / nrows reads every row once, in the order of a pseudorandom permutation of
 * [0, nrows) given by seed and e, a new one each epoch. Stateless: the position in the
 * stream of rows is all a resumed run needs. nrows < 2000000000000000000. */
uint64_t nnt_shuffled_row(uint64_t seed, uint64_t nrows, uint64_t i);

/* One point of a loss curve. */
typedef struct nnt_train_point {
    int64_t step;
    double loss;
} nnt_train_point;

/* Write an SVG line chart of loss against step (axes, ticks, labels, the polyline) to path
 * through a temporary file and rename; val (nval points, may be 0): validation losses, drawn
 * as a second line with markers. Returns 0, or -1 with errno set. */
int nnt_train_svg_write(const char *path, const nnt_train_point *points, int64_t n,
                        const nnt_train_point *val, int64_t nval, const char *title);

/* A step's model FLOP utilisation: flops_per_s / peak; NaN without a peak (peak <= 0), and
 * from the step on whose rate exceeds a measured peak (measured != 0; *peak_low is set to 1
 * then and read by later calls: such a peak was measured low, e.g. on a busy machine, and
 * supports no MFU). A peak given by the user is taken as is. */
double nnt_train_mfu(double flops_per_s, double peak, int measured, int *peak_low);

/* The rate of the fastest `window` rounds in a row among n (each of `flops` FLOPs, taking
 * seconds[i]): window * flops over their summed time; 0 when n < window or window < 1. */
double nnt_train_sustained_rate(const double *seconds, int n, int window, double flops);

#endif
