/* Children started by posix_spawn and by vfork + exec are traced as their own processes.
 * Usage: spawn_children (parent) | spawn_children child (one covered call) */
#define _GNU_SOURCE
#include <cuda.h>
#include <spawn.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "check.h"

extern char **environ;

int main(int argc, char **argv) {
    MUST(cuInit(0));
    int can = -1;
    if (argc == 2 && !strcmp(argv[1], "child")) {
        CALL("cuDeviceCanAccessPeer", cuDeviceCanAccessPeer(&can, 1, 0));
        return 0;
    }
    CALL("cuDeviceCanAccessPeer", cuDeviceCanAccessPeer(&can, 0, 1));
    char *child_argv[] = {argv[0], "child", NULL};
    pid_t spawned;
    if (posix_spawn(&spawned, argv[0], NULL, NULL, child_argv, environ) != 0) return 4;
    int status = 0;
    waitpid(spawned, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return 5;
    pid_t forked = vfork();
    if (forked == 0) {
        execv(argv[0], child_argv);
        _exit(127);
    }
    waitpid(forked, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return 6;
    return 0;
}
