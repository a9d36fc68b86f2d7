/* SPDX-License-Identifier: MIT */
/* The safetensors reader's state, shared by its two files (internal to lib/io, hidden):
 * safetensors.c parses the header into it, safetensors_tensor.c reads tensors from it (and its
 * writer keeps the same key/value pairs). */
#ifndef NNT_SAFETENSORS_IMPL_H
#define NNT_SAFETENSORS_IMPL_H

#include "io.h"

#include <stddef.h>
#include <stdint.h>

typedef struct {
    char *key, *value;
    size_t pos;                    /* reader: file offset of the key, for messages           */
} kv;

struct nnt_st_reader {
    int fd;                        /* -1: memory                                            */
    const unsigned char *mem;
    uint64_t size;                 /* file size                                             */
    char *path;                    /* for messages                                          */
    size_t n;
    nnt_st_entry *entries;         /* by data offset                                        */
    const nnt_st_entry **by_name;  /* sorted by name                                        */
    size_t nmeta;
    kv *meta;                      /* sorted by key                                         */
};

/* A name for messages: quoted, cut at 200 bytes, control characters shown as '?' so that a
 * hostile name cannot break the one-line message. */
const char *nnt_st_qname(const char *name, char *buf, size_t n);

#endif
