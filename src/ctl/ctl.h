/*
 * ctl.h - leasectl subcommands. Each lives in its own file and has the
 * signature of main(): argv[0] is the subcommand's name. Exit statuses are
 * interface.md section 5's, lease_exit_t of lease/result.h.
 */
#ifndef LEASE_CTL_H
#define LEASE_CTL_H

#include "lease/result.h"

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
int ctl_force_release_main(int argc, char **argv);
int ctl_revoke_main(int argc, char **argv);
int ctl_commit_main(int argc, char **argv);
int ctl_run_main(int argc, char **argv);

/* Resolves the database URL: --database-url wins, else LEASE_DATABASE_URL.
 * Returns NULL (after printing why) when neither is set. */
const char *ctl_database_url(const char *flag_value);

#endif
