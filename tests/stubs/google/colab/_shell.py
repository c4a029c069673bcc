"""Stand-in for Colab's kernel shell class."""

from ipykernel.zmqshell import ZMQInteractiveShell


class Shell(ZMQInteractiveShell):
    """The shell of a Colab kernel: str(get_ipython()) names google.colab."""
