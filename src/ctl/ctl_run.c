/*
 * ctl_run.c - `leasectl run [options] -- COMMAND [ARGS...]`, the executor.
 *
 * Acquires the lease (bounded wait) in the client's session (issue 37: one
 * keep-alive per period keeps it; a session that ends loses it), starts
 * COMMAND in its own process group with the LEASE_* environment, keeps the
 * lease alive through the held lease, and waits on one poll() over a
 * signalfd (SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGQUIT) and the held lease's
 * cancel fd. Those signals are blocked in
 * every thread from the first line on (threads inherit the mask), so no
 * signal is lost or handled asynchronously and SIGCHLD cannot race waitpid.
 *
 *   lease lost        SIGTERM to the group, SIGKILL after --grace-ms if any
 *                     member is left, exit 76
 *   command exits     release the lease, exit with its code (128+N if it
 *                     died of signal N)
 *   SIGINT/TERM/...   forwarded to the group; then as "command exits"
 *
 * When the command's exit and the lease loss are seen in the same wake-up,
 * the exit wins: the command finished, and its commits were fenced anyway.
 */
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/sha.h>

#include "ctl.h"
#include "ctl_options.h"
#include "ctl_report.h"
#include "lease/client.h"
#include "lease/clock.h"
#include "lease/held.h"

extern char **environ;

#define DEFAULT_GRACE_MS 10000
#define RELEASE_DEADLINE_MS 5000
#define LOST_RELEASE_DEADLINE_MS 1000

enum { OPT_GRACE = 1 };

static const int handled_signals[] = {SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGQUIT};

static bool take_grace(void *ctx, int val, const char *arg)
{
    (void)val;
    if (ctl_parse_int(arg, 0, 3600000, ctx))
        return true;
    fprintf(stderr, "leasectl run: --grace-ms needs a whole number of milliseconds\n");
    return false;
}

ctl_extra_t ctl_run_extra(int64_t *grace_ms)
{
    static const struct option opts[] = {
        {"grace-ms", required_argument, NULL, OPT_GRACE},
        {NULL, 0, NULL, 0},
    };
    return (ctl_extra_t){opts, take_grace, grace_ms};
}

static void log_line(void *arg, const char *message)
{
    (void)arg;
    fprintf(stderr, "leasectl run: %s\n", message);
}

/* The LEASE_* variables the command receives (name, value). */
typedef struct run_env {
    char **vars; /* NULL-terminated, for posix_spawn */
    size_t n;
    size_t cap;
} run_env_t;

const char *const ctl_run_exported_names[] = {
    "LEASE_URL",
    "LEASE_TOKEN",
    "LEASE_ID",
    "LEASE_FENCING_TOKEN",
    "LEASE_EXPIRES_AT",
    "LEASE_EXECUTION_ID",
    "LEASE_TRACE_ID",
    "LEASE_SERVICE_INSTANCE_ID",
    "LEASE_TENANT_ID",
    "LEASE_PROGRAM_ID",
    "LEASE_TARGET_NAMESPACE",
    "LEASE_TARGET_ID",
    "LEASE_ACTOR_NAME",
    "LEASE_WORKFLOW_NAME",
    "LEASE_OPERATION_CLASS",
    NULL,
};

/*
 * Of run's own LEASE_* variables, the ones the command inherits as they are
 * (docs/executor.md, "Environment of the command"). Every other LEASE_*
 * variable stays with run: that namespace is leased's and leasectl's own
 * configuration, which holds LEASE_DATABASE_URL, LEASE_TOKEN_PEPPER and the
 * *_FILE variables naming secrets, and a command has no use for any of it.
 * An allow-list, so that a secret setting added later is kept from the
 * command without anyone remembering to list it here.
 */
static const char *const passed_through_names[] = {"LEASE_CA_FILE", NULL};

static bool named(const char *entry, const char *const *names)
{
    for (const char *const *name = names; *name; name++) {
        size_t n = strlen(*name);
        if (strncmp(entry, *name, n) == 0 && entry[n] == '=')
            return true;
    }
    return false;
}

/* Whether the command inherits this NAME=value entry of run's environment. */
static bool inherited_by_command(const char *entry)
{
    return strncmp(entry, "LEASE_", 6) != 0 || named(entry, passed_through_names);
}

