"""ClientError: a problem the user can fix (unknown experiment, wrong state, missing project). The CLI prints it
as one line (plus an optional hint line) and exits with code 2, like a SpecError."""

from __future__ import annotations


class ClientError(Exception):
    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message + (f"\n  {self.hint}" if self.hint else "")


class ClientWarning(UserWarning):
    """Legal but suspicious: the CLI prints it as ``tfcli: warning: ...`` and goes on."""
