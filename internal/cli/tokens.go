package cli

// tokenStore keeps the API token of each context. Tokens live in the client
// configuration file (written with mode 0600). SERVICE_KEYRING=file selects
// this store explicitly; no OS keyring backend is built in yet, so every
// other value falls back to it as well (the spec's "no keyring" case).
type tokenStore struct {
	mode string
}

func (a *app) tokens(_ *ClientConfig) *tokenStore {
	return &tokenStore{mode: a.env("SERVICE_KEYRING")}
}

// backend names where tokens go, for messages.
func (s *tokenStore) backend() string { return "file" }

func (s *tokenStore) get(c *Context) (string, error) { return c.Token, nil }

// set records the token; the caller saves the configuration.
func (s *tokenStore) set(c *Context, tok string) error {
	c.Token = tok
	return nil
}

func (s *tokenStore) del(c *Context) error {
	c.Token = ""
	return nil
}
