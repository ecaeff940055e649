"""What every engine shares: JIT policy and the cache, the records a batch driver hands a kernel, the event log, sensitivities, statuses, the drivers."""
