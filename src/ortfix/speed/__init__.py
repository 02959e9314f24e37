"""What makes `check` fast, used by the `check` command only: starting the probe early, recording what a check
looked at on the file system, and replaying an identical earlier check."""
