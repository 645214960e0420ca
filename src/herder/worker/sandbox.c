/* herder-sandbox: start attempts of jobs inside their sandboxes.
 *
 * The worker (root) runs  herder-sandbox --serve SKELETON-OPTIONS  once, with a stream socket to
 * it as standard input, and asks it to start each attempt with that attempt's options. What a
 * job may see is said by the options; the policy lives in the worker
 * (src/herder/worker/sandbox.py), this file is only the mechanism:
 *
 *   server     at start: builds the skeleton every attempt shares (a read-only tmpfs root with
 *              the host's system directories bound read-only, device nodes, symlinks and empty
 *              mount points) in a mount namespace of its own, and pivots into it, so that
 *              nothing of the host's mount table is ever copied or torn down per attempt.
 *              For each start: clones a child into new mount, PID, IPC and UTS namespaces and
 *              answers its pid and a pidfd; for each reap (once the worker saw the pidfd say it
 *              exited): waits for it and answers the job's wait status and the CPU and memory
 *              of all of it; ends when the worker's socket does (the kernel closes it when the
 *              worker dies, however it dies), and every attempt's init with it
 *   init       PID 1 of the new PID namespace, a session of its own, in a copy of the
 *              skeleton: enters a new (or the attempt's) network namespace, adds what is the
 *              attempt's own (its disk's directories, a fresh /proc and /sys, its GPUs' device
 *              nodes, its resolv.conf), forks the job, reaps orphans, and ends when the job's
 *              main process ends, handing its status to the server; the kernel then kills what
 *              is left inside. It dies with the server (PR_SET_PDEATHSIG), so an attempt
 *              never outlives the worker that owns it, even when the server is killed
 *   job        enters its cgroups (as the very last privileged step, so set-up is not charged
 *              to it; on cgroup v2 it is born in its cgroup instead, cloned into it by init),
 *              sets rlimits, drops to the attempt's uid with no groups and no_new_privs, loads
 *              the seccomp filter, execs the program
 *
 * Forking this small process costs far less than an exec per attempt or a fork of the
 * worker's large one. What the attempt needs of the host (its disk, its cgroups' files, its
 * network namespace, its resolv.conf) comes as descriptors with the start: the skeleton's
 * namespace has nothing else of the host.
 *
 * A signal from the worker's group kill reaches the job (init's session and group); init
 * ignores it (PID 1 ignores signals it has no handler for), so the job decides how to end,
 * until SIGKILL, which takes init and so the whole namespace.
 *
 * Exit 125 and a line on stderr starting "herder-sandbox:" mean the sandbox itself failed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/mount.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <grp.h>
#include <unistd.h>

#define SANDBOX_FAILED 125
#define MAX_ITEMS 64
#define MAX_PASSED 8 /* descriptors passed with a start besides stdout and stderr */

static void fail(const char *what, const char *detail) {
    dprintf(2, "herder-sandbox: %s%s%s: %s\n", what, detail ? " " : "", detail ? detail : "",
            strerror(errno));
    _exit(SANDBOX_FAILED);
}

static void usage(const char *problem) {
    dprintf(2, "herder-sandbox: %s\n", problem);
    _exit(SANDBOX_FAILED);
}

static unsigned long number(const char *text) {
    char *end;
    errno = 0;
    unsigned long value = strtoul(text, &end, 10);
    if (errno || *end || end == text) usage("not a number");
    return value;
}

/* --- the file system ------------------------------------------------------------------- */

enum kind { RO_BIND, SYMLINK, DEVICE, DIRECTORY };

struct item {
    enum kind kind;
    const char *source; /* a host path; a symlink's target */
    const char *target; /* the path inside */
    mode_t mode;        /* a device: its node's, as the host has it */
    dev_t device;
};

/* the skeleton: said once, at start; devices are read from the host then */
static struct item skeleton[MAX_ITEMS];
static int skeleton_count;

static char *inside(const char *root, const char *path) {
    static char buffers[4][4096];
    static int next;
    char *buffer = buffers[next++ % 4];
    if (snprintf(buffer, sizeof buffers[0], "%s%s", root, path) >= (int)sizeof buffers[0])
        usage("path too long");
    return buffer;
}

