"""Stand-in for Colab's kernel class: start a kernel with --IPKernelApp.kernel_class=google.colab._kernel.Kernel."""

from google.colab import _shell
from ipykernel.ipkernel import IPythonKernel
from traitlets import Type


class Kernel(IPythonKernel):
    """A Colab kernel: its shell is google.colab._shell.Shell."""

    shell_class = Type(_shell.Shell)
