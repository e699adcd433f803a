package policy

import (
	"context"
	"fmt"
	"io"

	"github.com/svcdns/svc/api/v1alpha1"
	"github.com/svcdns/svc/dataplane/blocklist"
)

// CompiledSource is one compiled block list source with its parse counts.
// Its method set uses only standard types so the controllers (which must
// not import the data plane) can declare the interface they consume.
type CompiledSource struct{ *blocklist.Source }

// Counts returns the parse counts of the source.
func (s CompiledSource) Counts() (entries, invalid, unsupported, excluded, ruleCount int, staleExcludes []string) {
	if s.Source == nil {
		return 0, 0, 0, 0, 0, nil
	}
	st := s.Status()
	return st.Entries, st.Invalid, st.Unsupported, st.Excluded, st.RuleCount, st.StaleExcludes
}

// ListCompiler compiles BlockList sources with dataplane/blocklist; the
// block list reconciler calls it (wired by the node).
type ListCompiler struct{}

// CompileSource compiles one source's body (nil for entries only).
func (ListCompiler) CompileSource(ctx context.Context, src v1alpha1.BlockListSource, body io.Reader) (CompiledSource, error) {
	spec := blocklist.SourceSpec{Name: src.Name, Format: blocklist.Format(src.Format), Subdomains: src.Subdomains,
		Enabled: src.Enabled, Exclude: src.Exclude}
	for _, e := range src.Entries {
		if Scoped(e) {
			continue // compiled per client-group set by Compile (scoped.go)
		}
		spec.Entries = append(spec.Entries, blocklist.Entry{Value: e.Value, Type: blocklist.EntryType(e.Type), Enabled: e.Enabled})
	}
	s, err := blocklist.CompileSource(ctx, spec, body)
	if err != nil {
		return CompiledSource{}, fmt.Errorf("compile source %q: %w", src.Name, err)
	}
	return CompiledSource{s}, nil
}

// NewList combines compiled sources into the list the blocking stage
// matches against.
func (ListCompiler) NewList(bl *v1alpha1.BlockList, sources []CompiledSource) *blocklist.List {
	srcs := make([]*blocklist.Source, 0, len(sources))
	for _, s := range sources {
		srcs = append(srcs, s.Source)
	}
	mode := blocklist.Mode(bl.Spec.Mode)
	return blocklist.NewList(blocklist.ListSpec{Name: key(bl.Namespace, bl.Name), Mode: mode,
		Disabled: !blocklist.EnabledByAnnotations(bl.Annotations)}, srcs)
}