/* mkdir -p; most paths are one level below a directory made already, so that is tried first */
static void make_directories(char *path) {
    if (!mkdir(path, 0755) || errno == EEXIST) return;
    char *slash = strrchr(path, '/');
    if (errno != ENOENT || slash == path) fail("mkdir", path);
    *slash = 0;
    make_directories(path);
    *slash = '/';
    if (mkdir(path, 0755) && errno != EEXIST) fail("mkdir", path);
}

static void make_parent(char *path) {
    char *slash = strrchr(path, '/');
    if (slash == path) return;
    *slash = 0;
    make_directories(path);
    *slash = '/';
}

static void restrict_mount(const char *target, unsigned long long attributes) {
    struct mount_attr attr = {.attr_set = attributes};
    if (!syscall(SYS_mount_setattr, -1, target, AT_RECURSIVE, &attr, sizeof attr)) return;
    if (errno != ENOSYS) fail("mount_setattr", target);
    unsigned long flags = MS_BIND | MS_REMOUNT;  /* older kernels: this mount alone */
    if (attributes & MOUNT_ATTR_RDONLY) flags |= MS_RDONLY;
    if (attributes & MOUNT_ATTR_NOSUID) flags |= MS_NOSUID;
    if (attributes & MOUNT_ATTR_NODEV) flags |= MS_NODEV;
    if (mount(NULL, target, NULL, flags, NULL)) fail("remount", target);
}

static void bind_read_only(const char *source, char *target) {
    struct stat st;
    if (stat(source, &st)) fail("stat", source);
    if (!S_ISDIR(st.st_mode)) usage("--ro-bind takes a directory");
    make_directories(target);
    if (mount(source, target, NULL, MS_BIND | MS_REC, NULL)) fail("bind", source);
    restrict_mount(target, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
}

static void build_item(const char *root, const struct item *item) {
    char *target = inside(root, item->target);
    switch (item->kind) {
    case DIRECTORY:
        make_directories(target);
        return;
    case SYMLINK:
        make_parent(target);
        if (symlink(item->source, target)) fail("symlink", target);
        return;
    case DEVICE: /* a node of the host's character device: cheaper than a bind mount */
        make_parent(target);
        if (mknod(target, S_IFCHR | (item->mode & 0777), item->device)) fail("mknod", target);
        return;
    case RO_BIND:
        bind_read_only(item->source, target);
        return;
    }
}

/* The server's own root, once: a read-only tmpfs (holding device nodes, so not nodev, and
 * nothing to run) on ROOT with the skeleton's items, pivoted into in a mount namespace of the
 * server's, where nothing done reaches the host's mount table. */
static void build_skeleton(const char *root) {
    if (unshare(CLONE_NEWNS)) fail("unshare the mount namespace", NULL);
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL)) fail("make mounts private", NULL);
    unsigned long flags = MS_NOSUID | MS_NOEXEC;
    if (mount("tmpfs", root, "tmpfs", flags, "size=1m,nr_inodes=4096,mode=0755"))
        fail("mount the root", root);
    mode_t job_umask = umask(0); /* device nodes get the host's modes */
    for (int i = 0; i < skeleton_count; i++) build_item(root, &skeleton[i]);
    umask(job_umask);
    if (mount(NULL, root, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | flags, NULL))
        fail("make the root read-only", root);
    if (chdir(root)) fail("chdir", root);
    if (syscall(SYS_pivot_root, ".", ".")) fail("pivot_root", root);
    if (umount2(".", MNT_DETACH)) fail("detach the host's root", NULL);
    if (chdir("/")) fail("chdir", "/");
}

