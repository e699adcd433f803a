package node

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/svcdns/svc/api/v1alpha1"
	"github.com/svcdns/svc/controllers/blocklists"
	"github.com/svcdns/svc/controllers/policies"
	"github.com/svcdns/svc/dataplane/policy"
	"github.com/svcdns/svc/internal/store"
)

// upgradeMarks records one-time upgrade steps in the store's own file
// (the sqlite driver).
type upgradeMarks interface {
	Marked(ctx context.Context, key string) (bool, error)
	Mark(ctx context.Context, key string) error
}

// markGlobalLists marks the spec.global upgrade (docs/policies.md,
// "Upgrading").
const markGlobalLists = "globalLists"

// upgradeGlobalLists runs once per store: BlockLists became global by
// default (spec.global omitted means true), so every list that an admitted
// Policy named under the old rule, and that has no spec.global, gets
// spec.global: false: it applied only to the policies naming it and still
// does. Unnamed lists stay global. Lists managed by a file or an
// integration are not rewritten (their source would undo it): a warning
// names them and the fix. The mark keeps a later omission by the user from
// being rewritten; it is set even when a write failed (logged with the
// fix), so the rule applies once.
func upgradeGlobalLists(ctx context.Context, st store.Store, marks upgradeMarks, tenancy *policy.Tenancy, log *slog.Logger) error {
	done, err := marks.Marked(ctx, markGlobalLists)
	if err != nil || done {
		return err
	}
	lists, err := store.ListTyped[v1alpha1.BlockList](ctx, st, blocklists.Kind, "")
	if err != nil {
		return fmt.Errorf("upgrade global lists: %w", err)
	}
	pols, err := store.ListTyped[v1alpha1.Policy](ctx, st, policies.Kind, "")
	if err != nil {
		return fmt.Errorf("upgrade global lists: %w", err)
	}
	in := policy.Input{Policies: pols, Tenancy: tenancy}
	for i := range lists {
		in.Lists = append(in.Lists, policy.List{Object: &lists[i]})
	}
	for _, k := range policy.UpgradeLocalLists(in) {
		ns, name, _ := strings.Cut(k, "/")
		if err := setLocal(ctx, st, ns, name, log); err != nil {
			log.Error("upgrade: block list not marked spec.global: false; it now applies to every client", "list", k, "err", err,
				"fix", "set spec.global: false on it to keep it for the policies that name it only")
		}
	}
	return marks.Mark(ctx, markGlobalLists)
}

func setLocal(ctx context.Context, st store.Store, ns, name string, log *slog.Logger) error {
	u, err := st.Get(ctx, blocklists.Kind, ns, name)
	if err != nil {
		return err
	}
	if _, found, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "global"); found {
		return nil
	}
	owner := store.OwnerOf(u)
	if owner != store.ManagerAPI && owner != store.ManagerKubernetes {
		log.Warn("upgrade: block list managed by "+string(owner)+" is now global (applies to every client); add global: false to its spec at the source to keep it for the policies that name it only",
			"list", ns+"/"+name)
		return nil
	}
	obj := u.DeepCopy()
	unstructured.RemoveNestedField(obj.Object, "status")
	if err := unstructured.SetNestedField(obj.Object, false, "spec", "global"); err != nil {
		return err
	}
	if _, err := st.Apply(ctx, obj, store.ApplyOptions{Manager: owner, ResourceVersion: u.GetResourceVersion()}); err != nil {
		return err
	}
	log.Info("upgrade: block list named by policies set to spec.global: false (it applies to those policies only, as before)", "list", ns+"/"+name)
	return nil
}
