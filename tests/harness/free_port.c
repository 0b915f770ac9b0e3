/*
 * free_port.c - see free_port.h for why the port is not the kernel's choice.
 */
#include "free_port.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static int ephemeral_low(void)
{
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    int low = 0;
    if (f) {
        if (fscanf(f, "%d", &low) != 1)
            low = 0;
        fclose(f);
    }
    return low > 12000 ? low : 32768;
}

static int bindable(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return 0;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((unsigned short)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int ok = bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
    close(fd);
    return ok;
}

int test_free_port(void)
{
    static unsigned seed;
    if (!seed)
        seed = (unsigned)time(NULL) ^ (unsigned)getpid() << 16;
    int top = ephemeral_low();
    for (int i = 0; i < 500; i++) {
        int port = 10000 + (int)(rand_r(&seed) % (unsigned)(top - 10000));
        if (bindable(port))
            return port;
    }
    fprintf(stderr, "test_free_port: no free port below %d\n", top);
    exit(1);
}
