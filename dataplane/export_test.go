package dataplane

// WithoutPrefetch returns a copy of s that prefetches nothing: the
// benchmarks that measure the prefetch compare the two in one run.
func WithoutPrefetch(s *Snapshot) *Snapshot {
	c := *s
	c.prefetchers, c.stages = nil, nil
	return &c
}
