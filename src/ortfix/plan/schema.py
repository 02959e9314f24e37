"""The schema name of a plan document (`plan --json`, `plan -o FILE`, read back by `apply`), in a module of its own so
that the JSON envelope (cli/output.py) names it without importing the planner on the path of `check`."""

PLAN_SCHEMA = "ortfix.plan/2"
