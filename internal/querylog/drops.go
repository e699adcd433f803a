package querylog

// CountDropped counts one row dropped before it reached the writer (the
// data plane's hand-off buffer was full), in the same
// service_querylog_dropped_rows_total as the writer's own drops.
func (w *Writer) CountDropped() { w.dropped.Inc() }

// Enabled reports querylog.enabled as last applied (Open or Update); the
// data plane's hand-off skips records while it is false. It is asked twice
// per query: a flag of its own spares it the policy's cache line.
func (w *Writer) Enabled() bool { return w.enabled.Load() }
