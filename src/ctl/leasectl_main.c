/*
 * leasectl_main.c - the leasectl entry point: one table of subcommands.
 */
#include <stdio.h>
#include <string.h>

#include "ctl.h"
#include "lease/schema.h"

/* The project's version (CMakeLists.txt project()); the build defines it. */
#ifndef LEASE_VERSION
#error "LEASE_VERSION must be defined by the build"
#endif

static const ctl_command_t commands[] = {
    {"migrate", ctl_migrate_main, "apply pending schema migrations (--status to list)"},
    {"credential", ctl_credential_main, "create, revoke or list credentials (create|revoke|list)"},
    {"acquire", ctl_acquire_main, "acquire a lease (over HTTP)"},
    {"renew", ctl_renew_main, "renew a held lease"},
    {"release", ctl_release_main, "release a held lease"},
    {"inspect", ctl_inspect_main, "show a lease by id or by identity"},
    {"list", ctl_list_main, "list leases by owner, target or program"},
    {"watch", ctl_watch_main, "wait until a lease ends and show how it ended"},
    {"force-release", ctl_force_release_main, "administrator: end a lease, with a reason"},
    {"revoke", ctl_revoke_main, "administrator: revoke a lease, with a reason"},
    {"commit", ctl_commit_main, "fenced commit of documents and publications"},
    {"run", ctl_run_main, "run a command while holding a lease (the executor)"},
    {"session", ctl_session_main, "close a session: every lease in it ends (session close)"},
    {"recover", ctl_recover_main, "raise fencing counters by an epoch, revoke leases, unseal"},
    {"verify", ctl_verify_main, "report fencing and record inconsistencies"},
};

static void usage(FILE *out)
{
    fprintf(out, "usage: leasectl COMMAND [OPTIONS] | --help | --version\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(out, "  %-14s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "\n'leasectl COMMAND --help' describes one command.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return LEASE_EXIT_USAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return LEASE_EXIT_OK;
    }
    if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "version") == 0) {
        printf("leasectl %s (schema %d)\n", LEASE_VERSION, LEASE_SCHEMA_VERSION);
        return LEASE_EXIT_OK;
    }
    char err[512];
    if (!ctl_resolve_secret_files(err, sizeof err)) {
        fprintf(stderr, "leasectl: %s\n", err);
        return LEASE_EXIT_USAGE;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        if (strcmp(argv[1], commands[i].name) == 0) {
            int status = commands[i].run(argc - 1, argv + 1);
            ctl_secrets_free();
            return status;
        }
    }
    ctl_secrets_free();
    fprintf(stderr, "leasectl: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return LEASE_EXIT_USAGE;
}
