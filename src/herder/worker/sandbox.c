/* herder-sandbox: start one attempt of a job inside its sandbox, in one exec.
 *
 * The worker (root) runs  herder-sandbox OPTIONS -- PROGRAM ARGS...  with the job's environment.
 * Everything the job may see is said by the options; the policy lives in the worker
 * (src/herder/worker/sandbox.py), this file is only the mechanism:
 *
 *   outer      unshare mount, PID, IPC, UTS (and network) namespaces; fork; wait; exit as the
 *              job did (so the worker's wait4 sees the job's status and resource usage)
 *   init       PID 1 of the new PID namespace: builds the file system on a fresh tmpfs root
 *              (read-only binds, a fresh /proc and /sys, a minimal /dev, the attempt's own
 *              writable directories), pivots into it, forks the job, reaps orphans, and ends
 *              when the job's main process ends; the kernel then kills what is left inside
 *   job        enters its cgroups (as the very last privileged step, so set-up is not charged
 *              to it), sets rlimits, drops to the attempt's uid with no groups and
 *              no_new_privs, loads the seccomp filter, execs the program
 *
 * A signal from the worker's group kill reaches the job (same process group); the outer and
 * init processes ignore it (PID 1 ignores signals it has no handler for), so the job decides
 * how to end, until SIGKILL, which takes init and so the whole namespace.
 *
 * Exit 125 and a line on stderr starting "herder-sandbox:" mean the sandbox itself failed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/mount.h>
#include <linux/seccomp.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
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
#include <sys/wait.h>
#include <grp.h>
#include <unistd.h>

#define SANDBOX_FAILED 125
#define MAX_ITEMS 64

enum kind { RO_BIND, BIND, DEVICE, SYMLINK, DIRECTORY };

struct item {
    enum kind kind;
    const char *source; /* the host path; a symlink's target */
    const char *target; /* the path inside */
};

struct options {
    uid_t uid;
    gid_t gid;
    const char *root;          /* an empty root-owned directory to mount the new root on */
    int disk_fd;               /* the attempt's disk: a mount attached nowhere, or -1 */
    const char *disk_point;    /* an empty root-owned directory to attach it on */
    const char *net_namespace; /* NULL: a new, empty network namespace */
    const char *chdir_to;
    const char *hostname;
    int seccomp;
    struct item items[MAX_ITEMS];
    int item_count;
    const char *cgroup_files[8];
    int cgroup_fds[8]; /* opened before the host's file system is out of sight */
    int cgroup_count;
    struct { int resource; rlim_t value; } rlimits[8];
    int rlimit_count;
    char **argv;
};

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

static int rlimit_resource(const char *name) {
    if (!strcmp(name, "data")) return RLIMIT_DATA;
    if (!strcmp(name, "nproc")) return RLIMIT_NPROC;
    if (!strcmp(name, "nofile")) return RLIMIT_NOFILE;
    if (!strcmp(name, "fsize")) return RLIMIT_FSIZE;
    if (!strcmp(name, "core")) return RLIMIT_CORE;
    usage("unknown rlimit");
    return -1;
}

static void add_item(struct options *o, enum kind kind, const char *source, const char *target) {
    if (o->item_count == MAX_ITEMS) usage("too many mounts");
    o->items[o->item_count++] = (struct item){kind, source, target};
}

