/* SPDX-License-Identifier: MIT */
/* Saves that cannot finish never cost the previous file, and leave nothing behind:
 *   - the temporary files of earlier saves into the same path that did not finish (a killed
 *     run) are removed by the next save there, and only those: files of the path's own
 *     temporary pattern that no live save holds; the removal is logged as a warning;
 *   - on a file system that is too small (a tmpfs this test mounts, 1 MiB, in a mount
 *     namespace of its own), a training-state save that does not fit fails before writing
 *     anything with NNT_E_IO naming the file, the bytes it needs and the bytes free; the
 *     previous checkpoint still loads with its values, and no temporary file is left;
 *   - a write that meets a full file system without a reservation (lib/io's writer
 *     directly) fails the same way, naming the bytes written.
 * Mounting needs root (CAP_SYS_ADMIN): without it the program exits 77 (skipped), saying why.
 * It calls lib/io's writer, so it links the library's objects. */
#define _GNU_SOURCE
#include "testutil.h"

#include "io/io.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

static char mnt[256];   /* the tmpfs (empty string: none) */
static char logged[8192];

static void capture(int level, const char *msg, void *user)
{
    (void)user;
    if (level <= NNT_LOG_WARN) {
        size_t n = strlen(logged);
        snprintf(logged + n, sizeof logged - n, "%s\n", msg);
    }
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    ck_assert_int_eq(fclose(f), 0);
}

static int exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* The names in dir that contain ".tmp" (temporary files), counted. */
static int temps_in(const char *dir)
{
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        n += strstr(e->d_name, ".tmp") != NULL;
    closedir(d);
    return n;
}

START_TEST(test_stale_temps)
{
    test_make_tmpdir("save_full");
    char dir[4096], p[4096 + 64], held_path[4096 + 64];
    snprintf(dir, sizeof dir, "%s", test_tmp_path(""));
    static const char *const kept[] = {
        "ck.safetensors.tmp-AbC12",     /* five characters: not mkstemp's */
        "ck.safetensors.tmp-AbC1234",   /* seven */
        "ck.safetensors.tmp-AbC12!",
        "ck.safetensors.tmp.AbC123",
        "other.safetensors.tmp-AbC123", /* another file's */
        "xck.safetensors.tmp-AbC123",
        NULL};
    for (const char *const *k = kept; *k; k++) {
        snprintf(p, sizeof p, "%s/%s", dir, *k);
        write_file(p, "not ours");
    }
    snprintf(p, sizeof p, "%s/ck.safetensors.tmp-Zz09aQ", dir);
    write_file(p, "left by a killed save");
    /* a save in progress elsewhere holds its temporary file locked: it must survive */
    snprintf(held_path, sizeof held_path, "%s/ck.safetensors.tmp-HeLd00", dir);
    write_file(held_path, "a live save");
    int held = open(held_path, O_RDWR);
    ck_assert_int_ge(held, 0);
    ck_assert_int_eq(flock(held, LOCK_EX | LOCK_NB), 0);
    /* a save into ck.safetensors through the library's writer */
    nnt_ctx *ctx = test_ctx();
    logged[0] = '\0';
    EXPECT_OK(nnt_log_set(capture, NULL));
    int64_t shape[1] = {5};
    nnt_tensor *w = NULL, *g = NULL;
    EXPECT_OK(nnt_tensor_create(ctx, NNT_FP32, 1, shape, NULL, &w));
    EXPECT_OK(nnt_tensor_create(ctx, NNT_FP32, 1, shape, NULL, &g));
    EXPECT_OK(nnt_tensor_fill(w, 0.5f));
    EXPECT_OK(nnt_tensor_fill(g, 0.0f));
    nnt_optim *opt = NULL;
    EXPECT_OK(nnt_optim_create(ctx, NULL, &opt));
    EXPECT_OK(nnt_optim_add_param(opt, "w", w, g, 1));
    snprintf(p, sizeof p, "%s/ck.safetensors", dir);
    nnt_train_state st = NNT_TRAIN_STATE_INIT;
    EXPECT_OK(nnt_train_state_save(opt, p, &st));
    EXPECT_OK(nnt_log_set(NULL, NULL));
    ck_assert(exists(p));
    snprintf(p, sizeof p, "%s/ck.safetensors.tmp-Zz09aQ", dir);
    ck_assert_msg(!exists(p), "the stale temporary file is still there");
    ck_assert_msg(strstr(logged, "ck.safetensors.tmp-Zz09aQ (21 bytes), the temporary file of "
                         "an earlier save") != NULL, "log: %s", logged);
    ck_assert_msg(exists(held_path) && !strstr(logged, "HeLd00"),
                  "a locked (live) temporary file was removed");
    for (const char *const *k = kept; *k; k++) {
        snprintf(p, sizeof p, "%s/%s", dir, *k);
        ck_assert_msg(exists(p), "%s was removed", *k);
    }
    close(held);
    nnt_optim_destroy(opt);
    nnt_tensor_destroy(w);
    nnt_tensor_destroy(g);
    EXPECT_OK(nnt_ctx_destroy(ctx));
    test_remove_tmpdir();
}
END_TEST

/* A training state of n floats, all value, saved to path (its status). */
static int save_state(nnt_ctx *ctx, const char *path, int64_t n, float value, nnt_optim **keep,
                      nnt_tensor **tensors)
{
    int64_t shape[1] = {n};
    EXPECT_OK(nnt_tensor_create(ctx, NNT_FP32, 1, shape, NULL, &tensors[0]));
    EXPECT_OK(nnt_tensor_create(ctx, NNT_FP32, 1, shape, NULL, &tensors[1]));
    EXPECT_OK(nnt_tensor_fill(tensors[0], value));
    EXPECT_OK(nnt_tensor_fill(tensors[1], 0.0f));
    EXPECT_OK(nnt_optim_create(ctx, NULL, keep));
    EXPECT_OK(nnt_optim_add_param(*keep, "w", tensors[0], tensors[1], 1));
    nnt_train_state st = NNT_TRAIN_STATE_INIT;
    return nnt_train_state_save(*keep, path, &st);
}

