package listfetch

import (
	"fmt"
	"net/netip"
	"net/url"
	"strings"
)

// CheckURL is the one rule for list URLs: the fetcher applies it before
// every fetch and the write path (internal/validation) applies it when a
// BlockList is written, so a URL the fetcher would refuse is refused at
// write time with the reason. allowLocal is blocking.allowLocalListURLs;
// the write path, which does not know the nodes' setting, passes true and
// leaves the address rule to the fetcher, which checks the address actually
// dialled (after DNS, on every redirect). Credentials in the URL are allowed
// (private list servers) and never appear in the error.
func CheckURL(raw string, allowLocal bool) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("not a URL (%s): write an http:// or https:// URL", redactParseErr(err))
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		scheme := u.Scheme
		if scheme == "" {
			scheme = "none"
		}
		fix := "use http:// or https://"
		if scheme == "file" {
			fix = "serve the file over http(s), or put its rules in an inline or configMapRef source"
		}
		return fmt.Errorf("%w (scheme %s): %s", ErrScheme, scheme, fix)
	}
	host := u.Hostname()
	if host == "" {
		return fmt.Errorf("list URL has no host: write %s://HOST/PATH", u.Scheme)
	}
	if allowLocal {
		return nil
	}
	if strings.EqualFold(strings.TrimSuffix(host, "."), "localhost") {
		return fmt.Errorf("%w: localhost; set blocking.allowLocalListURLs: true to allow it", ErrForbiddenAddress)
	}
	if ip, err := netip.ParseAddr(host); err == nil && refused(ip) {
		return fmt.Errorf("%w: %s; set blocking.allowLocalListURLs: true to allow it", ErrForbiddenAddress, ip)
	}
	return nil
}

// redactParseErr keeps url.Parse's reason but not the URL it quotes (it may
// carry credentials).
func redactParseErr(err error) string {
	if ue, ok := err.(*url.Error); ok {
		return ue.Err.Error()
	}
	return "unparsable"
}