static void parse_skeleton(int argc, char **argv, const char **root) {
    for (int i = 0; i < argc; i++) {
        const char *flag = argv[i];
        if (skeleton_count == MAX_ITEMS) usage("too many items in the skeleton");
        struct item *item = &skeleton[skeleton_count];
        if (i + 1 >= argc) usage("an option lacks its value");
        if (!strcmp(flag, "--root")) {
            *root = argv[++i];
            continue;
        }
        if (!strcmp(flag, "--dir")) {
            *item = (struct item){DIRECTORY, NULL, argv[++i], 0, 0};
        } else if (!strcmp(flag, "--device")) {
            struct stat st;
            const char *path = argv[++i];
            if (stat(path, &st)) fail("stat", path);
            if (!S_ISCHR(st.st_mode)) usage("--device takes a character device");
            *item = (struct item){DEVICE, path, path, st.st_mode, st.st_rdev};
        } else {
            if (i + 2 >= argc) usage("an option lacks its values");
            enum kind kind;
            if (!strcmp(flag, "--ro-bind")) kind = RO_BIND;
            else if (!strcmp(flag, "--symlink")) kind = SYMLINK;
            else usage("unknown option of the skeleton");
            *item = (struct item){kind, argv[i + 1], argv[i + 2], 0, 0};
            i += 2;
        }
        skeleton_count++;
    }
    if (!*root) usage("--root is required");
}

/* --- what one attempt adds ------------------------------------------------------------- */

struct options {
    uid_t uid;
    gid_t gid;
    const char *chdir_to;
    const char *hostname;
    int seccomp;
    int disk_fd; /* the attempt's disk: a mount attached nowhere, made by the worker */
    int root_fd; /* an image's root (runtime image): a mount attached nowhere, or -1 */
    struct { const char *directory, *target; } disk_binds[8];
    int disk_bind_count;
    struct item devices[8]; /* its GPUs: given, it gets a /dev of its own */
    int device_count;
    struct { int fd; const char *target; } mounts[4]; /* detached mounts, such as resolv.conf */
    int mount_count;
    int net_fd; /* the attempt's network namespace, or -1 for a new, empty one */
    int cgroup_fds[8]; /* cgroup files the job writes itself into (v1's tasks, v2's procs) */
    int cgroup_count;
    int cgroup_into; /* v2: the directory of the cgroup the job is born in, or -1 */
    struct { int resource; rlim_t value; } rlimits[8];
    int rlimit_count;
    char **argv;
};

static int rlimit_resource(const char *name) {
    if (!strcmp(name, "data")) return RLIMIT_DATA;
    if (!strcmp(name, "nproc")) return RLIMIT_NPROC;
    if (!strcmp(name, "nofile")) return RLIMIT_NOFILE;
    if (!strcmp(name, "fsize")) return RLIMIT_FSIZE;
    if (!strcmp(name, "core")) return RLIMIT_CORE;
    usage("unknown rlimit");
    return -1;
}

