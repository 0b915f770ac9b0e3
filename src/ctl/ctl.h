/*
 * ctl.h - leasectl subcommands. Each lives in its own file and has the
 * signature of main(): argv[0] is the subcommand's name. Exit statuses are
 * docs/executor.md's, lease_exit_t of lease/result.h.
 */
#ifndef LEASE_CTL_H
#define LEASE_CTL_H

#include <stdint.h>

#include "ctl_options.h"
#include "lease/result.h"
#include "lease/store_admin.h"

typedef struct ctl_command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} ctl_command_t;

int ctl_migrate_main(int argc, char **argv);
int ctl_credential_main(int argc, char **argv);
int ctl_recover_main(int argc, char **argv);
int ctl_verify_main(int argc, char **argv);

/* Client commands over HTTP (ctl_lease.c) and the executor (ctl_run.c). */
int ctl_acquire_main(int argc, char **argv);
int ctl_renew_main(int argc, char **argv);
int ctl_release_main(int argc, char **argv);
int ctl_inspect_main(int argc, char **argv);
int ctl_list_main(int argc, char **argv);
int ctl_watch_main(int argc, char **argv);
int ctl_force_release_main(int argc, char **argv);
int ctl_revoke_main(int argc, char **argv);
int ctl_commit_main(int argc, char **argv);
int ctl_run_main(int argc, char **argv);
/* `leasectl session close SESSION_ID` (ctl_lease.c); `session list` is
 * ctl_session_list (ctl_session_list.c), an operator's read of the database */
int ctl_session_main(int argc, char **argv);
int ctl_session_list(int argc, char **argv);

/* run's own options (--grace-ms into *grace_ms), for ctl_options_parse:
 * the one table, shared with tests/unit/test_ctl_options.c. */
ctl_extra_t ctl_run_extra(int64_t *grace_ms);
/* The LEASE_* variables run gives the command (NULL-terminated); the
 * command's own inherited ones of these names are replaced. */
extern const char *const ctl_run_exported_names[];

/* Resolves the store's URL: --database-url wins, else LEASE_STORE_URL
 * (Valkey/Redis, docs/backends.md) or LEASE_DATABASE_URL (setting both is an
 * error, as for leased). Returns NULL (after printing why) when none is set.
 * migrate and credential accept either backend (ctl_valkey.h). */
const char *ctl_store_url(const char *flag_value);
/* As ctl_store_url, for commands that need PostgreSQL: a Valkey URL is
 * refused (NULL, after saying so). */
const char *ctl_database_url(const char *flag_value);
/* The exit status of an administrative call (docs/executor.md): 0, 65
 * invalid, 77 denied, 69 unavailable, 1 anything else (ctl_credential.c). */
int ctl_admin_exit(lease_admin_status_t st);

#endif
