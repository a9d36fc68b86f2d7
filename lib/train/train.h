/* The training loop (internal): the shuffled order of the trainer's sequences. */
#ifndef NNT_TRAIN_TRAIN_H
#define NNT_TRAIN_TRAIN_H

#include <stdint.h>

/* The row read i-th (i = 0, 1, ...) of training data cut into nrows sequences (rows): epoch
 * e = i / nrows reads every row once, in the order of a pseudorandom permutation of
 * [0, nrows) given by seed and e, a new one each epoch. Stateless: the position in the
 * stream of rows is all a resumed run needs. nrows < 2000000000000000000. */
uint64_t nnt_shuffled_row(uint64_t seed, uint64_t nrows, uint64_t i);

#endif
