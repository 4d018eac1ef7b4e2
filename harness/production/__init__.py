"""Production sessions read back: the harness's own episodes (`episodes`), and production traces
of any Weave app turned into regression tasks (`to_tasks`: `calls` -> `reconstruct` ->
`failures` -> `derive` + `convert`). Not to be confused with `harness.tracing`, which writes and
reads Weave traces."""
