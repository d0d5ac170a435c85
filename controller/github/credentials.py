"""The one place that turns a GitHub configuration into credentials: a runner spec's
`vaultConfig` refused, the GitHub config Secret's keys read.

Both the Actions client pool (`clients.py`, which needs `Credentials` to sign in) and the
AutoscalingListener reconciler (which writes the keys into the listener's config, ARC's way)
read a Secret through `secret_credentials`, so the keys, their decoding and their redaction are
written once.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from shared.actions.credentials import Credentials, GitHubApp, PersonalAccessToken
from shared.actions.errors import InvalidCredentials
from shared.api.names import (
    SECRET_GITHUB_APP_ID,
    SECRET_GITHUB_APP_INSTALLATION_ID,
    SECRET_GITHUB_APP_PRIVATE_KEY,
    SECRET_GITHUB_TOKEN,
)
from shared.kube.views import secret_value
from shared.telemetry.logs import mask
from shared.typedefs import JSONDict

REASON_VAULT_NOT_SUPPORTED = "VaultNotSupported"
VAULT_NOT_SUPPORTED = (
    "Azure Key Vault credentials (spec.vaultConfig) are not supported: put the GitHub PAT or App "
    "in a Secret named by spec.githubConfigSecret and remove spec.vaultConfig"
)


def vault_refusal(spec: JSONDict) -> str | None:
    """Why a spec's GitHub configuration cannot be used as it is (`VAULT_NOT_SUPPORTED` when it
    names a Key Vault: no Key Vault could be tested against here, docs/autoscaling.md); None
    when its credentials are in the Secret `githubConfigSecret` names."""
    return VAULT_NOT_SUPPORTED if (spec.get("vaultConfig") or {}).get("type") else None


@dataclass(frozen=True, slots=True)
class SecretCredentials:
    """A GitHub config Secret's credential keys as read, each "" when absent. Never printed:
    the token and the private key are kept out of `repr`."""

    token: str = field(default="", repr=False)
    app_id: str = ""
    installation_id: str = ""
    private_key: str = field(default="", repr=False)

    def credentials(self) -> Credentials:
        """A PAT (`github_token`) or a GitHub App (`github_app_id`,
        `github_app_installation_id`, `github_app_private_key`); exactly one of them must be
        complete, else InvalidCredentials."""
        app = bool(self.app_id and self.installation_id and self.private_key)
        if self.token and app:
            raise InvalidCredentials("both PAT and GitHub App credentials provided")
        if self.token:
            return PersonalAccessToken(self.token)
        if not app:
            raise InvalidCredentials(
                "the secret needs github_token, or github_app_id, github_app_installation_id "
                "and github_app_private_key"
            )
        try:
            installation_id = int(self.installation_id)
        except ValueError:
            raise InvalidCredentials("github_app_installation_id is not an integer") from None
        return GitHubApp(
            client_id=self.app_id, installation_id=installation_id, private_key=self.private_key
        )

    def config_keys(self) -> dict[str, str]:
        """The keys as ARC's controller puts them into a listener's config: with a token, only
        the token (ARC's "tidy"); else the three App keys, the token "". Checked by the
        listener itself when it loads them."""
        if self.token:
            return {SECRET_GITHUB_TOKEN: self.token}
        return {
            SECRET_GITHUB_TOKEN: "",
            SECRET_GITHUB_APP_ID: self.app_id,
            SECRET_GITHUB_APP_INSTALLATION_ID: self.installation_id,
            SECRET_GITHUB_APP_PRIVATE_KEY: self.private_key,
        }


def secret_credentials(secret: JSONDict) -> SecretCredentials:
    """The credential keys of a GitHub config Secret. The PAT and the private key are registered
    for redaction as soon as they are read, whatever their shape (a legacy PAT is 40 hex digits,
    which no pattern can tell from a commit SHA); the App and installation ids are not secret."""
    read = SecretCredentials(
        token=secret_value(secret, SECRET_GITHUB_TOKEN) or "",
        app_id=secret_value(secret, SECRET_GITHUB_APP_ID) or "",
        installation_id=secret_value(secret, SECRET_GITHUB_APP_INSTALLATION_ID) or "",
        private_key=secret_value(secret, SECRET_GITHUB_APP_PRIVATE_KEY) or "",
    )
    mask(read.token.strip(), read.private_key.strip())
    return read
