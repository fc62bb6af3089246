"""The one error type pinwise shows to users."""


class PinwiseError(Exception):
    """A problem with the user's input or environment, with a message that says what to do.

    The CLI prints it as one line on stderr and exits non-zero; it is never shown as a traceback.
    Internal bugs raise ordinary exceptions instead.
    """

    exit_status = 2


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP: pinwise stops as on Ctrl-C (pinwise.processes.stop_on_termination)."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def interrupted_status(interrupt: KeyboardInterrupt) -> int:
    """The exit status of a command stopped by a signal: 128 + its number, as shells report it."""
    return 128 + getattr(interrupt, "signum", 2)
