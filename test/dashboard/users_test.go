package dashboard_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/svcdns/svc/test/nodetest"
)

// loginStatus tries a password login over the API and returns the status.
func loginStatus(t *testing.T, s *server, user, password string) int {
	t.Helper()
	b, _ := json.Marshal(map[string]string{"username": user, "password": password})
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Post(s.URL+"/api/v1/auth/login", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestUsersPage: the administrator creates a user with a generated
// password (shown once; the user must choose another at the first
// sign-in), changes its groups, disables it (its login is refused) and
// enables it again, resets its password (the old one stops working) and
// deletes it; the built-in admin is offered neither disable nor delete.
func TestUsersPage(t *testing.T) {
	s := startServer(t, nodetest.Env("SERVICE_ADMIN_PASSWORD="+adminPassword))
	b := newBrowser(t, s.URL, 1280, 900)
	b.open(s.URL + "/admin?tab=users")
	b.waitText("h1", "Sign in")
	b.login("admin", adminPassword)
	b.waitText(`tr[data-user="admin"]`, "built-in admin")
	if evalAs[bool](b, `!!document.querySelector('button[aria-label="Disable admin"], button[aria-label="Delete admin"]')`) {
		t.Error("the built-in admin is offered disable or delete")
	}

	// Created with a generated password, shown once.
	b.typeInto("#u-name", "carol")
	b.typeInto("#u-groups", "family")
	b.click(`form[aria-label="Create a user"] button[type=submit]`)
	b.waitJS("the generated password", `!!document.querySelector('[data-testid=new-password]')`)
	pw := evalAs[string](b, `document.querySelector('[data-testid=new-password]').innerText`)
	b.waitText(`tr[data-user="carol"]`, "must change password")
	b.checkA11y("admin users")
	b.screenshot("admin-users")

	// Carol signs in with it and must choose her own.
	c := newBrowser(t, s.URL, 1280, 900)
	c.open(s.URL + "/overview")
	c.waitText("h1", "Sign in")
	c.login("carol", pw)
	c.waitText("h1", "Choose a new password")

	// Groups changed.
	b.click(`button[aria-label="Edit user carol"]`)
	b.typeInto("#ue-groups", "family, kids")
	b.click(`form[aria-label="Edit user carol"] button[type=submit]`)
	b.waitText(`tr[data-user="carol"]`, "family, kids")

	// Disabled: her login is refused; enabled again: accepted.
	b.click(`button[aria-label="Disable carol"]`)
	b.waitText(`tr[data-user="carol"]`, "disabled")
	if st := loginStatus(t, s, "carol", pw); st == http.StatusOK {
		t.Error("a disabled user signed in")
	}
	b.click(`button[aria-label="Enable carol"]`)
	b.waitText(`tr[data-user="carol"]`, "active")
	if st := loginStatus(t, s, "carol", pw); st != http.StatusOK {
		t.Errorf("enabled again, carol's login answers %d", st)
	}

	// Reset: a new password shown once, the old one refused.
	b.click(`button[aria-label="Reset password of carol"]`)
	b.waitJS("the new password", `!!document.querySelector('[data-testid=new-password]') && document.querySelector('[data-testid=new-password]').innerText !== `+jsString(pw))
	pw2 := evalAs[string](b, `document.querySelector('[data-testid=new-password]').innerText`)
	if st := loginStatus(t, s, "carol", pw); st == http.StatusOK {
		t.Error("the old password still works after a reset")
	}
	if st := loginStatus(t, s, "carol", pw2); st != http.StatusOK {
		t.Errorf("the reset password answers %d", st)
	}

	// Deleted after the confirmation.
	b.click(`button[aria-label="Delete carol"]`)
	b.click(`tr[data-user="carol"] button.primary`)
	b.waitText(".msg.ok", "Deleted carol")
	b.waitJS("carol gone", `!document.querySelector('tr[data-user="carol"]')`)
	if st := loginStatus(t, s, "carol", pw2); st == http.StatusOK {
		t.Error("a deleted user signed in")
	}
}

// jsString quotes s for JavaScript.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