static void parse(int argc, char **argv, struct options *o) {
    memset(o, 0, sizeof *o);
    o->uid = (uid_t)-1;
    o->disk_fd = -1;
    int i = 1;
    for (; i < argc; i++) {
        const char *flag = argv[i];
        int left = argc - i - 1;
        if (!strcmp(flag, "--")) { i++; break; }
        if (left < 1) usage("an option lacks its value");
        if (!strcmp(flag, "--uid")) o->uid = (uid_t)number(argv[++i]);
        else if (!strcmp(flag, "--gid")) o->gid = (gid_t)number(argv[++i]);
        else if (!strcmp(flag, "--root")) o->root = argv[++i];
        else if (!strcmp(flag, "--net-namespace")) o->net_namespace = argv[++i];
        else if (!strcmp(flag, "--chdir")) o->chdir_to = argv[++i];
        else if (!strcmp(flag, "--hostname")) o->hostname = argv[++i];
        else if (!strcmp(flag, "--seccomp")) o->seccomp = (int)number(argv[++i]);
        else if (!strcmp(flag, "--dir")) add_item(o, DIRECTORY, NULL, argv[++i]);
        else if (!strcmp(flag, "--device")) { i++; add_item(o, DEVICE, argv[i], argv[i]); }
        else if (!strcmp(flag, "--cgroup")) {
            if (o->cgroup_count == 8) usage("too many cgroups");
            o->cgroup_files[o->cgroup_count++] = argv[++i];
        } else if (!strcmp(flag, "--rlimit")) {
            char *spec = argv[++i], *equals = strchr(spec, '=');
            if (!equals || o->rlimit_count == 8) usage("--rlimit takes NAME=VALUE");
            *equals = 0;
            o->rlimits[o->rlimit_count].resource = rlimit_resource(spec);
            o->rlimits[o->rlimit_count++].value = number(equals + 1);
        } else {
            if (left < 2) usage("an option lacks its values");
            enum kind kind;
            if (!strcmp(flag, "--disk")) {
                o->disk_fd = (int)number(argv[i + 1]);
                o->disk_point = argv[i + 2];
                i += 2;
                continue;
            }
            if (!strcmp(flag, "--ro-bind")) kind = RO_BIND;
            else if (!strcmp(flag, "--bind")) kind = BIND;
            else if (!strcmp(flag, "--symlink")) kind = SYMLINK;
            else usage("unknown option");
            add_item(o, kind, argv[i + 1], argv[i + 2]);
            i += 2;
        }
    }
    if (i >= argc) usage("no program to run after --");
    if (o->uid == (uid_t)-1 || o->uid == 0 || o->gid == 0) usage("--uid and --gid (not 0) are required");
    if (!o->root || !o->chdir_to) usage("--root and --chdir are required");
    o->argv = argv + i;
}

/* --- the file system ------------------------------------------------------------------- */

static char *inside(const char *root, const char *path) {
    static char buffers[4][4096];
    static int next;
    char *buffer = buffers[next++ % 4];
    if (snprintf(buffer, sizeof buffers[0], "%s%s", root, path) >= (int)sizeof buffers[0])
        usage("path too long");
    return buffer;
}

/* mkdir -p; most paths are one level below a directory made already, so that is tried first */
static void make_directories(char *path, mode_t mode) {
    if (!mkdir(path, mode) || errno == EEXIST) return;
    char *slash = strrchr(path, '/');
    if (errno != ENOENT || slash == path) fail("mkdir", path);
    *slash = 0;
    make_directories(path, 0755);
    *slash = '/';
    if (mkdir(path, mode) && errno != EEXIST) fail("mkdir", path);
}

