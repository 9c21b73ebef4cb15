/* main.c — h5logfs: option parsing, mount, the session loop, the ticker.
 *
 * Usage: h5logfs SRC MNT [-f] [-d] [-s] [-o tick=SECONDS,cache_size=SIZE,stats,...]
 * SIGINT/SIGTERM/SIGHUP end the loop and unmount cleanly (libfuse's
 * handlers); SIGUSR1 writes statistics to the log; a dead mount left by a
 * crashed daemon is cleared before mounting, a live h5logfs mount at MNT is
 * refused (not stacked on); READY=1 goes to systemd once mounted.
 * The ticker thread polls every live log-layout file's journal once per
 * tick and invalidates the kernel's entry for each file that gained a tick,
 * from outside any request handler (a new tick is a new inode: see fs.c
 * and docs/architecture.md, Snapshots). Between ticks it wakes when an
 * inotify watch sees a journal written (watch.h) or a skeleton build lands
 * (lfile.c), so a new tick shows within milliseconds where the file system
 * reports writes, and within a tick everywhere. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/eventfd.h>
#include <sys/mount.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <systemd/sd-daemon.h>
#include <poll.h>
#include <time.h>
#include <unistd.h>

#include "fs.h"
#include "ticks.h"
#include "watch.h"
#include "h5log_common.h"
#include "lfile.h"

typedef struct opts {
    char *tick;
    char *cache_size;
    int stats;
    char *source;
    int nonopt;
    int has_fsname, has_subtype, allow, defperm;
} opts_t;

enum { K_FSNAME = 100, K_SUBTYPE, K_ALLOW, K_DEFPERM, K_TICK };

#define OPT(t, p, v)                                                                                                   \
    {                                                                                                                  \
        t, offsetof(opts_t, p), v                                                                                      \
    }
static const struct fuse_opt spec[] = {
    FUSE_OPT_KEY("tick=", K_TICK), /* parse_tick */
    OPT("cache_size=%s", cache_size, 0),
    OPT("stats", stats, 1),
    FUSE_OPT_KEY("fsname=", K_FSNAME),
    FUSE_OPT_KEY("subtype=", K_SUBTYPE),
    FUSE_OPT_KEY("allow_other", K_ALLOW),
    FUSE_OPT_KEY("allow_root", K_ALLOW),
    FUSE_OPT_KEY("default_permissions", K_DEFPERM),
    FUSE_OPT_END,
};

static void usage(const char *prog)
{
    printf("usage: %s SRC MNT [options]\n"
           "Mount a read-only view of directory SRC at MNT in which log-layout HDF5 files\n"
           "appear as canonical HDF5 files, at their newest tick.\n\n"
           "h5logfs options:\n"
           "    -o tick=SECONDS        how often live journals are polled (default 0.1)\n"
           "    -o cache_size=SIZE     chunk cache limit, e.g. 512M, 2G (default 1/8 of RAM)\n"
           "    -o stats               print statistics at unmount\n\n"
           "Statistics while mounted: cat MNT/.h5logfs-stats, or kill -USR1 the daemon (to its log).\n\n",
           prog);
}

/* Keep the second non-option (MNT) for fuse_parse_cmdline; take SRC. */
static int opt_proc(void *data, const char *arg, int key, struct fuse_args *outargs)
{
    (void)outargs;
    opts_t *o = data;
    switch (key) { /* noted, and passed on to libfuse */
    case K_FSNAME:
        o->has_fsname = 1;
        return 1;
    case K_SUBTYPE:
        o->has_subtype = 1;
        return 1;
    case K_ALLOW:
        o->allow = 1;
        return 1;
    case K_DEFPERM:
        o->defperm = 1;
        return 1;
    case K_TICK: /* the last one given counts */
        free(o->tick);
        o->tick = strdup(arg + strlen("tick="));
        return o->tick ? 0 : -1;
    default:
        break;
    }
    if (key == FUSE_OPT_KEY_NONOPT && o->nonopt++ == 0) {
        o->source = strdup(arg);
        return 0;
    }
    return 1;
}

