/* SPDX-License-Identifier: MIT */
/* The main memory StarPU counts: the machine's, also where hwloc counts less.
 *
 * StarPU sizes main RAM as hwloc does, from the NUMA nodes' memory, and once the tiles it
 * allocates there pass that size it waits for memory to free, forever. Some virtual machines
 * add memory after boot that the kernel counts (MemTotal) but no NUMA node does: on a lent
 * H200 machine, node 0 had 4.4 GiB and MemTotal 126 GiB, so StarPU treated it as a 4.4 GiB
 * machine and nnt refused a GPT-2 124M run. Where hwloc counts less than the kernel (or than
 * NNT_HOST_RAM_MIB, when set), StarPU starts on hwloc's own topology of this machine,
 * exported to an XML file with the missing memory added to the first NUMA node; lib/ctx.c
 * points HWLOC_XMLFILE at it (HWLOC_THISSYSTEM=1 keeps thread binding) around starpu_init,
 * then puts both variables back and removes the file. */
#include "internal.h"

#include <errno.h>
#include <hwloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MIB (1024.0 * 1024.0)

/* The NUMA nodes' memory as Linux lists it in sysfs (what hwloc reads), 0 when not listed:
 * a cheap test before loading a whole topology. */
static int64_t sysfs_numa_bytes(void)
{
    int64_t total = 0;
    for (int node = 0; node < 4096; node++) {
        char path[64], line[256];
        snprintf(path, sizeof path, "/sys/devices/system/node/node%d/meminfo", node);
        FILE *f = fopen(path, "r");
        if (!f) {
            if (node > 64)
                break;
            continue;   /* node numbers may have gaps */
        }
        long long kb;
        while (fgets(line, sizeof line, f))
            if (sscanf(line, "Node %*d MemTotal: %lld kB", &kb) == 1) {
                total += (int64_t)kb * 1024;
                break;
            }
        fclose(f);
    }
    return total;
}

#if HWLOC_API_VERSION >= 0x00020000
/* This machine's topology with main memory raised to want bytes, written to path: 1 when
 * written, 0 when hwloc counts that much already, -1 when it could not be written. */
static int export_topology(int64_t want, const char *source, char *path, size_t len)
{
    hwloc_topology_t topo;
    if (hwloc_topology_init(&topo) != 0)
        return -1;
    hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    int rc = -1;
    if (hwloc_topology_load(topo) == 0) {
        int64_t counted = (int64_t)hwloc_get_root_obj(topo)->total_memory;
        hwloc_obj_t numa = hwloc_get_obj_by_type(topo, HWLOC_OBJ_NUMANODE, 0);
        if (!numa || counted >= want) {
            rc = 0;   /* nothing to raise */
        } else {
            numa->attr->numanode.local_memory += (hwloc_uint64_t)(want - counted);
            const char *tmp = getenv("TMPDIR");
            snprintf(path, len, "%s/nnt-topology-XXXXXX", tmp && *tmp ? tmp : "/tmp");
            int fd = mkstemp(path);
            if (fd >= 0) {
                close(fd);
                if (hwloc_topology_export_xml(topo, path, 0) == 0)
                    rc = 1;
                else
                    unlink(path);
            }
        }
        if (rc == 1)
            nnt_log(NNT_LOG_INFO, "main memory: hwloc counts %.0f MiB in its NUMA nodes, %s "
                    "%.0f MiB: StarPU is given %.0f MiB", counted / MIB, source, want / MIB,
                    want / MIB);
    }
    hwloc_topology_destroy(topo);
    return rc;
}
#endif

/* NNT_HOST_RAM_MIB in bytes: 0 when unset, -1 when not a number of MiB. */
static int64_t ram_from_env(const char *env)
{
    if (!env || !*env)
        return 0;
    char *end = NULL;
    errno = 0;
    long long mib = strtoll(env, &end, 10);
    if (errno || *end || mib <= 0 || mib > (1LL << 40))
        return -1;
    return (int64_t)mib * 1024 * 1024;
}

/* The kernel's MemTotal in bytes, 0 when unknown. */
static int64_t kernel_ram(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? (int64_t)pages * page : 0;
}

int64_t nnt_host_ram_bytes(void)
{
    int64_t env = ram_from_env(getenv("NNT_HOST_RAM_MIB"));
    return env > 0 ? env : kernel_ram();
}

int64_t nnt_host_available_bytes(void)
{
    int64_t avail = 0;
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    long long kib;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %lld kB", &kib) == 1) {
            avail = (int64_t)kib * 1024;
            break;
        }
    if (f)
        fclose(f);
    if (avail <= 0) {
        long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
        avail = pages > 0 && page > 0 ? (int64_t)pages * page : 0;
    }
    int64_t ram = nnt_host_ram_bytes();
    return ram > 0 && (avail <= 0 || avail > ram) ? ram : avail;
}

int nnt_topology_file(char *path, size_t len)
{
    path[0] = 0;
    const char *env = getenv("NNT_HOST_RAM_MIB");
    int64_t want = ram_from_env(env);
    if (want < 0)
        return nnt_fail(NULL, NNT_E_INVAL, "nnt_ctx_create: NNT_HOST_RAM_MIB=\"%s\" is not a "
                        "number of MiB", env);
    if (want == 0) {
        int64_t listed = sysfs_numa_bytes();
        want = kernel_ram();
        /* hwloc's figure differs from the kernel's by the memory it reserves: 10 % is slack */
        if (listed == 0 || listed >= want - want / 10)
            return NNT_OK;
    }
    if (want == 0 || getenv("HWLOC_XMLFILE"))
        return NNT_OK;
#if HWLOC_API_VERSION >= 0x00020000
    int rc = export_topology(want, env && *env ? "NNT_HOST_RAM_MIB says" : "the kernel", path,
                             len);
    if (rc <= 0)
        path[0] = 0;
    if (rc < 0)
        nnt_log(NNT_LOG_WARN, "hwloc counts less main memory than the kernel, and its topology "
                "could not be written for StarPU: StarPU keeps hwloc's figure");
#endif
    return NNT_OK;
}
