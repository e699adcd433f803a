package node

import (
	"context"
	"sort"
	"strings"

	"github.com/svcdns/svc/api/v1alpha1"
	"github.com/svcdns/svc/controllers/policies"
	"github.com/svcdns/svc/dataplane/policy"
	"github.com/svcdns/svc/internal/api"
)

var _ api.ListAudiences = policyStates{}

// audienceInput reads the BlockLists and Policies of the store (not the
// served table: an apply's note must describe what was just written).
func (p policyStates) audienceInput(ctx context.Context) (policy.Input, error) {
	in, err := checker(p).input(ctx)
	if err != nil {
		return in, err
	}
	if in.Policies, err = listTyped[v1alpha1.Policy](ctx, p.b.st, policies.Kind); err != nil {
		return in, err
	}
	return in, nil
}

// ListAudiences implements api.ListAudiences with policy.Audience.
func (p policyStates) ListAudiences(ctx context.Context, ns string) ([]api.ListAudience, error) {
	in, err := p.audienceInput(ctx)
	if err != nil {
		return nil, err
	}
	var out []api.ListAudience
	for k, a := range policy.Audience(in) {
		if ns != "" && !strings.HasPrefix(k, ns+"/") {
			continue
		}
		out = append(out, api.ListAudience(a))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].List < out[j].List })
	return out, nil
}

// AudienceNote implements api.ListAudiences with policy.Note.
func (p policyStates) AudienceNote(ctx context.Context, kind, namespace, name string) (string, bool, error) {
	in, err := p.audienceInput(ctx)
	if err != nil {
		return "", false, err
	}
	note, ok := policy.Note(in, kind, namespace, name)
	return note, ok, nil
}