static void parse(int argc, char **argv, struct options *o) {
    memset(o, 0, sizeof *o);
    o->uid = (uid_t)-1;
    o->disk_fd = o->net_fd = o->root_fd = o->cgroup_into = -1;
    int i = 0;
    for (; i < argc; i++) {
        const char *flag = argv[i];
        int left = argc - i - 1;
        if (!strcmp(flag, "--")) { i++; break; }
        if (left < 1) usage("an option lacks its value");
        if (!strcmp(flag, "--uid")) o->uid = (uid_t)number(argv[++i]);
        else if (!strcmp(flag, "--gid")) o->gid = (gid_t)number(argv[++i]);
        else if (!strcmp(flag, "--chdir")) o->chdir_to = argv[++i];
        else if (!strcmp(flag, "--hostname")) o->hostname = argv[++i];
        else if (!strcmp(flag, "--seccomp")) o->seccomp = (int)number(argv[++i]);
        else if (!strcmp(flag, "--disk")) o->disk_fd = (int)number(argv[++i]);
        else if (!strcmp(flag, "--root-tree")) o->root_fd = (int)number(argv[++i]);
        else if (!strcmp(flag, "--net-namespace")) o->net_fd = (int)number(argv[++i]);
        else if (!strcmp(flag, "--cgroup-into")) o->cgroup_into = (int)number(argv[++i]);
        else if (!strcmp(flag, "--cgroup")) {
            if (o->cgroup_count == 8) usage("too many cgroups");
            o->cgroup_fds[o->cgroup_count++] = (int)number(argv[++i]);
        } else if (!strcmp(flag, "--rlimit")) {
            char *spec = argv[++i], *equals = strchr(spec, '=');
            if (!equals || o->rlimit_count == 8) usage("--rlimit takes NAME=VALUE");
            *equals = 0;
            o->rlimits[o->rlimit_count].resource = rlimit_resource(spec);
            o->rlimits[o->rlimit_count++].value = number(equals + 1);
        } else if (!strcmp(flag, "--device")) { /* PATH MODE MAJOR MINOR */
            if (left < 4 || o->device_count == 8) usage("--device takes PATH MODE MAJOR MINOR");
            dev_t device = makedev(number(argv[i + 3]), number(argv[i + 4]));
            o->devices[o->device_count++] =
                (struct item){DEVICE, argv[i + 1], argv[i + 1], (mode_t)number(argv[i + 2]), device};
            i += 4;
        } else {
            if (left < 2) usage("an option lacks its values");
            if (!strcmp(flag, "--disk-bind")) {
                if (o->disk_bind_count == 8) usage("too many disk binds");
                o->disk_binds[o->disk_bind_count].directory = argv[i + 1];
                o->disk_binds[o->disk_bind_count++].target = argv[i + 2];
            } else if (!strcmp(flag, "--mount")) {
                if (o->mount_count == 4) usage("too many mounts");
                o->mounts[o->mount_count].fd = (int)number(argv[i + 1]);
                o->mounts[o->mount_count++].target = argv[i + 2];
            } else {
                usage("unknown option");
            }
            i += 2;
        }
    }
    if (i >= argc) usage("no program to run after --");
    if (o->uid == (uid_t)-1 || o->uid == 0 || o->gid == 0) usage("--uid and --gid (not 0) are required");
    if (!o->chdir_to) usage("--chdir is required");
    o->argv = argv + i;
}

/* In this attempt's copy of the skeleton (whose mounts no other attempt sees), what is its
 * own. The skeleton's files are shared by every attempt, so nothing is written to them. */
static void add_own(const struct options *o) {
    /* the skeleton's /dev again, with its GPUs, on a tmpfs of its own; an image's root has
     * only an empty directory there */
    if (o->device_count || o->root_fd >= 0) {
        if (mount("tmpfs", "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "size=64k,mode=0755"))
            fail("mount", "/dev");
        mode_t job_umask = umask(0);
        for (int i = 0; i < skeleton_count; i++)
            if (!strncmp(skeleton[i].target, "/dev/", 5)) build_item("", &skeleton[i]);
        for (int i = 0; i < o->device_count; i++) build_item("", &o->devices[i]);
        umask(job_umask);
    }
    /* the disk's directories are bound from where /proc goes, while it is free; the binds
     * keep the disk's own nosuid and nodev (the worker mounted it so) */
    if (o->disk_fd >= 0) {
        if (syscall(SYS_move_mount, o->disk_fd, "", AT_FDCWD, "/proc", MOVE_MOUNT_F_EMPTY_PATH))
            fail("attach the disk", NULL);
        for (int i = 0; i < o->disk_bind_count; i++) {
            char *source = inside("/proc/", o->disk_binds[i].directory);
            if (mount(source, o->disk_binds[i].target, NULL, MS_BIND, NULL))
                fail("bind", o->disk_binds[i].target);
        }
        if (umount2("/proc", MNT_DETACH)) fail("detach the disk", NULL);
        close(o->disk_fd);
    }
    for (int i = 0; i < o->mount_count; i++) {
        if (syscall(SYS_move_mount, o->mounts[i].fd, "", AT_FDCWD, o->mounts[i].target,
                    MOVE_MOUNT_F_EMPTY_PATH))
            fail("attach a mount on", o->mounts[i].target);
        restrict_mount(o->mounts[i].target,
                       MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
        close(o->mounts[i].fd);
    }
    if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL))
        fail("mount", "/proc");
    if (mount("sysfs", "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY, NULL))
        fail("mount", "/sys");
}

static void bring_up_loopback(void) {
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) fail("socket", NULL);
    struct ifreq request = {0};
    strcpy(request.ifr_name, "lo");
    if (ioctl(fd, SIOCGIFFLAGS, &request)) fail("read loopback flags", NULL);
    request.ifr_flags |= IFF_UP | IFF_RUNNING;
    if (ioctl(fd, SIOCSIFFLAGS, &request)) fail("bring loopback up", NULL);
    close(fd);
}

/* --- the system-call filter ------------------------------------------------------------ */

#define DENY(name) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_##name, 0, 1), \
                   BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM)
#define NEW_NAMESPACES (CLONE_NEWNS | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET | \
                        CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP)
