"""A plan exported for places where ortfix does not run at fix time: exact pins (`pins.py`), a requirements file
(`requirements.py`), a Dockerfile fragment (`dockerfile.py`), POSIX sh and PowerShell scripts with their undo
scripts (`shell.py`, `powershell.py`, sharing the standard-library Python steps of `snippets.py`), the library folders
a plan's hook makes findable (`libdirs.py`), and the offline wheelhouse builder (`wheelhouse.py`). What every
renderer reads is one `ExportInput` (`model.py`)."""
