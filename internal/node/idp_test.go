package node

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/svcdns/svc/internal/settings"
)

func TestIdentityProvidersFromSettings(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	cfg := &settings.Config{}
	cfg.Auth.IdentityProviders = []map[string]any{{"id": "corp", "issuerURL": "https://idp.example", "clientID": "svc", "audiences": []any{"svc-cli"}}}
	set, err := identityProviders(cfg, &openedStore{}, "service-system", log)
	if err != nil {
		t.Fatal(err)
	}
	ps := set.List(context.Background())
	if len(ps) != 1 || ps[0].ID() != "corp" || ps[0].Source() != "config" {
		t.Fatalf("providers %v", ps)
	}
	cfg.Auth.IdentityProviders[0]["clientSecret"] = "inline secrets are not a key"
	if _, err := identityProviders(cfg, &openedStore{}, "service-system", log); err == nil || !strings.Contains(err.Error(), "auth.identityProviders[0]") {
		t.Fatalf("unknown key: %v", err)
	}
}