#if defined(__x86_64__)
#define NATIVE_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define NATIVE_ARCH AUDIT_ARCH_AARCH64
#else
#error "herder-sandbox knows the system calls of x86_64 and aarch64 only"
#endif

static void load_seccomp(void) {
    struct sock_filter filter[] = {
        /* another ABI (i386 through int 0x80) would bypass every rule below */
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, NATIVE_ARCH, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
#if defined(__x86_64__)
        BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000, 0, 1), /* the x32 ABI */
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
#endif
        /* clone3 passes its flags in memory a filter cannot read: ENOSYS makes libc use clone */
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_clone3, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_clone, 0, 4),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0])),
        BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, NEW_NAMESPACES, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        DENY(unshare), DENY(setns), DENY(mount), DENY(umount2), DENY(pivot_root), DENY(chroot),
        DENY(move_mount), DENY(open_tree), DENY(fsopen), DENY(fsconfig), DENY(fsmount),
        DENY(fspick), DENY(mount_setattr), DENY(ptrace), DENY(process_vm_readv),
        DENY(process_vm_writev), DENY(kexec_load), DENY(kexec_file_load), DENY(bpf),
        DENY(keyctl), DENY(add_key), DENY(request_key), DENY(perf_event_open),
        DENY(init_module), DENY(finit_module), DENY(delete_module), DENY(reboot), DENY(swapon),
        DENY(swapoff), DENY(acct), DENY(settimeofday), DENY(clock_settime), DENY(clock_adjtime),
        DENY(adjtimex), DENY(syslog), DENY(quotactl), DENY(userfaultfd),
        DENY(open_by_handle_at), DENY(name_to_handle_at), DENY(vhangup), DENY(io_uring_setup),
        DENY(io_uring_enter), DENY(io_uring_register), DENY(fanotify_init),
#if defined(__x86_64__)
        DENY(iopl), DENY(ioperm), DENY(uselib), DENY(lookup_dcookie),
#endif
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog program = {.len = sizeof filter / sizeof filter[0], .filter = filter};
    if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program)) fail("load the seccomp filter", NULL);
}

/* --- the processes --------------------------------------------------------------------- */

static void enter_cgroups(const struct options *o) {
    for (int i = 0; i < o->cgroup_count; i++) {
        if (write(o->cgroup_fds[i], "0", 1) != 1) fail("enter the cgroup", NULL);
        close(o->cgroup_fds[i]);
    }
}

static void become_job(const struct options *o) {
    /* from here on the attempt's cgroups are charged: only the last steps remain */
    enter_cgroups(o);
    for (int i = 0; i < o->rlimit_count; i++) {
        struct rlimit limit = {o->rlimits[i].value, o->rlimits[i].value};
        if (setrlimit(o->rlimits[i].resource, &limit)) fail("setrlimit", NULL);
    }
    if (chdir(o->chdir_to)) fail("chdir", o->chdir_to);
    if (setgroups(0, NULL)) fail("setgroups", NULL);
    if (setresgid(o->gid, o->gid, o->gid)) fail("setresgid", NULL);
    if (setresuid(o->uid, o->uid, o->uid)) fail("setresuid", NULL);
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)) fail("no_new_privs", NULL);
    if (o->seccomp) load_seccomp();
    execvp(o->argv[0], o->argv);
    dprintf(2, "herder-sandbox: cannot run %s: %s\n", o->argv[0], strerror(errno));
    _exit(127);
}

/* Runtime image: the image's root (stacked by the worker, images.py) becomes this attempt's
 * "/", read-only, nosuid, nodev, in place of the skeleton, whose host directories are then
 * out of sight; what add_own adds goes on it as on the skeleton. It is attached on /run
 * (an empty mount point of the skeleton) and pivoted into, as the skeleton was. */
