package dashboard_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/miekg/dns"

	"github.com/svcdns/svc/test/nodetest"
)

// choose picks an option of a select as a user would (the change event).
func (b *browser) choose(sel, value string) {
	b.t.Helper()
	b.waitJS("the select "+sel, fmt.Sprintf(`!!document.querySelector(%q)`, sel))
	evalAs[chromedp.Void](b, fmt.Sprintf(`(e => { e.value = %q; e.dispatchEvent(new Event("change", {bubbles: true})); })(document.querySelector(%q))`, value, sel))
}

// rewriteAnswer asks the node for name (from 127.0.0.1) and returns the A
// record's address, or "" (the upstream is dead: no rewrite, no answer).
func rewriteAnswer(t *testing.T, s *server, name string) string {
	t.Helper()
	m, err := s.Exchange("udp", 3*time.Second, name, dns.TypeA)
	if err != nil || m == nil {
		return ""
	}
	for _, rr := range m.Answer {
		if a, ok := rr.(*dns.A); ok {
			return a.A.String()
		}
	}
	return ""
}

// TestClientGroupEditing: a group created in the page with bad members gets
// the API's refusals at the addresses and client ID fields; created, then
// edited to hold 127.0.0.0/8, the policy that names it applies to this
// machine's next query (its rewrite answers); deleted after the page names
// the policy that uses it, the rewrite stops. A viewer sees the groups
// without any write control.
func TestClientGroupEditing(t *testing.T) {
	s := startServer(t, nodetest.Env("SERVICE_ADMIN_PASSWORD="+adminPassword), nodetest.ExtraYAML(viewerBindings))
	api := signIn(t, s, "admin", adminPassword)
	api.do(http.MethodPut, "/objects/policies/default/kids", map[string]any{
		"apiVersion": "service.io/v1alpha1", "kind": "Policy",
		"metadata": map[string]any{"name": "kids", "namespace": "default"},
		"spec": map[string]any{"priority": 10, "clientGroupRefs": []string{"kids"},
			"rewrites": []map[string]any{{"name": "homework.example", "type": "A", "targets": []string{"192.0.2.77"}}}},
	}, nil)
	const name = "homework.example"

	b := newBrowser(t, s.URL, 1280, 900)
	b.open(s.URL + "/groups")
	b.waitText("h1", "Sign in")
	b.login("admin", adminPassword)
	b.waitText("h1", "Client groups")
	b.waitJS("the new-group form", `!!document.querySelector('form[data-testid=group-new]')`)

	// Bad members: the API's refusal at each field it names.
	b.typeInto("#cg-new-name", "kids")
	b.typeInto("#cg-new-addresses", "10.9.9.9\nnot-an-address")
	b.typeInto("#cg-new-clientIDs", "Bad_ID")
	b.click(`form[data-testid=group-new] button[type=submit]`)
	b.waitText("#cg-new-addresses-err", "IP address or a CIDR prefix")
	b.waitText("#cg-new-clientIDs-err", "spec.clientIDs")
	if v := evalAs[string](b, `document.querySelector('#cg-new-addresses').getAttribute('aria-invalid') + ' ' + document.querySelector('#cg-new-addresses').getAttribute('aria-describedby')`); v != "true cg-new-addresses-err" {
		t.Errorf("the addresses box after the refusal: aria-invalid and describedby %q", v)
	}
	b.checkA11y("client groups, refused")

	// Created with one address that is not this machine: no rewrite yet.
	b.typeInto("#cg-new-addresses", "10.9.9.9")
	b.typeInto("#cg-new-clientIDs", "kids-tablet")
	b.click(`form[data-testid=group-new] button[type=submit]`)
	b.waitJS("the group chosen", `location.search.includes('group=default%2Fkids')`)
	b.waitText(`tr[data-group="default/kids"]`, "10.9.9.9")
	b.waitText(`tr[data-group="default/kids"]`, "default/kids") // used by the policy
	if got := rewriteAnswer(t, s, name); got != "" {
		t.Fatalf("%s answered %q before 127.0.0.1 is in the group", name, got)
	}

	// Edited: 127.0.0.0/8 joins; the policy's rewrite answers this machine.
	b.waitJS("the edit form", `!!document.querySelector('#cg-edit-addresses')`)
	b.typeInto("#cg-edit-addresses", "10.9.9.9\n127.0.0.0/8")
	b.typeInto("#cg-edit-description", "the children's devices")
	b.click(`form[data-testid=group-edit] button[type=submit]`)
	b.waitText(`tr[data-group="default/kids"]`, "127.0.0.0/8")
	nodetest.Eventually(t, 15*time.Second, name+" rewritten for a member", func() bool {
		return rewriteAnswer(t, s, name) == "192.0.2.77"
	})
	var g struct {
		Spec struct {
			Description string   `json:"description"`
			Addresses   []string `json:"addresses"`
			ClientIDs   []string `json:"clientIDs"`
		} `json:"spec"`
	}
	api.do(http.MethodGet, "/objects/clientgroups/default/kids", nil, &g)
	if strings.Join(g.Spec.Addresses, ",") != "10.9.9.9,127.0.0.0/8" || strings.Join(g.Spec.ClientIDs, ",") != "kids-tablet" || g.Spec.Description != "the children's devices" {
		t.Errorf("the group as saved: %+v", g.Spec)
	}
	b.checkA11y("client groups, editing")
	b.screenshot("groups")

	// Explain in the log names the policy the group brought in.
	b.open(s.URL + "/queries?domain=" + name + "&live=0")
	b.click(`tr[data-domain="` + name + `"] button[aria-label="Explain ` + name + `"]`)
	b.waitText("[data-testid=explain-policy]", "default/kids")
	b.open(s.URL + "/groups?group=default/kids")

	// A viewer sees the group and no write control.
	addUser(t, s, "viewer", "viewer password 1")
	v := newBrowser(t, s.URL, 1280, 900)
	v.open(s.URL + "/groups?group=default/kids")
	v.waitText("h1", "Sign in")
	v.login("viewer", "viewer password 1")
	v.waitText(`tr[data-group="default/kids"]`, "127.0.0.0/8")
	v.waitText("main", "Changing groups needs clientgroups.write")
	if n := evalAs[int](v, `document.querySelectorAll('main form, main textarea, main button').length`); n != 0 {
		t.Errorf("a viewer sees %d write controls on the groups page", n)
	}

	// Deleted after the page names the policy that uses it.
	b.click(`form[data-testid=group-edit] .row button:not([type=submit])`)
	b.waitText(`form[data-testid=group-edit]`, "Still named by default/kids")
	b.click(`form[data-testid=group-edit] .row button.primary[type=button]`)
	b.waitText(".msg.ok", "Deleted default/kids")
	b.waitJS("the row gone", `!document.querySelector('tr[data-group="default/kids"]')`)
	nodetest.Eventually(t, 15*time.Second, name+" not rewritten once the group is gone", func() bool {
		return rewriteAnswer(t, s, name) == ""
	})
}