static int parse_size(const char *s, size_t *out)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || v < 0) return -1;
    switch (*end) {
    case 'k':
    case 'K':
        v *= 1024;
        end++;
        break;
    case 'm':
    case 'M':
        v *= 1024.0 * 1024;
        end++;
        break;
    case 'g':
    case 'G':
        v *= 1024.0 * 1024 * 1024;
        end++;
        break;
    case 't':
    case 'T':
        v *= 1024.0 * 1024 * 1024 * 1024;
        end++;
        break;
    default:
        break;
    }
    if (*end == 'B' || *end == 'b') end++;
    if (*end) return -1;
    *out = (size_t)v;
    return 0;
}

/* tick=SECONDS: a number more than 0 and at most an hour, all of the
 * value (fuse_opt's "%lf" took "1abc" as 1, and refused "abc" without
 * saying what is allowed). Returns 0, or -1 with the message printed. */
static int parse_tick(const char *s, double *out)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end || isnan(v)) {
        fprintf(stderr, "h5logfs: tick=%s: not a number of seconds (must be more than 0 and at most 3600)\n", s);
        return -1;
    }
    if (!(v > 0 && v <= 3600)) {
        fprintf(stderr, "h5logfs: tick=%s: must be more than 0 and at most 3600 seconds\n", s);
        return -1;
    }
    *out = v;
    return 0;
}

static struct fuse_session *g_se;
/* The ticker waits in poll(), not in nanosleep: at unmount it must end at
 * once, not after up to a whole tick (an hour at tick=3600), and it wakes
 * early for journal writes and landed builds. g_wake (an eventfd) is
 * written to stop it (g_stop set first) and by the builder's kick. */
static atomic_int g_stop;
static int g_wake = -1;

static void wake_ticker(void)
{
    uint64_t one = 1;
    if (g_wake >= 0 && write(g_wake, &one, sizeof one) < 0) {} /* EAGAIN: already pending */
}
static volatile sig_atomic_t g_dump;

static void on_usr1(int sig)
{
    (void)sig;
    g_dump = 1;
}