static void make_mount_point(const char *source, char *target) {
    struct stat st;
    if (stat(source, &st)) fail("stat", source);
    if (S_ISDIR(st.st_mode)) {
        make_directories(target, 0755);
        return;
    }
    if (!lstat(target, &st)) return; /* a file already there, e.g. over /etc/resolv.conf */
    char *slash = strrchr(target, '/');
    *slash = 0;
    make_directories(target, 0755);
    *slash = '/';
    int fd = open(target, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) fail("create", target);
    close(fd);
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

static void build_item(const char *root, const struct item *item) {
    char *target = inside(root, item->target);
    switch (item->kind) {
    case DIRECTORY:
        make_directories(target, 0755);
        return;
    case SYMLINK: {
        char *slash = strrchr(target, '/');
        *slash = 0;
        make_directories(target, 0755);
        *slash = '/';
        if (symlink(item->source, target)) fail("symlink", target);
        return;
    }
    case DEVICE: { /* a node of the host's character device: cheaper than a bind mount */
        struct stat st;
        if (stat(item->source, &st)) fail("stat", item->source);
        if (!S_ISCHR(st.st_mode)) usage("--device takes a character device");
        char *slash = strrchr(target, '/');
        *slash = 0;
        make_directories(target, 0755);
        *slash = '/';
        if (mknod(target, S_IFCHR | (st.st_mode & 0777), st.st_rdev)) fail("mknod", target);
        return;
    }
    default:
        break;
    }
    make_mount_point(item->source, target);
    if (mount(item->source, target, NULL, MS_BIND | MS_REC, NULL)) fail("bind", item->source);
    unsigned long long read_only = item->kind == RO_BIND ? MOUNT_ATTR_RDONLY : 0;
    restrict_mount(target, read_only | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
}

static void build_root(const struct options *o) {
    /* nothing done here may reach the host's mount table */
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL)) fail("make mounts private", NULL);
    /* the disk is attached on the host's side of this namespace, where --bind takes its
     * directories from; it leaves with the rest of the host's tree after pivot_root */
    if (o->disk_fd >= 0) {
        if (syscall(SYS_move_mount, o->disk_fd, "", AT_FDCWD, o->disk_point,
                    MOVE_MOUNT_F_EMPTY_PATH))
            fail("attach the disk on", o->disk_point);
        close(o->disk_fd);
    }
    /* the root holds the device nodes (so not nodev), nothing to run, and ends read-only */
    unsigned long root_flags = MS_NOSUID | MS_NOEXEC;
    if (mount("tmpfs", o->root, "tmpfs", root_flags, "size=1m,nr_inodes=4096,mode=0755"))
        fail("mount the root", o->root);
    mode_t job_umask = umask(0); /* device nodes get the host's modes */
    for (int i = 0; i < o->item_count; i++) build_item(o->root, &o->items[i]);
    umask(job_umask);
    char *proc = inside(o->root, "/proc");
    make_directories(proc, 0555);
    if (mount("proc", proc, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL)) fail("mount", proc);
    char *sys = inside(o->root, "/sys");
    make_directories(sys, 0555);
    if (mount("sysfs", sys, "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY, NULL))
        fail("mount", sys);
    if (mount(NULL, o->root, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | root_flags, NULL))
        fail("make the root read-only", o->root);
    if (chdir(o->root)) fail("chdir", o->root);
    if (syscall(SYS_pivot_root, ".", ".")) fail("pivot_root", o->root);
    if (umount2(".", MNT_DETACH)) fail("detach the old root", NULL);
    if (chdir("/")) fail("chdir", "/");
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

static void open_cgroups(struct options *o) {
    for (int i = 0; i < o->cgroup_count; i++) {
        o->cgroup_fds[i] = open(o->cgroup_files[i], O_WRONLY | O_CLOEXEC);
        if (o->cgroup_fds[i] < 0) fail("open the cgroup", o->cgroup_files[i]);
    }
}

static void enter_cgroups(const struct options *o) {
    for (int i = 0; i < o->cgroup_count; i++) {
        if (write(o->cgroup_fds[i], "0", 1) != 1) fail("enter the cgroup", o->cgroup_files[i]);
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

/* PID 1: end with the job's main process, handing its wait status to the outer process */
static void init(struct options *o, int status_pipe) {
    open_cgroups(o);
    build_root(o);
    if (!o->net_namespace) bring_up_loopback();
    if (o->hostname && sethostname(o->hostname, strlen(o->hostname))) fail("sethostname", NULL);
    pid_t job = fork();
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

static void ignore(int number) { (void)number; }

static void exit_as(int status) {
    if (WIFEXITED(status)) _exit(WEXITSTATUS(status));
    int number = WTERMSIG(status);
    struct rlimit none = {0, 0};
    setrlimit(RLIMIT_CORE, &none);
    signal(number, SIG_DFL);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, number);
    sigprocmask(SIG_UNBLOCK, &set, NULL);
    kill(getpid(), number);
    _exit(128 + number);
}

int main(int argc, char **argv) {
    struct options o;
    parse(argc, argv, &o);
    int flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS;
    if (o.net_namespace) {
        int fd = open(o.net_namespace, O_RDONLY | O_CLOEXEC);
        if (fd < 0 || setns(fd, CLONE_NEWNET)) fail("join the network namespace", o.net_namespace);
        close(fd);
    } else {
        flags |= CLONE_NEWNET;
    }
    if (unshare(flags)) fail("unshare", NULL);
    int status_pipe[2];
    if (pipe2(status_pipe, O_CLOEXEC)) fail("pipe", NULL);
    /* the group kill's TERM is the job's to handle; the outer process only waits */
    int forwarded[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM};
    for (size_t i = 0; i < sizeof forwarded / sizeof forwarded[0]; i++) signal(forwarded[i], ignore);
    pid_t child = fork();
    if (child < 0) fail("fork", NULL);
    if (child == 0) {
        for (size_t i = 0; i < sizeof forwarded / sizeof forwarded[0]; i++)
            signal(forwarded[i], SIG_DFL);
        close(status_pipe[0]);
        init(&o, status_pipe[1]);
    }
    close(status_pipe[1]);
    if (o.disk_fd >= 0) close(o.disk_fd); /* init's to attach */
    int status;
    while (waitpid(child, &status, 0) < 0)
        if (errno != EINTR) fail("wait", NULL);
    int job_status;
    ssize_t got;
    do got = read(status_pipe[0], &job_status, sizeof job_status);
    while (got < 0 && errno == EINTR);
    if (got == sizeof job_status) exit_as(job_status);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) _exit(SANDBOX_FAILED);
    exit_as(status); /* init failed or was killed (SIGKILL from the worker) */
}
