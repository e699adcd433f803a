package api

import (
	"slices"
	"strings"

	"github.com/svcdns/svc/internal/auth"
)

// forbiddenHint names the fix of a 403: the built-in roles that grant the
// missing permission, so that "permission querylogs.read is required" says
// to bind auditor (which admin does not include) instead of leaving the
// reader to search the role table. missing is a permission, or a role for
// a token scope wider than the caller's grants.
func forbiddenHint(missing string) string {
	if auth.RolePermissions(missing) != nil {
		return "the caller does not hold role " + missing + "; an administrator binds it with a RoleBinding or " +
			"auth.rbac.bindings (docs/auth.md), then svc token create --role " + missing + " works"
	}
	var roles []string
	for _, r := range auth.Roles() {
		if slices.Contains(auth.RolePermissions(r), missing) {
			roles = append(roles, r)
		}
	}
	if len(roles) == 0 {
		return "ask an administrator for a role binding that grants it (docs/auth.md)"
	}
	h := "ask an administrator to bind a role that grants it: " + strings.Join(roles, " or ") +
		" (RoleBinding or auth.rbac.bindings, docs/auth.md)"
	if !slices.Contains(roles, auth.RoleAdmin) {
		h += "; the admin role does not include " + missing
	}
	if missing == "querylogs.read" {
		h += "; a read-only dashboard token: svc token create --role viewer,auditor"
	}
	return h
}
