/* herder-sandbox: start attempts of jobs inside their sandboxes.
 *
 * The worker (root) runs  herder-sandbox --serve  once, with a stream socket to it as standard
 * input, and asks it to start each attempt: the options say everything the job may see, the
 * policy lives in the worker (src/herder/worker/sandbox.py); this file is only the mechanism.
 * Forking this small process costs far less than an exec per attempt, or a fork of the
 * worker's large one.
 *
 *   server     for each start: clones a child into new mount, PID, IPC and UTS namespaces
 *              and answers its pid and a pidfd; for each reap (once the worker saw the pidfd
 *              say it exited): waits for it and answers the job's wait status and the CPU and
 *              memory of all of it; ends when the worker's socket does
 *   init       PID 1 of the new PID namespace, a session of its own: enters a new (or the
 *              attempt's) network namespace, builds the file system on a fresh tmpfs root
 *              (read-only binds, a fresh /proc and /sys, device nodes, the attempt's disk),
 *              pivots into it, forks the job, reaps orphans, and ends when the job's main
 *              process ends, handing its status to the server; the kernel then kills what is
 *              left inside
 *   job        enters its cgroups (as the very last privileged step, so set-up is not charged
 *              to it), sets rlimits, drops to the attempt's uid with no groups and
 *              no_new_privs, loads the seccomp filter, execs the program
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
    int i = 0;
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

/* PID 1: end with the job's main process, handing its wait status to the server */
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

/* --- the server ------------------------------------------------------------------------ */

#define REQUEST_MAX_BYTES (64 << 20)
#define PASSED_MAX 4 /* descriptors passed with a start besides stdout and stderr */

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
    union { char buffer[CMSG_SPACE(sizeof(int) * (PASSED_MAX + 2))]; struct cmsghdr align; } control;
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
 * /dev/null, the attempt's stdout and stderr, then the passed ones from 3 on, then the status
 * pipe; it is a session of its own (the worker's group kill reaches the job through it) */
static void become_init(char **options, char **environment, const int *fds, int fd_count,
                        int status_pipe) {
    if (setsid() < 0) fail("setsid", NULL);
    int sources[PASSED_MAX + 4], count = 0;
    sources[count++] = open("/dev/null", O_RDWR | O_CLOEXEC);
    for (int i = 0; i < fd_count; i++) sources[count++] = fds[i];
    sources[count++] = status_pipe;
    for (int i = 0; i < count; i++) /* above every target first, so none is overwritten */
        if ((sources[i] = fcntl(sources[i], F_DUPFD_CLOEXEC, 64)) < 0) fail("dup", NULL);
    for (int i = 0; i < count; i++)
        if (dup3(sources[i], i, i == count - 1 ? O_CLOEXEC : 0) < 0) fail("dup", NULL);
    if (syscall(SYS_close_range, count, ~0U, 0))
        for (int fd = count; fd < 1024; fd++) close(fd); /* kernels before 5.9 */
    environ = environment;
    size_t option_count = 0;
    while (options[option_count]) option_count++;
    struct options o;
    parse((int)option_count, options, &o);
    if (o.net_namespace) {
        int fd = open(o.net_namespace, O_RDONLY | O_CLOEXEC);
        if (fd < 0 || setns(fd, CLONE_NEWNET)) fail("join the network namespace", o.net_namespace);
        close(fd);
    } else if (unshare(CLONE_NEWNET)) {
        fail("unshare the network namespace", NULL);
    }
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
        int fds[PASSED_MAX + 2], fd_count;
        receive(&request, fds, &fd_count);
        if (request.kind == 'S') start(&request, fds, fd_count);
        else if (request.kind == 'R') reap(request.pid);
        else usage("a request of an unknown kind");
        for (int i = 0; i < fd_count; i++) close(fds[i]);
    }
}

int main(int argc, char **argv) {
    if (argc != 2 || strcmp(argv[1], "--serve"))
        usage("run by the worker as: herder-sandbox --serve, its socket as standard input");
    serve();
}
