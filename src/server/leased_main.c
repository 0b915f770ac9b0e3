/* leased_main.c - placeholder until the HTTP service lands (issue 4). */
#include <stdio.h>

int main(void)
{
    fprintf(stderr, "leased: the HTTP service is not built yet\n");
    return 1;
}
