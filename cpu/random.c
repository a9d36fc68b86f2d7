/* Deterministic, tiling-invariant random fill: each element's value is a function of
 * (seed, global linear index) only (SplitMix64 finaliser, then uniform or Box-Muller). */
#include "nnt_cpu.h"

#include <math.h>

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

static uint64_t mix64(uint64_t seed, uint64_t idx)
{
    uint64_t z = seed + (idx + 1) * 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static float random_value(uint64_t seed, uint64_t idx, int dist, double a, double b)
{
    uint64_t z = mix64(seed, idx);
    double u1 = ((double)(z >> 40) + 0.5) * 0x1p-24;               /* (0, 1) */
    if (dist == 0)
        return (float)(a + (b - a) * u1);
    double u2 = ((double)((z >> 8) & 0xFFFFFF) + 0.5) * 0x1p-24;   /* (0, 1) */
    return (float)(a + b * sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2));
}

void nnt_cpu_fill_random_f32(int ndim, const int64_t *global_shape, const int64_t *tile_origin,
                             const int64_t *tile_shape, uint64_t seed, int dist, float a,
                             float b, float *out)
{
    int64_t idx[8] = {0};   /* tile-local multi-index of the current row */
    int64_t inner = tile_shape[ndim - 1];
    int64_t rows = 1;
    for (int d = 0; d < ndim - 1; d++)
        rows *= tile_shape[d];

    for (int64_t r = 0; r < rows; r++) {
        uint64_t base = 0;   /* global linear index of the row's first element */
        for (int d = 0; d < ndim; d++)
            base = base * (uint64_t)global_shape[d] + (uint64_t)(tile_origin[d] + idx[d]);
        for (int64_t j = 0; j < inner; j++)
            out[r * inner + j] = random_value(seed, base + (uint64_t)j, dist, a, b);
        for (int d = ndim - 2; d >= 0; d--) {   /* advance the row multi-index */
            if (++idx[d] < tile_shape[d])
                break;
            idx[d] = 0;
        }
    }
}
