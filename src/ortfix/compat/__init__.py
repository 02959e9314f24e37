"""The compatibility matrix (compat/*.yaml): schemas, validation with file:line, and the queries."""