static bool env_add(run_env_t *e, const char *name, const char *value)
{
    if (e->n + 2 > e->cap) {
        size_t cap = e->cap ? e->cap * 2 : 64;
        char **grown = realloc(e->vars, cap * sizeof *grown);
        if (!grown)
            return false;
        e->vars = grown;
        e->cap = cap;
    }
    size_t len = strlen(name) + strlen(value) + 2;
    char *var = malloc(len);
    if (!var)
        return false;
    snprintf(var, len, "%s=%s", name, value);
    e->vars[e->n++] = var;
    e->vars[e->n] = NULL;
    return true;
}

static void env_free(run_env_t *e)
{
    for (size_t i = 0; i < e->n; i++) {
        OPENSSL_cleanse(e->vars[i], strlen(e->vars[i])); /* one of them is the token */
        free(e->vars[i]);
    }
    free(e->vars);
}

/* The command's environment: ours without our LEASE_* settings (but
 * LEASE_CA_FILE), plus the lease. The token is the credential run used, as
 * documented; no other secret of run's reaches the command. */
static bool env_build(run_env_t *e, const ctl_options_t *o, const lease_record_t *l)
{
    memset(e, 0, sizeof *e);
    for (char **p = environ; *p; p++) {
        if (!inherited_by_command(*p))
            continue;
        char *eq = strchr(*p, '=');
        if (!eq)
            continue;
        *eq = '\0';
        bool ok = env_add(e, *p, eq + 1);
        *eq = '=';
        if (!ok)
            return false;
    }
    char token[24], expires[LEASE_TIME_LEN + 1];
    snprintf(token, sizeof token, "%lld", (long long)l->fencing_token);
    lease_time_format(l->expires_at_ms, expires);
    const lease_identity_t *id = &l->identity;
    return env_add(e, "LEASE_URL", o->url) && (!o->token || env_add(e, "LEASE_TOKEN", o->token)) &&
           env_add(e, "LEASE_ID", l->lease_id) && env_add(e, "LEASE_FENCING_TOKEN", token) &&
           env_add(e, "LEASE_EXPIRES_AT", expires) &&
           env_add(e, "LEASE_EXECUTION_ID", o->execution_id) &&
           env_add(e, "LEASE_TRACE_ID", o->trace_id) &&
           env_add(e, "LEASE_SERVICE_INSTANCE_ID", o->service_instance_id) &&
           env_add(e, "LEASE_TENANT_ID", id->tenant_id) &&
           env_add(e, "LEASE_PROGRAM_ID", id->program_id) &&
           env_add(e, "LEASE_TARGET_NAMESPACE", id->target_namespace) &&
           env_add(e, "LEASE_TARGET_ID", id->target_id) &&
           env_add(e, "LEASE_ACTOR_NAME", id->actor_name) &&
           env_add(e, "LEASE_WORKFLOW_NAME", id->workflow_name) &&
           env_add(e, "LEASE_OPERATION_CLASS", id->operation_class);
}

/* File descriptors open in this process, ascending (heap; -1 ends it). */
static int *open_fds(void)
{
    size_t n = 0, cap = 16;
    int *fds = malloc(cap * sizeof *fds);
    DIR *d = opendir("/proc/self/fd");
    if (!fds || !d) {
        if (d)
            closedir(d);
        free(fds);
        return NULL;
    }
    struct dirent *e;
    while ((e = readdir(d))) {
        int fd = atoi(e->d_name);
        if (e->d_name[0] < '0' || e->d_name[0] > '9' || fd == dirfd(d))
            continue;
        if (n + 2 > cap) {
            int *grown = realloc(fds, (cap *= 2) * sizeof *fds);
            if (!grown)
                break;
            fds = grown;
        }
        fds[n++] = fd;
    }
    closedir(d);
    fds[n] = -1;
    return fds;
}

static bool listed(const int *fds, int fd)
{
    for (; fds && *fds >= 0; fds++)
        if (*fds == fd)
            return true;
    return false;
}

/*
 * Starts argv in a new process group with the original signal mask. The
 * command inherits what run inherited (inherited lists those fds) and
 * nothing run opened itself. Returns the pid, or -1 with *err set.
 */
static pid_t spawn_command(char **cmd, char **envp, const sigset_t *mask, const int *inherited,
                           int *err)
{
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK);
    posix_spawnattr_setpgroup(&attr, 0);
    posix_spawnattr_setsigmask(&attr, mask);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    int *now = inherited ? open_fds() : NULL;
    for (const int *fd = now; fd && *fd >= 0; fd++)
        if (*fd > 2 && !listed(inherited, *fd))
            posix_spawn_file_actions_addclose(&fa, *fd);
    free(now);
    pid_t pid;
    *err = posix_spawnp(&pid, cmd[0], &fa, &attr, cmd, envp);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    return *err == 0 ? pid : -1;
}

