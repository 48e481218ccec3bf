"""The eval's engine: a task's declaration and run (:mod:`.task`), the batched runner
and its worker processes, the prediction store, the run folder's marker and lock, the
reports, plots and statistics."""
