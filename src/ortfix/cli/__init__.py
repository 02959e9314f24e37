"""The command line: the click group, the click-free `check` path, and the renderings (text and JSON)."""