static void enter_image_root(int root_fd) {
    if (syscall(SYS_move_mount, root_fd, "", AT_FDCWD, "/run", MOVE_MOUNT_F_EMPTY_PATH))
        fail("attach the image's root", NULL);
    close(root_fd);
    if (chdir("/run")) fail("chdir", "the image's root");
    if (syscall(SYS_pivot_root, ".", ".")) fail("pivot_root", "the image's root");
    if (umount2(".", MNT_DETACH)) fail("detach the skeleton", NULL);
    if (chdir("/")) fail("chdir", "/");
    restrict_mount("/", MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
}

/* cgroup v2: the job is born in its cgroup (clone3, Linux 5.7), so nothing is moved, and the
 * move's wait on the kernel's global lock on migrations is never paid; where clone3 is refused
 * (older kernels, a container's seccomp profile) it forks and writes itself in, as on v1 */
static pid_t fork_job(struct options *o) {
    if (o->cgroup_into < 0) return fork();
    struct clone_args args = {.flags = CLONE_INTO_CGROUP, .exit_signal = SIGCHLD,
                              .cgroup = (uint64_t)o->cgroup_into};
    pid_t pid = (pid_t)syscall(SYS_clone3, &args, sizeof args);
    if (pid >= 0 || (errno != ENOSYS && errno != EPERM)) return pid;
    int procs = openat(o->cgroup_into, "cgroup.procs", O_WRONLY | O_CLOEXEC);
    if (procs < 0 || o->cgroup_count == 8) fail("open the cgroup", NULL);
    o->cgroup_fds[o->cgroup_count++] = procs;
    return fork();
}

/* PID 1: end with the job's main process, handing its wait status to the server */
static void init(struct options *o, int status_pipe) {
    if (o->net_fd >= 0) {
        if (setns(o->net_fd, CLONE_NEWNET)) fail("join the network namespace", NULL);
        close(o->net_fd);
    } else {
        if (unshare(CLONE_NEWNET)) fail("unshare the network namespace", NULL);
        bring_up_loopback();
    }
    if (o->root_fd >= 0) enter_image_root(o->root_fd);
    add_own(o);
    if (o->hostname && sethostname(o->hostname, strlen(o->hostname))) fail("sethostname", NULL);
    pid_t job = fork_job(o);
    if (job < 0) fail("fork", NULL);
    if (job == 0) {
        close(status_pipe);
        become_job(o);
    }
    for (;;) {
        int status;
        pid_t pid = waitpid(-1, &status, 0);
        if (pid == job) {
            if (write(status_pipe, &status, sizeof status) != sizeof status) _exit(SANDBOX_FAILED);
            _exit(0);
        }
        if (pid < 0 && errno != EINTR) _exit(SANDBOX_FAILED);
    }
}

/* --- the server ------------------------------------------------------------------------ */

#define REQUEST_MAX_BYTES (64 << 20)

struct request {
    uint32_t kind;   /* 'S' start, 'R' reap */
    int32_t pid;     /* reap: the attempt's init */
    uint32_t length; /* start: bytes that follow: the options, then the environment */
    uint32_t count;  /* start: how many of those NUL-terminated strings are options */
};

struct reply {
    int32_t error; /* an errno, or 0 */
    int32_t pid;
    int32_t status; /* reap: the job's wait status */
    int32_t unused;
    int64_t user_usec, system_usec, max_rss_kb; /* reap: init's and all it reaped */
};

static int worker = 0; /* the server's standard input: a stream socket to the worker */
static int dev_null;    /* the attempts' standard input */
static int server_pidfd; /* the server's own: an init that polls it readable lost its server */

/* the attempts started and not yet reaped: their init, and where the job's status comes */
static struct running { pid_t pid; int status_fd; } *running;
static size_t running_count, running_room;

static void read_fully(void *buffer, size_t length) {
    for (size_t done = 0; done < length;) {
        ssize_t got = read(worker, (char *)buffer + done, length - done);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) _exit(got ? SANDBOX_FAILED : 0); /* the worker is gone: so are we */
        done += (size_t)got;
    }
}

