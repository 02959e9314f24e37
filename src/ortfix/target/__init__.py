"""The target interpreter: choosing it, starting it as the user does, and the scripts that run inside it."""
