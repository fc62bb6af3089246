"""The one error type pinwise shows to users."""


class PinwiseError(Exception):
    """A problem with the user's input or environment, with a message that says what to do.

    The CLI prints it as one line on stderr and exits non-zero; it is never shown as a traceback.
    Internal bugs raise ordinary exceptions instead.
    """

    exit_status = 2
