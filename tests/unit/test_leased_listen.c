/*
 * test_leased_listen.c - leased on a listen address that is taken: it exits
 * 1 (docs/config.md) with a message that names the real address, the
 * system's reason and the setting that changes it (LEASE_LISTEN), instead
 * of libmicrohttpd's "Failed to bind to port 0". No database is needed:
 * listening fails before any request.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <arpa/inet.h>
#include <cmocka.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "leased_proc.h"

static void test_busy_port_is_named(void **state)
{
    (void)state;
    /* a port some other program listens on */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(fd, 1), 0);
    socklen_t len = sizeof a;
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);

    char listen_env[64], address[32];
    snprintf(address, sizeof address, "127.0.0.1:%d", ntohs(a.sin_port));
    snprintf(listen_env, sizeof listen_env, "LEASE_LISTEN=%s", address);
    const char *env[] = {listen_env, "LEASE_DATABASE_URL=host=/nonexistent dbname=none",
                         "LEASE_LOG_FORMAT=text", NULL};
    char *out = NULL;
    int status = leased_proc_run_cli(NULL, env, &out);
    close(fd);
    if (status != 1 || !strstr(out, address) || !strstr(out, "LEASE_LISTEN"))
        fprintf(stderr, "status %d:\n%s\n", status, out);
    assert_int_equal(status, 1);
    char want[128];
    snprintf(want, sizeof want, "cannot listen on %s: Address already in use", address);
    assert_non_null(strstr(out, want));
    assert_non_null(strstr(out, "LEASE_LISTEN"));
    assert_null(strstr(out, "port 0"));
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_busy_port_is_named),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
