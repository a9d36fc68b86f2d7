/* SPDX-License-Identifier: MIT */
/* libFuzzer harness for the safetensors reader (nnt_st_open_mem) and the JSON skipper.
 * Not part of `make check`. Build and run from the repository root:
 *
 *   clang -std=c99 -D_POSIX_C_SOURCE=200809L -g -O1 -fsanitize=fuzzer,address,undefined \
 *     -fno-sanitize-recover=undefined -Iinclude -Ilib/io tests/fuzz_safetensors.c \
 *     lib/io/safetensors.c lib/io/safetensors_tensor.c lib/io/file.c lib/io/json.c lib/io/text.c \
 *     -o fuzz_safetensors
 *   mkdir -p fuzz-corpus && cp SEED_FILES fuzz-corpus/    # e.g. files written by the tests
 *   printf '"{"\n"}"\n"["\n"]"\n":"\n","\n"\\"dtype\\""\n"\\"shape\\""\n"\\"data_offsets\\""\n'\
 *     '"\\"__metadata__\\""\n"\\"F32\\""\n"\\"BF16\\""\n"\\"I64\\""\n"\\\\u"\n' > fuzz.dict
 *   ./fuzz_safetensors -max_total_time=180 -max_len=4096 -dict=fuzz.dict fuzz-corpus
 *
 * (Debian: apt-get install clang libclang-rt-14-dev for the fuzzer runtime.)
 * Every input must either open, and then every tensor reads in every supported conversion
 * within the buffer, or fail with NNT_E_FORMAT / NNT_E_UNSUPPORTED and a message. */
#include "io.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[NNT_IO_ERRLEN];
    nnt_st_reader *r;
    err[0] = 0;
    int rc = nnt_st_open_mem(data, size, &r, err, sizeof err);
    if (rc != 0) {
        if ((rc != NNT_E_FORMAT && rc != NNT_E_UNSUPPORTED) || err[0] == 0 || r != NULL)
            abort();
    } else {
        for (size_t i = 0; i < nnt_st_count(r); i++) {
            const nnt_st_entry *e = nnt_st_entry_at(r, i);
            if (!e || nnt_st_find(r, e->name) != e)
                abort();
            if (e->offset > size || e->nbytes > size - e->offset)
                abort();
            if (i && e->offset < nnt_st_entry_at(r, i - 1)->offset)
                abort();
            /* numel <= nbytes (every dtype has >= 1 byte), so 8 * numel + 8 is bounded */
            void *buf = malloc((size_t)e->numel * 8 + 8);
            if (!buf)
                abort();
            static const nnt_io_dtype wants[] = {NNT_IO_F32, NNT_IO_I32, NNT_IO_I64};
            if (nnt_st_read(r, e, e->dtype, 0, e->numel, buf, err, sizeof err) != 0)
                abort();
            for (int k = 0; k < 3; k++) {
                int rr = nnt_st_read(r, e, wants[k], 0, e->numel, buf, err, sizeof err);
                if (rr != 0 && rr != NNT_E_UNSUPPORTED && rr != NNT_E_FORMAT)
                    abort();
            }
            if (e->numel > 1 &&
                nnt_st_read(r, e, e->dtype, e->numel / 2, e->numel - e->numel / 2, buf, err,
                            sizeof err) != 0)
                abort();
            free(buf);
        }
        for (size_t i = 0; i < nnt_st_metadata_count(r); i++) {
            const char *k, *v;
            if (nnt_st_metadata_at(r, i, &k, &v) != 0 || nnt_st_metadata_get(r, k) != v)
                abort();
        }
        nnt_st_close(r);
    }
    /* the generic skipper over the same bytes */
    nnt_json j;
    nnt_json_init(&j, (const char *)data, size, 0, "fuzz", err, sizeof err);
    rc = nnt_json_skip(&j, NNT_JSON_MAXDEPTH, "(fuzz)");
    if (rc == 0)
        rc = nnt_json_end(&j);
    if (rc != 0 && rc != NNT_E_FORMAT)
        abort();
    return 0;
}