/* the next request and the descriptors that came with it; exits when the worker is gone */
static void receive(struct request *request, int *fds, int *fd_count) {
    union { char buffer[CMSG_SPACE(sizeof(int) * (MAX_PASSED + 2))]; struct cmsghdr align; } control;
    struct iovec data = {request, sizeof *request};
    struct msghdr message = {.msg_iov = &data, .msg_iovlen = 1,
                             .msg_control = control.buffer, .msg_controllen = sizeof control.buffer};
    ssize_t got;
    do got = recvmsg(worker, &message, MSG_CMSG_CLOEXEC);
    while (got < 0 && errno == EINTR);
    if (got <= 0) _exit(got ? SANDBOX_FAILED : 0);
    if (message.msg_flags & MSG_CTRUNC) usage("too many descriptors in a request");
    *fd_count = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&message); c; c = CMSG_NXTHDR(&message, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
        int count = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
        memcpy(fds + *fd_count, CMSG_DATA(c), sizeof(int) * (size_t)count);
        *fd_count += count;
    }
    if ((size_t)got < sizeof *request) read_fully((char *)request + got, sizeof *request - (size_t)got);
}

static void answer(const struct reply *reply, int fd) {
    union { char buffer[CMSG_SPACE(sizeof(int))]; struct cmsghdr align; } control;
    struct iovec data = {(void *)reply, sizeof *reply};
    struct msghdr message = {.msg_iov = &data, .msg_iovlen = 1};
    if (fd >= 0) {
        message.msg_control = control.buffer;
        message.msg_controllen = sizeof control.buffer;
        struct cmsghdr *c = CMSG_FIRSTHDR(&message);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &fd, sizeof(int));
    }
    ssize_t sent;
    do sent = sendmsg(worker, &message, MSG_NOSIGNAL);
    while (sent < 0 && errno == EINTR);
    if (sent != (ssize_t)sizeof *reply) _exit(SANDBOX_FAILED);
}

/* the NUL-terminated strings from *at to end (all of them, or count) as a NULL-terminated
 * array; *at moves past them */
static char **take_strings(char **at, const char *end, size_t count, int all) {
    if (all)
        for (const char *string = *at; string < end; string += strlen(string) + 1) count++;
    char **array = calloc(count + 1, sizeof *array);
    if (!array) fail("calloc", NULL);
    for (size_t i = 0; i < count; i++) {
        if (*at >= end) usage("a request lacks its options");
        array[i] = *at;
        *at += strlen(*at) + 1;
    }
    return array;
}

/* The child, PID 1 of fresh mount, PID, IPC and UTS namespaces: its descriptors are only
 * /dev/null, the attempt's stdout and stderr, then the passed ones from 3 on (closed when
 * it execs), then the status pipe; it is a session of its own (the worker's group kill
 * reaches the job through it) */
static void become_init(char **options, char **environment, const int *fds, int fd_count,
                        int status_pipe) {
    /* dies with the server (its only thread); one that died before this is seen by its pidfd:
     * a parent outside the PID namespace shows as getppid() == 0 either way */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL)) fail("set the parent-death signal", NULL);
    struct pollfd server = {server_pidfd, POLLIN, 0};
    if (poll(&server, 1, 0) != 0) _exit(SANDBOX_FAILED);
    if (setsid() < 0) fail("setsid", NULL);
    int sources[MAX_PASSED + 4], count = 0;
    sources[count++] = dev_null;
    for (int i = 0; i < fd_count; i++) sources[count++] = fds[i];
    sources[count++] = status_pipe;
    for (int i = 0; i < count; i++) /* above every target first, so none is overwritten */
        if ((sources[i] = fcntl(sources[i], F_DUPFD_CLOEXEC, 64)) < 0) fail("dup", NULL);
    for (int i = 0; i < count; i++)
        if (dup3(sources[i], i, i < 3 ? 0 : O_CLOEXEC) < 0) fail("dup", NULL);
    if (syscall(SYS_close_range, count, ~0U, 0))
        for (int fd = count; fd < 1024; fd++) close(fd); /* kernels before 5.9 */
    environ = environment;
    size_t option_count = 0;
    while (options[option_count]) option_count++;
    struct options o;
    parse((int)option_count, options, &o);
    init(&o, count - 1);
}

