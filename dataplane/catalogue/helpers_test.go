package catalogue

import "github.com/svcdns/svc/dataplane/blocklist"

func matchService(c *Catalogue, id, name string) bool {
	l := blocklist.NewList(blocklist.ListSpec{Name: id}, []*blocklist.Source{c.Source(id)})
	return l.Match(name).Matched
}
