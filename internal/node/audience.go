package node

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/svcdns/svc/api/v1alpha1"
	"github.com/svcdns/svc/controllers/blocklists"
	"github.com/svcdns/svc/controllers/policies"
	"github.com/svcdns/svc/dataplane/policy"
	"github.com/svcdns/svc/internal/api"
	"github.com/svcdns/svc/internal/store"
)

var _ api.ListAudiences = policyStates{}

// audienceInput reads the BlockLists and Policies of the store (not the
// served table: an apply's note must describe what was just written).
func (p policyStates) audienceInput(ctx context.Context) (policy.Input, error) {
	in, err := checker(p).input(ctx)
	if err != nil {
		return in, err
	}
	if in.Policies, err = store.ListTyped[v1alpha1.Policy](ctx, p.b.st, policies.Kind, ""); err != nil {
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

// AudienceNote implements api.ListAudiences with policy.Note, with obj in
// place of the stored object of its name (the apply route asks before it
// writes).
func (p policyStates) AudienceNote(ctx context.Context, obj *unstructured.Unstructured) (string, bool, error) {
	in, err := p.audienceInput(ctx)
	if err != nil {
		return "", false, err
	}
	ns, name := obj.GetNamespace(), obj.GetName()
	switch obj.GetKind() {
	case blocklists.Kind:
		var bl v1alpha1.BlockList
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &bl); err != nil {
			return "", false, fmt.Errorf("decode BlockList %s/%s: %w", ns, name, err)
		}
		in.Lists = slices.DeleteFunc(in.Lists, func(l policy.List) bool { return l.Object.Namespace == ns && l.Object.Name == name })
		in.Lists = append(in.Lists, policy.List{Object: &bl})
	case policies.Kind:
		var pol v1alpha1.Policy
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &pol); err != nil {
			return "", false, fmt.Errorf("decode Policy %s/%s: %w", ns, name, err)
		}
		in.Policies = slices.DeleteFunc(in.Policies, func(x v1alpha1.Policy) bool { return x.Namespace == ns && x.Name == name })
		in.Policies = append(in.Policies, pol)
	default:
		return "", false, nil
	}
	note, ok := policy.Note(in, obj.GetKind(), ns, name)
	return note, ok, nil
}
