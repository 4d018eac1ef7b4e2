"""Production sessions read back: the harness's own episodes (`episodes`), and production traces
of any Weave app turned into regression tasks (`to_tasks`: `calls` -> `reconstruct` ->
`failures` -> `derive` + `convert`). Formerly `harness.traces` (a deprecated alias for one
release); not to be confused with `harness.tracing`, which writes and reads Weave traces."""
