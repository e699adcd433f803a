package auth

import (
	"fmt"
	"strings"
	"testing"
)

// TestRoleTableDocumented fails when docs/auth.md does not list a role's
// permissions as the code has them.
func TestRoleTableDocumented(t *testing.T) {
	var b strings.Builder
	for _, r := range Roles() {
		fmt.Fprintf(&b, "| %s | %s |\n", r, strings.Join(RolePermissions(r), ", "))
	}
	doc, err := readSmallFile("../../docs/auth.md", 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), b.String()) {
		t.Errorf("docs/auth.md role table is stale; it should contain:\n%s", b.String())
	}
}
