/* The pinwise command (issue 41): Python, started with SIGINT blocked, runs pinwise.cli.
 *
 * A Ctrl-C while the interpreter starts and imports (about 20 ms) would otherwise stop it with a
 * traceback of whatever it was importing: Python installs its KeyboardInterrupt handler before it
 * runs a line of pinwise. Held back here, the signal waits; pinwise.cli, the first module the
 * command imports, sets SIGINT to its default action and then unblocks it (PINWISE_SIGINT_HELD
 * tells it to, and is taken out of the environment there), so a Ctrl-C that came meanwhile ends
 * the process at once, by the signal, as it ends any program.
 *
 * The interpreter: the python3 beside this program (a virtual environment's bin, where pip put
 * both), else, when there is none, python3 on PATH (a system-wide or --user install). */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ENTRY "import sys; sys.argv[0] = 'pinwise'; from pinwise.cli import main; sys.exit(main(command=True))"

int main(int argc, char **argv)
{
    sigset_t held;
    sigemptyset(&held);
    sigaddset(&held, SIGINT);
    sigprocmask(SIG_BLOCK, &held, NULL);
    if (setenv("PINWISE_SIGINT_HELD", "1", 1) != 0) {
        perror("pinwise: setenv");
        return 1;
    }

    /* -P: nothing of the current folder on sys.path (as a console script has its own bin there
       instead): a numpy.py or pinwise.py where the user stands is not imported */
    char **args = calloc((size_t)argc + 4, sizeof *args);
    if (!args) {
        perror("pinwise");
        return 1;
    }
    args[1] = "-P";
    args[2] = "-c";
    args[3] = ENTRY;
    for (int i = 1; i < argc; i++)
        args[i + 3] = argv[i];

    char self[PATH_MAX], python[PATH_MAX + 16];
    ssize_t length = readlink("/proc/self/exe", self, sizeof self - 1);
    if (length > 0) {
        self[length] = '\0';
        char *slash = strrchr(self, '/');
        if (slash) {
            *slash = '\0';
            snprintf(python, sizeof python, "%s/python3", self);
            args[0] = python;
            execv(python, args);  /* returns only if it cannot run (exec decides, not access()) */
            if (errno != ENOENT) {  /* there is one, and it will not run: say so, not another's error */
                sigprocmask(SIG_UNBLOCK, &held, NULL);
                fprintf(stderr, "pinwise: cannot start %s: %s\n", python, strerror(errno));
                return 126;
            }
        }
    }
    args[0] = "python3";
    execvp("python3", args);
    sigprocmask(SIG_UNBLOCK, &held, NULL);
    fprintf(stderr, "pinwise: cannot start Python (python3 beside %s or on PATH): ", argv[0]);
    perror(NULL);
    return 127;
}
