/* The main memory StarPU counts: the machine's, also where hwloc counts less.
 *
 * StarPU sizes main RAM as hwloc does, from the NUMA nodes' memory, and once the tiles it
 * allocates there pass that size it waits for memory to free, forever. Some virtual machines
 * add memory after boot that the kernel counts (MemTotal) but no NUMA node does: on a lent
 * H200 machine, node 0 had 4.4 GiB and MemTotal 126 GiB, so StarPU treated it as a 4.4 GiB
 * machine and nnt refused a GPT-2 124M run. Where hwloc counts less than the kernel (or than
 * NNT_HOST_RAM_MIB, when set), StarPU starts on hwloc's own topology of this machine,
 * exported to an XML file with the missing memory added to the first NUMA node
 * (HWLOC_XMLFILE; HWLOC_THISSYSTEM=1 keeps thread binding); the variables are put back and
 * the file removed once StarPU has started. */
#include "internal.h"

#include <errno.h>
#include <hwloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MIB (1024.0 * 1024.0)

/* The kernel's total memory, or NNT_HOST_RAM_MIB; 0 when unknown, -1 for a bad variable. */
static int64_t host_ram_bytes(void)
{
    const char *env = getenv("NNT_HOST_RAM_MIB");
    if (env && *env) {
        char *end = NULL;
        errno = 0;
        long long mib = strtoll(env, &end, 10);
        if (errno || *end || mib <= 0 || mib > (1LL << 40))
            return -1;
        return (int64_t)mib * 1024 * 1024;
    }
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? (int64_t)pages * page : 0;
}

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

static void save_var(const char *name, char **saved, int *had)
{
    const char *v = getenv(name);
    *had = v != NULL;
    *saved = v ? strdup(v) : NULL;
}

static void restore_var(const char *name, char **saved, int had)
{
    if (had && *saved)
        setenv(name, *saved, 1);
    else
        unsetenv(name);
    free(*saved);
    *saved = NULL;
}

#if HWLOC_API_VERSION >= 0x00020000
/* Writes this machine's topology with main memory raised to want bytes to fix->path. */
static int export_topology(nnt_topology_fix *fix, int64_t want)
{
    hwloc_topology_t topo;
    if (hwloc_topology_init(&topo) != 0)
        return NNT_E_RUNTIME;
    hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    int rc = NNT_E_RUNTIME;
    if (hwloc_topology_load(topo) == 0) {
        hwloc_obj_t root = hwloc_get_root_obj(topo);
        hwloc_obj_t numa = hwloc_get_obj_by_type(topo, HWLOC_OBJ_NUMANODE, 0);
        fix->hwloc_bytes = (int64_t)root->total_memory;
        if (!numa || fix->hwloc_bytes >= want) {
            rc = NNT_OK;   /* nothing to raise */
        } else {
            numa->attr->numanode.local_memory += (hwloc_uint64_t)(want - fix->hwloc_bytes);
            const char *tmp = getenv("TMPDIR");
            snprintf(fix->path, sizeof fix->path, "%s/nnt-topology-XXXXXX",
                     tmp && *tmp ? tmp : "/tmp");
            int fd = mkstemp(fix->path);
            if (fd >= 0) {
                close(fd);
                if (hwloc_topology_export_xml(topo, fix->path, 0) == 0)
                    rc = 1;
                else
                    unlink(fix->path);
            }
        }
    }
    hwloc_topology_destroy(topo);
    return rc;
}
#endif

int nnt_topology_fix_begin(nnt_topology_fix *fix)
{
    memset(fix, 0, sizeof *fix);
    int64_t want = host_ram_bytes();
    if (want < 0)
        return nnt_fail(NULL, NNT_E_INVAL, "nnt_ctx_create: NNT_HOST_RAM_MIB=\"%s\" is not a "
                        "number of MiB", getenv("NNT_HOST_RAM_MIB"));
    const char *env = getenv("NNT_HOST_RAM_MIB");
    int64_t listed = sysfs_numa_bytes();
    /* hwloc's figure differs from the kernel's by the memory it reserves: 10 % is slack */
    if (want == 0 || getenv("HWLOC_XMLFILE") ||
        (!(env && *env) && (listed == 0 || listed >= want - want / 10)))
        return NNT_OK;
#if HWLOC_API_VERSION >= 0x00020000
    int rc = export_topology(fix, want);
    if (rc < 0) {
        nnt_log(NNT_LOG_WARN, "hwloc counts less main memory than the kernel, and its topology "
                "could not be written for StarPU: StarPU keeps hwloc's figure");
        return NNT_OK;
    }
    if (rc == 0)
        return NNT_OK;
    fix->applied = 1;
    fix->host_bytes = want;
    save_var("HWLOC_XMLFILE", &fix->prev_xml, &fix->had_xml);
    save_var("HWLOC_THISSYSTEM", &fix->prev_this, &fix->had_this);
    setenv("HWLOC_XMLFILE", fix->path, 1);
    setenv("HWLOC_THISSYSTEM", "1", 1);
    nnt_log(NNT_LOG_INFO, "main memory: hwloc counts %.0f MiB in its NUMA nodes, %s %.0f MiB: "
            "StarPU is given %.0f MiB", fix->hwloc_bytes / MIB,
            env && *env ? "NNT_HOST_RAM_MIB says" : "the kernel", want / MIB, want / MIB);
#endif
    return NNT_OK;
}

void nnt_topology_fix_end(nnt_topology_fix *fix)
{
    if (!fix->applied)
        return;
    restore_var("HWLOC_XMLFILE", &fix->prev_xml, fix->had_xml);
    restore_var("HWLOC_THISSYSTEM", &fix->prev_this, fix->had_this);
    unlink(fix->path);
    fix->applied = 0;
}
