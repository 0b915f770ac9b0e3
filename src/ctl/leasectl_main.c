/*
 * leasectl_main.c - the leasectl entry point: one table of subcommands.
 */
#include <stdio.h>
#include <string.h>

#include "ctl/ctl.h"

static const ctl_command_t commands[] = {
    {"migrate", ctl_migrate_main, "apply pending schema migrations (--status to list)"},
    {"recover", ctl_recover_main, "raise fencing counters by an epoch, revoke leases, unseal"},
    {"verify", ctl_verify_main, "report fencing and record inconsistencies"},
};

static void usage(FILE *out)
{
    fprintf(out, "usage: leasectl COMMAND [OPTIONS]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(out, "  %-14s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "\n'leasectl COMMAND --help' describes one command.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return CTL_EXIT_USAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return CTL_EXIT_OK;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(argv[1], commands[i].name) == 0)
            return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "leasectl: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return CTL_EXIT_USAGE;
}
