"""What makes `check` fast, used by the command layer only: starting the probe early (check and plan),
recording what a check looked at on the file system, and replaying an identical earlier check."""
