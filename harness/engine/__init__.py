"""The engine under the library API: where episodes are played (this process or Ray workers),
how a run is played into the store and graded there, and the progress board. The API
(`harness.api`), the pipeline's nodes, the climb and the commands call it."""