static int exit_status_of(int wstatus)
{
    if (WIFEXITED(wstatus))
        return WEXITSTATUS(wstatus);
    if (WIFSIGNALED(wstatus))
        return 128 + WTERMSIG(wstatus);
    return LEASE_EXIT_FAILURE;
}

/* What the supervision loop saw. */
typedef struct supervision {
    pid_t pid;
    int wstatus;
    bool lost; /* the lease was lost and the group was told to stop */
} supervision_t;

/* Waits for the command, forwarding signals and acting on lease loss. */
static void supervise(supervision_t *s, int sfd, int cancel_fd, int64_t grace_ms)
{
    bool done = false;
    bool killed = false;
    int64_t kill_at_ns = 0;
    while (!done || (s->lost && !killed && kill(-s->pid, 0) == 0)) {
        struct pollfd fds[2] = {{sfd, POLLIN, 0}, {s->lost ? -1 : cancel_fd, POLLIN, 0}};
        int timeout = -1;
        if (s->lost && !killed) {
            int64_t left = (kill_at_ns - lease_mono_now_ns()) / 1000000;
            timeout = left > 0 ? (int)(left < 100 ? left : 100) : 0;
            if (left <= 0) {
                fprintf(stderr, "leasectl run: grace period over: SIGKILL to process group %d\n",
                        (int)s->pid);
                kill(-s->pid, SIGKILL);
                killed = true;
                continue;
            }
        }
        if (poll(fds, 2, timeout) < 0 && errno != EINTR)
            break;
        if (fds[0].revents & POLLIN) {
            struct signalfd_siginfo si;
            while (read(sfd, &si, sizeof si) == (ssize_t)sizeof si) {
                if (si.ssi_signo == SIGCHLD || done)
                    continue;
                fprintf(stderr, "leasectl run: forwarding %s to process group %d\n",
                        strsignal((int)si.ssi_signo), (int)s->pid);
                kill(-s->pid, (int)si.ssi_signo);
            }
            /* SIGCHLDs coalesce: ask waitpid, not the count of signals. As
             * subreaper we also reap the command's orphans, so no zombie
             * makes the group look alive. */
            pid_t pid;
            int wstatus;
            while ((pid = waitpid(-1, &wstatus, WNOHANG)) > 0) {
                if (pid == s->pid) {
                    s->wstatus = wstatus;
                    done = true;
                }
            }
        }
        if (!done && !s->lost && (fds[1].revents & POLLIN)) {
            s->lost = true;
            kill_at_ns = lease_mono_now_ns() + grace_ms * 1000000;
            fprintf(stderr, "leasectl run: lease lost: SIGTERM to process group %d\n", (int)s->pid);
            kill(-s->pid, SIGTERM);
        }
    }
}

static const char synopsis[] = "IDENTITY [OPTIONS] -- COMMAND [ARGS...]";

/* clang-format off */
static const char help[] =
    "Acquires the lease in a session, runs COMMAND with it in its environment\n"
    "(LEASE_ID, LEASE_FENCING_TOKEN, ...), keeps the session alive while COMMAND\n"
    "runs, cancels COMMAND (SIGTERM, then SIGKILL) the moment the lease or its\n"
    "session is lost, and releases it after.\n"
    "Exit status: COMMAND's own (128+N: signal N); 75 held by another; 76 lease\n"
    "lost while running; 69 service unavailable; 77 credential refused.\n\n" CTL_HELP_IDENTITY
    "options:\n"
    "  --ttl-ms N               time to live (default: the policy's)\n"
    "  --maximum-lifetime-ms N  lower the policy's maximum lifetime\n"
    "  --wait-ms N              while another holds it, retry for up to N ms (beyond\n"
    "                           the service's maximum wait: repeated acquires)\n"
    "  --grace-ms N             after a loss, SIGKILL N ms after SIGTERM (default 10000)\n"
    "  --service-instance ID    the holding instance (default: HOSTNAME-PID)\n"
    "  --execution-id ID --job-id ID --trace-id ID  recorded on the lease (generated)\n"
    CTL_HELP_REQUEST_ID CTL_HELP_COMMON;
/* clang-format on */

