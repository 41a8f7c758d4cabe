"""The one exception type that reaches the user as a single sentence."""


class PaigridError(Exception):
    """A problem with the user's input or environment, worded as one clear sentence.

    The command line prints ``str(error)`` and exits non-zero; it never shows a traceback
    for these.
    """