static void dump_stats(void)
{
    char *t = hfs_lfile_stats_text();
    if (t) {
        hfs_log("statistics");
        char *save = NULL;
        for (char *line = strtok_r(t, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) hfs_log("%s", line);
    }
    free(t);
}
static double g_tick;
static char *g_mnt;

static void on_new_tick(void *ctx, uint64_t parent, const char *name)
{
    (void)ctx;
    fuse_lowlevel_notify_inval_entry(g_se, (fuse_ino_t)parent, name, strlen(name));
}

/* Raise the mount's readahead window: the kernel sends requests of at most
 * read_ahead_kb, 128 KiB by default; sequential readers want 1 MiB. */
static void raise_readahead(void)
{
    struct stat st;
    if (stat(g_mnt, &st) != 0) return;
    char p[128];
    snprintf(p, sizeof p, "/sys/class/bdi/%u:%u/read_ahead_kb", major(st.st_dev), minor(st.st_dev));
    FILE *f = fopen(p, "w");
    if (f) {
        fprintf(f, "1024\n");
        fclose(f);
    }
}

/* A daemon that crashed leaves its mount point dead ("Transport endpoint is
 * not connected"); a restart (systemd Restart=on-failure) must clean it up
 * instead of failing. Lazy unmount as root, else through fusermount3. */
static void clear_stale_mount(const char *mnt)
{
    /* statfs, not stat: the root's attributes may still be cached */
    struct statvfs sv;
    if (statvfs(mnt, &sv) == 0 || errno != ENOTCONN) return;
    hfs_log("%s: stale mount (transport endpoint not connected): unmounting it", mnt);
    if (umount2(mnt, MNT_DETACH) == 0) return;
    pid_t pid = fork();
    if (pid == 0) {
        execlp("fusermount3", "fusermount3", "-uz", mnt, (char *)NULL);
        _exit(127);
    }
    if (pid > 0) waitpid(pid, NULL, 0);
}

/* mountinfo writes space, tab, newline and backslash in a field as \ooo. */
static void unescape_field(char *s)
{
    char *o = s;
    for (char *p = s; *p; p++) {
        if (p[0] == '\\' && p[1] >= '0' && p[1] <= '3' && p[2] >= '0' && p[2] <= '7' && p[3] >= '0' && p[3] <= '7') {
            *o++ = (char)((p[1] - '0') * 64 + (p[2] - '0') * 8 + (p[3] - '0'));
            p += 3;
        } else {
            *o++ = *p;
        }
    }
    *o = 0;
}

/* The kernel stacks a second mount on a mount point without a word: a
 * second h5logfs on a live one hides it, so every reader goes through the
 * new daemon and the first is unreachable until both are unmounted (an
 * easy slip: mount twice from fstab and by hand, or a restart script that
 * does not check). Refuse when the topmost mount at mnt is an h5logfs
 * that answers; a dead one (ENOTCONN) was cleared by clear_stale_mount.
 * The topmost mount is the mountinfo line for this path whose device is
 * that of mnt. Returns 0, or -1 with the message printed. */
static int refuse_live_mount(const char *mnt)
{
    struct stat st;
    struct statvfs sv;
    char *path = realpath(mnt, NULL);
    if (!path || stat(path, &st) != 0) { /* no such directory: the mount says why */
        free(path);
        return 0;
    }
    FILE *f = fopen("/proc/self/mountinfo", "r");
    if (!f) {
        free(path);
        return 0;
    }
    char *line = NULL, *src = NULL;
    size_t cap = 0;
    int ours = 0;
    while (getline(&line, &cap, f) > 0) {
        /* ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER */
        char *save = NULL, *fld[5] = {0};
        unsigned maj, min;
        int n = 0;
        for (char *t = strtok_r(line, " \n", &save); t && n < 5; t = strtok_r(NULL, " \n", &save)) fld[n++] = t;
        if (n < 5 || sscanf(fld[2], "%u:%u", &maj, &min) != 2 || makedev(maj, min) != st.st_dev) continue;
        unescape_field(fld[4]);
        if (strcmp(fld[4], path) != 0) continue;
        char *t = strtok_r(NULL, " \n", &save);
        while (t && strcmp(t, "-") != 0) t = strtok_r(NULL, " \n", &save);
        char *type = t ? strtok_r(NULL, " \n", &save) : NULL;
        char *source = type ? strtok_r(NULL, " \n", &save) : NULL;
        if (!source) continue;
        unescape_field(source);
        /* fuse.h5logfs; plain fuse with fsname h5logfs#SRC where the kernel
         * lacks subtypes (libfuse's fallback) */
        ours = strcmp(type, "fuse.h5logfs") == 0 || strcmp(type, "fuseblk.h5logfs") == 0 ||
               (strcmp(type, "fuse") == 0 && strncmp(source, "h5logfs#", 8) == 0);
        if (strncmp(source, "h5logfs#", 8) == 0) source += 8;
        free(src);
        src = strdup(source);
    }
    free(line);
    fclose(f);
    free(path);
    int refuse = ours && !(statvfs(mnt, &sv) != 0 && errno == ENOTCONN);
    if (refuse)
        fprintf(stderr, "h5logfs: %s is already an h5logfs mount (of %s); unmount it first\n", mnt, src ? src : "?");
    free(src);
    return refuse ? -1 : 0;
}

static double mono_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* A writer committing many ticks a second would wake the ticker as often:
 * rounds woken by a change are at least this far apart (the changes in
 * between are merged into the next round). */
#define WAKE_GAP_S 0.005

/* A file unused this long is dropped (and not built ahead for). */
#define IDLE_S 30.0

/* Every tick: a round over all live files (hfs_lfile_tick_all). Between
 * ticks: a round over the files whose journal was written, and the news of
 * landed builds (hfs_lfile_tick_changed). */
static void *ticker(void *arg)
{
    (void)arg;
    int first = 1;
    double next = mono_s() + g_tick, last_woken = 0;
    while (!atomic_load(&g_stop)) {
        double now = mono_s();
        int gap = now - last_woken < WAKE_GAP_S; /* leave the watch's events queued a moment */
        double until = gap && last_woken + WAKE_GAP_S < next ? last_woken + WAKE_GAP_S : next;
        int ms = until <= now ? 0 : (int)ceil((until - now) * 1e3);
        if (g_wake < 0 && ms > 100) ms = 100; /* no eventfd: see g_stop within 100 ms */
        /* (a negative fd is ignored by poll) */
        struct pollfd p[2] = {{.fd = g_wake, .events = POLLIN}, {.fd = gap ? -1 : hfs_watch_fd(), .events = POLLIN}};
        int r = poll(p, 2, ms);
        if (atomic_load(&g_stop)) break;
        if (r > 0 || g_wake < 0) { /* (no eventfd: a landed build's news is looked for each time) */
            if (p[0].revents & POLLIN) {
                uint64_t v;
                if (read(g_wake, &v, sizeof v) < 0) {} /* EAGAIN: raced with another read */
            }
            hfs_lfile_watch_events(); /* (non-blocking: also in a round a landed build woke) */
            hfs_lfile_tick_changed(on_new_tick, NULL, IDLE_S);
            last_woken = mono_s();
        }
        if (mono_s() < next) continue;
        if (first) {
            raise_readahead();
            first = 0;
        }
        hfs_lfile_tick_all(on_new_tick, NULL, IDLE_S);
        if (g_dump) { /* SIGUSR1: statistics to the log */
            g_dump = 0;
            dump_stats();
        }
        next = mono_s() + g_tick;
    }
    return NULL;
}

int main(int argc, char **argv)
{
    struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
    opts_t o = {0};
    double tick = 0.1;
    char *srcabs = NULL;
    struct fuse_cmdline_opts cmd;
    memset(&cmd, 0, sizeof cmd);
    int ret = 1;
    if (fuse_opt_parse(&args, &o, spec, opt_proc) != 0) goto done;
    if (fuse_parse_cmdline(&args, &cmd) != 0) goto done;
    if (cmd.show_help) {
        usage(argv[0]);
        fuse_cmdline_help();
        fuse_lowlevel_help();
        ret = 0;
        goto done;
    }
    if (cmd.show_version) {
        printf("h5logfs version %s\n", H5L_VERSION_STRING);
        fflush(stdout);
        fuse_lowlevel_version();
        ret = 0;
        goto done;
    }
    if (!o.source || !cmd.mountpoint) {
        fprintf(stderr, "usage: %s SRC MNT [options]  (try --help)\n", argv[0]);
        goto done;
    }
    if (o.tick && parse_tick(o.tick, &tick) != 0) goto done;
    hfs_config_t c = {.source = o.source, .tick = tick, .stats = o.stats};
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    c.cache_size = pages > 0 && psz > 0 ? (size_t)pages * (size_t)psz / 8 : (size_t)1 << 30;
    if (o.cache_size && parse_size(o.cache_size, &c.cache_size) != 0) {
        fprintf(stderr, "h5logfs: cache_size=%s: not a size (e.g. 512M, 2G)\n", o.cache_size);
        goto done;
    }
    char err[512];
    if (hfs_lfile_init(c.cache_size) != 0) {
        fprintf(stderr, "h5logfs: out of memory\n");
        goto done;
    }
    hfs_fs_t *fs = hfs_fs_new(&c, err, sizeof err);
    if (!fs) {
        fprintf(stderr, "h5logfs: %s\n", err);
        goto done;
    }
    /* read-only at the kernel too (mutations fail with EROFS before us);
     * our subtype and fsname (SRC's absolute path, so that /proc/mounts and
     * refuse_live_mount name it wherever it was mounted from) unless given;
     * with allow_other the kernel checks the source's permissions (the
     * daemon runs as its owner) */
    char extra[4300];
    srcabs = realpath(o.source, NULL);
    snprintf(extra, sizeof extra, "-oro%s%s%s%s", o.has_subtype ? "" : ",subtype=h5logfs",
             o.has_fsname ? "" : ",fsname=",
             o.has_fsname ? ""
             : srcabs     ? srcabs
                          : o.source,
             o.allow && !o.defperm ? ",default_permissions" : "");
    fuse_opt_add_arg(&args, extra);
    g_tick = tick;
    g_mnt = cmd.mountpoint;
    struct fuse_session *se = fuse_session_new(&args, hfs_fs_ops(), sizeof(struct fuse_lowlevel_ops), fs);
    if (!se) goto out;
    g_se = se;
    if (fuse_set_signal_handlers(se) != 0) goto out_destroy;
    clear_stale_mount(cmd.mountpoint);
    if (refuse_live_mount(cmd.mountpoint) != 0) goto out_signals;
    if (fuse_session_mount(se, cmd.mountpoint) != 0) goto out_signals;
    fuse_daemonize(cmd.foreground);
    if (!cmd.foreground) hfs_log_to_syslog(); /* stderr is /dev/null now */
    sd_notify(0, "READY=1");                  /* systemd Type=notify; a no-op elsewhere */
    signal(SIGUSR1, on_usr1);
    pthread_t tk;
    g_wake = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (g_wake < 0) hfs_log("eventfd: %s: the ticker looks for news every 100 ms instead", strerror(errno));
    if (hfs_watch_init() != 0) hfs_log("inotify unavailable (%s): new ticks are seen at the next tick", strerror(errno));
    hfs_lfile_set_kick(wake_ticker);
    int have_ticker = pthread_create(&tk, NULL, ticker, NULL) == 0;
    if (!have_ticker) hfs_log("cannot start the ticker: live files are not refreshed");
    if (cmd.singlethread) {
        ret = fuse_session_loop(se);
    } else {
        struct fuse_loop_config *lc = fuse_loop_cfg_create();
        fuse_loop_cfg_set_clone_fd(lc, (unsigned)cmd.clone_fd);
        fuse_loop_cfg_set_max_threads(lc, 16);
        ret = fuse_session_loop_mt(se, lc);
        fuse_loop_cfg_destroy(lc);
    }
    /* the loop returns the signal that ended it: a requested stop is success */
    if (ret == SIGTERM || ret == SIGINT || ret == SIGHUP) ret = 0;
    sd_notify(0, "STOPPING=1");
    atomic_store(&g_stop, 1);
    wake_ticker();
    if (have_ticker) pthread_join(tk, NULL); /* (the builder may still kick: g_wake stays open) */
    if (o.stats) dump_stats();
    fuse_session_unmount(se);
out_signals:
    fuse_remove_signal_handlers(se);
out_destroy:
    fuse_session_destroy(se);
out:
    hfs_fs_free(fs);      /* the inodes hold snapshots: before the files and the cache */
    hfs_ticks_shutdown(); /* its snapshot too */
    hfs_lfile_shutdown(); /* the builder has stopped: no more kicks */
    hfs_watch_shutdown();
    if (g_wake >= 0) close(g_wake);
    ret = ret ? 1 : 0;
done:
    free(cmd.mountpoint);
    free(o.source);
    free(o.cache_size);
    free(o.tick);
    free(srcabs);
    fuse_opt_free_args(&args);
    return ret;
}
