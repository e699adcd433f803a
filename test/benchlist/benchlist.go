// Package benchlist is the block workload of hack/bench-peers.sh for the
// Go benchmarks (test/bench and dataplane's block benchmarks): a
// 1,000,000-name domains list answered NXDOMAIN, compiled into a policy
// table as a node builds it, and the names the load asks.
package benchlist

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/svcdns/svc/api/v1alpha1"
	"github.com/svcdns/svc/dataplane/catalogue"
	"github.com/svcdns/svc/dataplane/policy"
	"github.com/svcdns/svc/dataplane/safesearch"
)

const (
	// Names is the list's length.
	Names = 1_000_000
	// Queried is how many of its names the load asks, in turn.
	Queried = 10_000
)

// Name is the list's name i (no trailing dot), as hack/bench-peers.sh
// writes it.
func Name(i int) string { return fmt.Sprintf("b%d.ads%d.blk", i, i%997) }

// Query returns the Queried names the load asks (with the trailing dot),
// drawn from the list with a fixed seed: the same for every run.
func Query() []string {
	r := rand.New(rand.NewPCG(27, 27))
	out := make([]string, Queried)
	for k := range out {
		out[k] = Name(r.IntN(Names)) + "."
	}
	return out
}

// Table compiles the list into a policy table as the node builds it: a
// global list answered NXDOMAIN, the builtin catalogue and safe search.
// It takes about a second.
func Table(ctx context.Context) (*policy.Table, error) {
	var body bytes.Buffer
	for i := range Names {
		body.WriteString(Name(i))
		body.WriteByte('\n')
	}
	bl := &v1alpha1.BlockList{}
	bl.Namespace, bl.Name = "default", "bench"
	bl.Spec.Response = "nxdomain"
	src := v1alpha1.BlockListSource{Name: "million", URL: "http://127.0.0.1/blocklist.txt", Format: "domains"}
	cs, err := policy.ListCompiler{}.CompileSource(ctx, src, &body)
	if err != nil {
		return nil, err
	}
	cat, err := catalogue.Builtin(ctx, 6)
	if err != nil {
		return nil, err
	}
	tab, problems := policy.Compile(ctx, policy.Input{
		Lists:     []policy.List{{Object: bl, Compiled: policy.ListCompiler{}.NewList(bl, []policy.CompiledSource{cs})}},
		Catalogue: cat, SafeSearch: safesearch.New(),
	})
	if len(problems) > 0 {
		return nil, fmt.Errorf("block table: %v", problems[0])
	}
	return tab, nil
}
