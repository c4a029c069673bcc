"""Stand-in for google.colab.userdata: secrets from the JSON file named by FREEGPU_STUB_USERDATA."""

import json
import os


class SecretNotFoundError(Exception):
    """No secret of that name (Colab's own error of this name)."""


class NotebookAccessError(Exception):
    """The notebook was not given access to the secret (Colab's own error of this name)."""


def get(key):
    secrets = json.loads(open(os.environ["FREEGPU_STUB_USERDATA"]).read())
    if key not in secrets:
        raise SecretNotFoundError(key)
    return secrets[key]