static void start(const struct request *request, const int *fds, int fd_count) {
    struct reply reply = {0};
    if (fd_count < 2 || request->length > REQUEST_MAX_BYTES) {
        reply.error = EINVAL;
        answer(&reply, -1);
        return;
    }
    char *payload = malloc(request->length + 1);
    if (!payload) fail("malloc", NULL);
    read_fully(payload, request->length);
    payload[request->length] = 0;
    int status_pipe[2];
    if (pipe2(status_pipe, O_CLOEXEC)) {
        reply.error = errno;
    } else {
        int flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | SIGCHLD;
        pid_t pid = (pid_t)syscall(SYS_clone, flags, NULL, NULL, NULL, 0);
        if (pid == 0) {
            char *at = payload, *end = payload + request->length;
            char **options = take_strings(&at, end, request->count, 0);
            become_init(options, take_strings(&at, end, 0, 1), fds, fd_count, status_pipe[1]);
        }
        close(status_pipe[1]);
        int pidfd = pid < 0 ? -1 : (int)syscall(SYS_pidfd_open, pid, 0);
        if (pid < 0 || pidfd < 0) {
            reply.error = errno;
            close(status_pipe[0]);
        } else {
            if (running_count == running_room) {
                running_room = running_room ? running_room * 2 : 64;
                running = realloc(running, running_room * sizeof *running);
                if (!running) fail("realloc", NULL);
            }
            running[running_count++] = (struct running){pid, status_pipe[0]};
            reply.pid = pid;
            answer(&reply, pidfd);
            close(pidfd);
            free(payload);
            return;
        }
    }
    free(payload);
    answer(&reply, -1);
}

/* wait for an init the worker saw exit; its status is the job's, as the job ended */
static void reap(pid_t pid) {
    struct reply reply = {.pid = pid};
    size_t at = 0;
    while (at < running_count && running[at].pid != pid) at++;
    struct rusage usage;
    int status;
    pid_t got = at == running_count ? -1 : wait4(pid, &status, WNOHANG, &usage);
    if (got <= 0) {
        reply.error = got == 0 ? EAGAIN : ECHILD;
        answer(&reply, -1);
        return;
    }
    int job_status;
    ssize_t read_bytes;
    do read_bytes = read(running[at].status_fd, &job_status, sizeof job_status);
    while (read_bytes < 0 && errno == EINTR);
    close(running[at].status_fd);
    running[at] = running[--running_count];
    if (read_bytes == sizeof job_status) reply.status = job_status;
    else if (WIFEXITED(status) && WEXITSTATUS(status) == 0) reply.status = SANDBOX_FAILED << 8;
    else reply.status = status; /* init failed, or was killed (SIGKILL from the worker) */
    reply.user_usec = usage.ru_utime.tv_sec * 1000000LL + usage.ru_utime.tv_usec;
    reply.system_usec = usage.ru_stime.tv_sec * 1000000LL + usage.ru_stime.tv_usec;
    reply.max_rss_kb = usage.ru_maxrss;
    answer(&reply, -1);
}

static void serve(void) {
    for (;;) {
        struct request request;
        int fds[MAX_PASSED + 2], fd_count;
        receive(&request, fds, &fd_count);
        if (request.kind == 'S') start(&request, fds, fd_count);
        else if (request.kind == 'R') reap(request.pid);
        else usage("a request of an unknown kind");
        for (int i = 0; i < fd_count; i++) close(fds[i]);
    }
}

int main(int argc, char **argv) {
    if (argc < 2 || strcmp(argv[1], "--serve"))
        usage("run by the worker as: herder-sandbox --serve SKELETON, its socket as standard input");
    const char *root = NULL;
    parse_skeleton(argc - 2, argv + 2, &root);
    dev_null = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (dev_null < 0) fail("open", "/dev/null");
    server_pidfd = (int)syscall(SYS_pidfd_open, getpid(), 0);
    if (server_pidfd < 0) fail("pidfd_open", NULL);
    build_skeleton(root);
    serve();
}
