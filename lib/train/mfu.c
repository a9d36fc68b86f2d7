/* SPDX-License-Identifier: MIT */
/* A step's model FLOP utilisation, the rule that a measured peak a step exceeds supports
 * none, and the sustained rate of a peak's rounds (lib/train/train.h). */
#include "train.h"

#include <math.h>

double nnt_train_mfu(double flops_per_s, double peak, int measured, int *peak_low)
{
    if (!(peak > 0) || (measured && *peak_low))
        return NAN;
    if (measured && flops_per_s > peak) {
        *peak_low = 1;
        return NAN;
    }
    return flops_per_s / peak;
}

double nnt_train_sustained_rate(const double *seconds, int n, int window, double flops)
{
    double best = 0;
    for (int first = 0; window >= 1 && first + window <= n; first++) {
        double s = 0;
        for (int i = first; i < first + window; i++)
            s += seconds[i];
        if (s > 0 && window * flops / s > best)
            best = window * flops / s;
    }
    return best;
}