// TestRoleBindingEditing: bindings from the config file say why they
// cannot change here and have no controls; a binding the API refuses (a
// zone scope for a role other than zone-admin) shows the refusal at the
// role; a binding created in the page gives the user its role (a viewer
// made operator sees the group editor after a reload), edited it changes,
// deleted the user is back to viewer.
func TestRoleBindingEditing(t *testing.T) {
	s := startServer(t, nodetest.Env("SERVICE_ADMIN_PASSWORD="+adminPassword), nodetest.ExtraYAML(viewerBindings))
	addUser(t, s, "viewer", "viewer password 1")
	api := signIn(t, s, "admin", adminPassword)

	b := newBrowser(t, s.URL, 1280, 900)
	b.open(s.URL + "/admin?tab=access")
	b.waitText("h1", "Sign in")
	b.login("admin", adminPassword)
	b.waitText("h2", "Role bindings")
	b.waitText(`tr[data-binding="rbac.bindings[0]"]`, "Not editable here: from the config file")
	if n := evalAs[int](b, `document.querySelectorAll('tr[data-source=config] button').length`); n != 0 {
		t.Errorf("a binding from the config file has %d buttons", n)
	}

	// Refused by the API: shown at the role.
	b.typeInto("#rb-name", "viewer-operator")
	b.typeInto("#rb-subjectName", "viewer")
	b.choose("#rb-role", "operator")
	b.choose("#rb-scopeKind", "zone")
	b.waitJS("the zone field", `!!document.querySelector('#rb-scopeName')`)
	b.typeInto("#rb-scopeName", "lab.example")
	b.click(`form[data-testid=binding-form] button[type=submit]`)
	b.waitText("#rb-role-err", "only role zone-admin can be scoped to a zone")
	b.checkA11y("role bindings, refused")

	// Created at cluster scope: the viewer becomes an operator.
	b.choose("#rb-scopeKind", "cluster")
	b.click(`form[data-testid=binding-form] button[type=submit]`)
	b.waitText(".msg.ok", "Created the binding viewer-operator")
	b.waitText(`tr[data-binding="viewer-operator"]`, "operator")
	var rb struct {
		Items []struct {
			Name, Role, Source string
		} `json:"items"`
	}
	api.do(http.MethodGet, "/iam/rolebindings", nil, &rb)
	found := false
	for _, x := range rb.Items {
		found = found || (strings.TrimPrefix(x.Name, "/") == "viewer-operator" && x.Role == "operator" && x.Source == "object")
	}
	if !found {
		t.Errorf("/iam/rolebindings after creating viewer-operator: %+v", rb.Items)
	}
	v := newBrowser(t, s.URL, 1280, 900)
	v.open(s.URL + "/groups")
	v.waitText("h1", "Sign in")
	v.login("viewer", "viewer password 1")
	v.waitJS("the group editor for the new operator", `!!document.querySelector('form[data-testid=group-new]')`)

	// Edited to auditor: the editor is gone for the user.
	b.click(`button[aria-label="Edit binding viewer-operator"]`)
	b.choose("#rb-role", "auditor")
	b.click(`form[data-testid=binding-form] button[type=submit]`)
	b.waitText(`tr[data-binding="viewer-operator"]`, "auditor")
	b.checkA11y("role bindings")
	v.reload()
	v.waitText("h1", "Client groups")
	v.waitText("main", "Changing groups needs clientgroups.write")

	// Deleted.
	b.click(`button[aria-label="Delete binding viewer-operator"]`)
	b.click(`tr[data-binding="viewer-operator"] button.primary`)
	b.waitText(".msg.ok", "Deleted the binding viewer-operator")
	b.waitJS("the row gone", `!document.querySelector('tr[data-binding="viewer-operator"]')`)
}
