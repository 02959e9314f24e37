"""Findings → plan: the exact changes that would fix the environment, and saved plan files."""