/* Runs the command under a held lease; returns run's exit status. */
static int run_under_lease(const ctl_options_t *o, lease_held_t *worker, char **command,
                           int64_t grace_ms, const sigset_t *handled, const sigset_t *original,
                           const int *inherited)
{
    lease_record_t held;
    lease_held_snapshot(worker, &held, NULL);
    run_env_t env;
    int sfd = -1;
    int err;
    supervision_t sup = {0};
    int status = LEASE_EXIT_FAILURE;
    if (!env_build(&env, o, &held)) {
        fprintf(stderr, "leasectl run: out of memory\n");
        goto cleanup;
    }
    sfd = signalfd(-1, handled, SFD_CLOEXEC | SFD_NONBLOCK);
    if (sfd < 0) {
        perror("leasectl run: signalfd");
        goto cleanup;
    }
    /* orphans of the command become our children: we can tell when the
     * whole group is gone after a loss, and reap them */
    (void)prctl(PR_SET_CHILD_SUBREAPER, 1L, 0L, 0L, 0L);
    sup.pid = spawn_command(command, env.vars, original, inherited, &err);
    if (sup.pid < 0) {
        fprintf(stderr, "leasectl run: %s: %s\n", command[0], strerror(err));
        status = err == ENOENT ? LEASE_EXIT_NOT_FOUND : LEASE_EXIT_CANNOT_EXECUTE;
        goto cleanup;
    }
    fprintf(stderr, "leasectl run: lease %s (fencing token %lld) held; running %s as pid %d\n",
            held.lease_id, (long long)held.fencing_token, command[0], (int)sup.pid);
    supervise(&sup, sfd, lease_held_cancel_fd(worker), grace_ms);
    if (sup.lost) {
        lease_code_t code;
        lease_held_state_t why = lease_held_state(worker, &code);
        fprintf(stderr, "leasectl run: command cancelled: lease %s (%s)\n",
                lease_held_state_name(why), lease_code_name(code));
        status = LEASE_EXIT_LEASE_LOST;
    } else {
        status = exit_status_of(sup.wstatus);
    }
cleanup:
    if (sfd >= 0)
        close(sfd);
    env_free(&env);
    return status;
}

/*
 * Acquires with --wait-ms, however long: the service waits at most its
 * LEASE_MAX_WAIT_MS per request (10 s by default), so a longer wait is a
 * series of acquires, each waiting what is left (at most RUN_WAIT_CHUNK_MS,
 * halved while the service refuses that wait_ms as above its maximum),
 * separated by a jittered pause of RUN_PAUSE_FIRST_MS doubling to
 * RUN_PAUSE_MAX_MS, until the wait or the client deadline (--deadline-ms,
 * else the wait plus CTL_DEFAULT_DEADLINE_MS) is used up. Each acquire is a
 * request of its own (a conflict leaves no idempotency record, so a given
 * --request-id serves them all). call and res hold the last attempt's.
 */
#define RUN_WAIT_CHUNK_MS 10000 /* leased's default LEASE_MAX_WAIT_MS */
#define RUN_WAIT_CHUNK_MIN_MS 100
#define RUN_PAUSE_FIRST_MS 200
#define RUN_PAUSE_MAX_MS 2000

static lease_code_t acquire_waiting(const ctl_options_t *o, lease_client_t *client,
                                    const char *session_id, lease_client_call_t *call,
                                    lease_result_t *res)
{
    lease_client_acquire_t req = ctl_options_acquire_req(o);
    req.session_id = session_id && *session_id ? session_id : NULL;
    int64_t start = lease_mono_now_ns();
    int64_t wait_end = start + o->wait_ms * 1000000;
    int64_t budget_ms = o->deadline_ms > 0 ? o->deadline_ms : CTL_DEFAULT_DEADLINE_MS + o->wait_ms;
    int64_t deadline_end = start + budget_ms * 1000000;
    int64_t chunk_max = RUN_WAIT_CHUNK_MS;
    int64_t pause_ms = RUN_PAUSE_FIRST_MS;
    for (int attempt = 0;; attempt++) {
        int64_t now = lease_mono_now_ns();
        int64_t wait_left = wait_end > now ? (wait_end - now) / 1000000 : 0;
        int64_t deadline_left = (deadline_end - now) / 1000000;
        req.wait_ms = wait_left < chunk_max ? wait_left : chunk_max;
        int64_t deadline =
            o->deadline_ms > 0 ? deadline_left : req.wait_ms + CTL_DEFAULT_DEADLINE_MS;
        if (deadline > deadline_left)
            deadline = deadline_left;
        if (deadline > CTL_MAX_DEADLINE_MS)
            deadline = CTL_MAX_DEADLINE_MS;
        if (attempt > 0 && deadline <= 0)
            return res->code; /* the client deadline is used up: the last answer stands */
        *call = (lease_client_call_t){.request_id = o->request_id,
                                      .deadline_ms = deadline > 0 ? deadline : 1};
        lease_code_t code = lease_client_acquire(client, &req, call, res);
        if (code == LEASE_INVALID_LEASE_REQUEST && strcmp(res->field, "wait_ms") == 0 &&
            req.wait_ms / 2 >= RUN_WAIT_CHUNK_MIN_MS) {
            chunk_max = req.wait_ms / 2; /* this service's maximum wait is lower */
            continue;
        }
        now = lease_mono_now_ns();
        wait_left = wait_end > now ? (wait_end - now) / 1000000 : 0;
        if (code != LEASE_CONFLICT || wait_left <= 0)
            return code;
        int64_t pause = pause_ms / 2 + (int64_t)lease_jitter((uint64_t)pause_ms / 2 + 1);
        lease_sleep_ms(pause < wait_left ? pause : wait_left);
        pause_ms = pause_ms * 2 > RUN_PAUSE_MAX_MS ? RUN_PAUSE_MAX_MS : pause_ms * 2;
    }
}

