"""The compatibility matrix (compat/*.yaml): the schemas of every compat document kind (schemas), reading and
validating a file with file:line errors (validate), the typed rows (model), the Matrix and its queries (matrix),
loading and caching it (load), wheel platform tags (platforms) and version text (versions). Nothing here imports
`ortfix.explain`: explain reads the matrix, not the other way round."""