START_TEST(test_full_file_system)
{
    if (!mnt[0]) {
        printf("test_save_full: no tmpfs (see the first line): skipped\n");
        return;
    }
    nnt_ctx *ctx = test_ctx();
    char path[512];
    snprintf(path, sizeof path, "%s/checkpoint.safetensors", mnt);
    /* a state of 40,000 floats (160 KB before any update: no moments yet) fits; then the
     * file system is filled until half of one more file is free, and the next save, whose
     * temporary file must stand beside the previous checkpoint, cannot fit */
    enum { N = 40000 };
    nnt_optim *o1 = NULL, *o2 = NULL;
    nnt_tensor *t1[2], *t2[2];
    EXPECT_OK(save_state(ctx, path, N, 0.25f, &o1, t1));
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    /* fill the rest so that less than one more file is free */
    char filler[512];
    snprintf(filler, sizeof filler, "%s/filler", mnt);
    int fd = open(filler, O_CREAT | O_WRONLY, 0644);
    ck_assert_int_ge(fd, 0);
    int64_t fill = (int64_t)(1 << 20) - 2 * (int64_t)st.st_size + (int64_t)st.st_size / 2;
    ck_assert_int_eq(posix_fallocate(fd, 0, (off_t)fill), 0);
    close(fd);
    int rc = save_state(ctx, path, N, 0.75f, &o2, t2);
    ck_assert_int_eq(rc, NNT_E_IO);
    const char *msg = nnt_ctx_last_error(ctx);
    printf("test_save_full: %s\n", msg);
    char want[256];
    snprintf(want, sizeof want, "the new file needs %lld bytes", (long long)st.st_size);
    ck_assert_msg(strstr(msg, path) && strstr(msg, "the file system is full") &&
                  strstr(msg, want) && strstr(msg, "are free") && strstr(msg, "is unchanged"),
                  "message: %s", msg);
    ck_assert_int_eq(temps_in(mnt), 0);
    /* the previous checkpoint loads, with its values */
    nnt_train_state back = NNT_TRAIN_STATE_INIT;
    EXPECT_OK(nnt_train_state_load(o2, path, &back));
    nnt_train_state_clear(&back);
    int64_t n = 0;
    float *v = test_to_host(t2[0], &n);
    ck_assert_int_eq(n, N);
    ck_assert_msg(v[0] == 0.25f && v[N - 1] == 0.25f, "loaded %g, saved 0.25", v[0]);
    free(v);
    /* lib/io's writer without a reservation: the write itself meets the full disk */
    char err[1024];
    nnt_io_out *out = NULL;
    EXPECT_OK(nnt_io_out_begin(path, &out, err, sizeof err));
    static char block[1 << 16];
    rc = 0;
    for (int i = 0; i < 64 && rc == 0; i++)
        rc = nnt_io_out_write(out, block, sizeof block, err, sizeof err);
    if (rc == 0)
        rc = nnt_io_out_commit(out, err, sizeof err);
    else
        nnt_io_out_abort(out);
    ck_assert_int_eq(rc, NNT_E_IO);
    printf("test_save_full: %s\n", err);
    ck_assert_msg(strstr(err, "the file system is full (No space left on device) after") &&
                  strstr(err, "is unchanged"), "message: %s", err);
    ck_assert_int_eq(temps_in(mnt), 0);
    ck_assert_int_eq(stat(path, &st), 0);
    nnt_optim_destroy(o1);
    nnt_optim_destroy(o2);
    for (int i = 0; i < 2; i++) {
        nnt_tensor_destroy(t1[i]);
        nnt_tensor_destroy(t2[i]);
    }
    unlink(filler);
    EXPECT_OK(nnt_ctx_destroy(ctx));
}
END_TEST

/* A 1 MiB tmpfs in a mount namespace of this process (its forked tests inherit it; nothing
 * outside sees it or outlives the process). 0, or 77 after saying why not. */
static int mount_tmpfs(void)
{
    const char *why = NULL;
    snprintf(mnt, sizeof mnt, "/tmp/nnt-save-full-%ld", (long)getpid());
    if (mkdir(mnt, 0700) != 0)
        why = "mkdir";
    else if (unshare(CLONE_NEWNS) != 0)
        why = "unshare(CLONE_NEWNS)";
    else if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
        why = "mount --make-rprivate /";
    else if (mount("tmpfs", mnt, "tmpfs", 0, "size=1m") != 0)
        why = "mount -t tmpfs";
    if (!why)
        return 0;
    printf("test_save_full: cannot mount a tmpfs (%s: %s; needs root or CAP_SYS_ADMIN): the "
           "full-disk test is skipped\n", why, strerror(errno));
    rmdir(mnt);
    mnt[0] = '\0';
    return 77;
}

int main(void)
{
    int skip = mount_tmpfs();
    Suite *s = suite_create("save_full");
    TCase *tc = tcase_create("save_full");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_stale_temps);
    tcase_add_test(tc, test_full_file_system);
    suite_add_tcase(s, tc);
    int rc = run_suite(s);
    if (mnt[0]) {
        umount(mnt);
        rmdir(mnt);
    }
    return rc != 0 ? rc : skip;
}
