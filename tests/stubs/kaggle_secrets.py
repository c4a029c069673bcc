"""Stand-in for Kaggle's kaggle_secrets: secrets from the JSON file named by FREEGPU_STUB_KAGGLE_SECRETS."""

import json
import os


class UserSecretsClient:
    """Kaggle's client of *Add-ons > Secrets*; `get_secret(label)` returns the value stored under `label`."""

    def get_secret(self, label):
        secrets = json.loads(open(os.environ["FREEGPU_STUB_KAGGLE_SECRETS"]).read())
        if label not in secrets:
            raise ValueError(f"no secret labelled {label!r}")
        return secrets[label]