/*
 * A replayed answer to a --request-id describes a grant that an earlier
 * process may have made, an unknown time before this process first sent
 * the id: this process's send time is then no safe anchor (it would believe
 * a lease granted long ago has its whole TTL left). One renewal gives a
 * grant whose anchor is this process's own send. Returns LEASE_ACQUIRED
 * with *call and *res those of the renewal, or the renewal's failure.
 */
static lease_code_t renew_replayed_grant(const ctl_options_t *o, lease_client_t *client,
                                         lease_client_call_t *call, lease_result_t *res)
{
    lease_client_owner_t req = {lease_client_identity_of(&res->lease.identity), res->lease.lease_id,
                                res->lease.fencing_token, o->service_instance_id, o->ttl_ms};
    lease_client_call_t rcall = {.deadline_ms = CTL_DEFAULT_DEADLINE_MS};
    lease_result_t renewed;
    lease_code_t code = lease_client_renew(client, &req, &rcall, &renewed);
    if (code != LEASE_RENEWED) {
        *res = renewed;
        return code;
    }
    *call = rcall;
    *res = renewed;
    return LEASE_ACQUIRED;
}

/*
 * The session run holds its lease in (issue 37: kept alive by one
 * keep-alive per period, lost with it). With --request-id the open's
 * request id is derived from it, so a repeated run repeats the open (the
 * same session, kept alive once before it counts) and its acquire is the
 * same request. "" when the service has no sessions (Valkey) or none could
 * be opened: the lease is then renewed on its own, as before.
 */
static void run_session(const ctl_options_t *o, lease_client_t *client, char *sid, size_t sidsz)
{
    char derived[LEASE_ID_MAX + 1];
    const char *request_id = NULL;
    if (o->request_id) {
        unsigned char md[SHA256_DIGEST_LENGTH];
        char text[LEASE_ID_MAX + 16];
        snprintf(text, sizeof text, "session:%s", o->request_id);
        SHA256((const unsigned char *)text, strlen(text), md);
        char hex[2 * SHA256_DIGEST_LENGTH + 1];
        for (size_t i = 0; i < sizeof md; i++)
            snprintf(hex + 2 * i, 3, "%02x", md[i]);
        snprintf(derived, sizeof derived, "req_session_%.32s", hex);
        request_id = derived;
    }
    lease_code_t code =
        lease_held_session(client, o->service_instance_id, o->ttl_ms, request_id, sid, sidsz);
    /* unreachable: the acquire that follows says so, with the URL */
    if (code != LEASE_ACQUIRED && code != LEASE_INVALID_LEASE_REQUEST &&
        code != LEASE_BACKEND_UNAVAILABLE)
        fprintf(stderr, "leasectl run: no session (%s): the lease is renewed on its own\n",
                lease_code_name(code));
}

