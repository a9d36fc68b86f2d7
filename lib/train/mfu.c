/* SPDX-License-Identifier: MIT */
/* A step's model FLOP utilisation, and the rule that a measured peak a step exceeds
 * supports none (lib/train/train.h). */
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
