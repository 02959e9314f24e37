"""The kinds of change a plan can hold and the typed `details` of each: `plan` produces them, `transaction.actions`
carries them out (one handler each).

Kept apart so that neither imports the other: planning stays free of the transaction machinery, and rollback
(which needs the handlers) stays free of the planning one. The TypedDicts say what a kind's details hold; details
read back from a plan file or a journal are untrusted and are still validated field by field by the handler."""

from __future__ import annotations

from typing import Literal, TypedDict

from ortfix.strenum import StrEnum


class ActionKind(StrEnum):
    PIP_UNINSTALL = "pip-uninstall"
    PIP_INSTALL = "pip-install"
    WRITE_FILE = "write-file"
    SYMLINK = "symlink"
    USER_PATH = "user-path"  # Windows: folders added to the user PATH in the registry (HKCU\\Environment)
    PROJECT_UPDATE = "project-update"  # the project's files, changed through its own tool (apply --project)


Installer = Literal["pip", "uv"]


class PipUninstallDetails(TypedDict):
    distribution: str
    version: str
    location: str  # the site-packages folder (absolute)
    dist_info: str  # its .dist-info folder (absolute)


class PipInstallDetails(TypedDict):
    requirements: list[str]  # names with version specifiers
    installer: Installer | None  # None: the environment has no installer
    reinstall: bool


class WriteFileDetails(TypedDict):
    path: str  # absolute; one of the hooks ortfix renders
    content: str
    sha256: str  # of content, UTF-8
    mode: int
    replaces_existing: bool


class SymlinkDetails(TypedDict):
    path: str  # the link (absolute), in site-packages
    target: str  # a file name next to it


class UserPathDetails(TypedDict):
    entries: list[str]  # absolute folders inside the environment, added in this order at the front of the user Path


class RequirementEdit(TypedDict):
    file: str  # a requirements file's name in the project folder
    line: int  # 1-based
    old: str  # the line as it is (without its line ending)
    new: str  # what replaces it


class ProjectUpdateDetails(TypedDict):
    project: str  # the project folder (absolute): the environment's parent folder
    manager: str  # uv | poetry | pdm (system/project.TOOLS: the tool runs) | requirements (lines edited)
    files: dict[str, str]  # name in the project folder → sha256 when planned ("" when absent): journaled, restored
    section: str  # where the dependency is declared: dependencies | optional:NAME | group:NAME | poetry:GROUP
    remove: list[str]  # distributions the tool removes (uv/poetry/pdm remove)
    add: list[str]  # requirements the tool adds (uv/poetry/pdm add)
    edits: list[RequirementEdit]  # requirements-file lines replaced (manager "requirements")