/* Acquires, holds the lease while the command runs, releases. */
static int hold_and_run(const ctl_options_t *o, lease_client_t *client, char **command,
                        int64_t grace_ms, const sigset_t *handled, const sigset_t *original,
                        const int *inherited)
{
    lease_client_call_t call;
    lease_result_t res;
    char sid[LEASE_ID_MAX + 1] = "";
    run_session(o, client, sid, sizeof sid);
    lease_code_t code = acquire_waiting(o, client, sid, &call, &res);
    if (code == LEASE_ACQUIRED && res.replayed && res.current_state != LEASE_STATE_ACTIVE &&
        res.current_state != LEASE_STATE_NONE)
        code = LEASE_LOST; /* a replayed --request-id whose lease has ended since */
    if (code == LEASE_ACQUIRED && res.replayed && o->request_id)
        code = renew_replayed_grant(o, client, &call, &res);
    if (code != LEASE_ACQUIRED) {
        char unreachable[LEASE_CLIENT_TRANSPORT_ERROR_MAX + 256];
        if (ctl_report_unreachable(lease_client_url(client), &call, unreachable,
                                   sizeof unreachable) &&
            code == LEASE_BACKEND_UNAVAILABLE)
            fprintf(stderr, "leasectl run: not acquired: %s (%s) [%s]\n", unreachable,
                    CTL_REPORT_UNREACHABLE_HINT, lease_code_name(code));
        else
            fprintf(stderr, "leasectl run: not acquired: %s: %s%s%s\n", lease_code_name(code),
                    lease_code_message(code), res.field[0] ? "; field " : "", res.field);
        return lease_code_exit_status(code);
    }

    lease_held_config_t wcfg = {.service_instance_id = o->service_instance_id, .log = log_line};
    lease_held_t *worker = lease_held_start(client, &res.lease, call.anchor_mono_ns, &wcfg, &code);
    if (!worker) {
        fprintf(stderr, "leasectl run: cannot hold lease %s: %s\n", res.lease.lease_id,
                lease_code_name(code));
        lease_client_owner_t rel = {lease_client_identity_of(&res.lease.identity),
                                    res.lease.lease_id, res.lease.fencing_token,
                                    o->service_instance_id, 0};
        lease_client_call_t rcall = {.deadline_ms = RELEASE_DEADLINE_MS};
        lease_code_t released = lease_client_release(client, &rel, &rcall, &res);
        fprintf(stderr, "leasectl run: release: %s\n", lease_code_name(released));
        return lease_code_exit_status(code);
    }
    int status = run_under_lease(o, worker, command, grace_ms, handled, original, inherited);
    if (lease_held_state(worker, NULL) == LEASE_HELD_LOST) {
        /* the service said so: there is nothing left to release */
        lease_held_stop(worker);
    } else {
        /* after an unconfirmed loss this is best effort, briefly: it frees
         * the lease early if the service is reachable again */
        bool lost = status == LEASE_EXIT_LEASE_LOST;
        code =
            lease_held_release(worker, lost ? LOST_RELEASE_DEADLINE_MS : RELEASE_DEADLINE_MS, NULL);
        if (code != LEASE_RELEASED && !lost)
            fprintf(stderr, "leasectl run: release failed: %s (the lease ends at its expiry)\n",
                    lease_code_name(code));
    }
    lease_held_free(worker);
    return status;
}

int ctl_run_main(int argc, char **argv)
{
    /* before any thread exists, so every thread inherits the mask */
    sigset_t handled, original;
    sigemptyset(&handled);
    for (size_t i = 0; i < sizeof handled_signals / sizeof handled_signals[0]; i++)
        sigaddset(&handled, handled_signals[i]);
    pthread_sigmask(SIG_BLOCK, &handled, &original);

    int64_t grace_ms = DEFAULT_GRACE_MS;
    ctl_extra_t extra = ctl_run_extra(&grace_ms);
    ctl_options_t o;
    int status = LEASE_EXIT_USAGE;
    int first = ctl_options_parse(&o, CTL_OPT_IDENTITY | CTL_OPT_OPERANDS, argc, argv, &extra);
    if (first == CTL_PARSE_HELP) {
        printf("usage: leasectl run %s\n%s", synopsis, help);
        status = LEASE_EXIT_OK;
    } else if (first >= 0 && first >= argc) {
        fprintf(stderr, "leasectl run: no command given (usage: leasectl run %s)\n", synopsis);
    } else if (first >= 0) {
        /* before the client opens anything: these the command inherits */
        int *inherited = open_fds();
        lease_client_t *client = ctl_client_new(&o);
        if (client)
            status =
                hold_and_run(&o, client, argv + first, grace_ms, &handled, &original, inherited);
        else
            fprintf(stderr, "leasectl run: LEASE_URL must be an http:// or https:// URL\n");
        lease_client_free(client);
        free(inherited);
    }
    if (first >= 0)
        ctl_options_free(&o);
    pthread_sigmask(SIG_SETMASK, &original, NULL);
    return status;
}
