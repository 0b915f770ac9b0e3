/*
 * free_port.h - a TCP port on 127.0.0.1 for a server a test starts, chosen
 * below the kernel's ephemeral range (net.ipv4.ip_local_port_range).
 *
 *   int port = test_free_port();
 *
 * Binding port 0 hands out a port from inside that range, where any outgoing
 * connection (to Postgres, to Valkey) may take it before the server binds:
 * a CI run lost leased to "Address already in use" that way. Below the range
 * only another listener can take it. The shell scripts use free_port.sh.
 */
#ifndef LEASE_TEST_FREE_PORT_H
#define LEASE_TEST_FREE_PORT_H

/* A port that could be bound just now; exits the test when none is found. */
int test_free_port(void);

#endif
