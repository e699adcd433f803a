package dataplane

import (
	"bytes"
	"errors"
	"testing"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/dataplane/wire"
)

func TestQuestionName(t *testing.T) {
	packed := func(name string) []byte { return pack(t, query(name, dns.TypeA)) }
	long := bytes.Repeat([]byte("\x3f"+string(bytes.Repeat([]byte("a"), 63))), 4) // 256 bytes before the root
	for _, c := range []struct {
		desc string
		msg  []byte
		want []byte
	}{
		{"a query", packed("www.Example.com."), []byte("\x03www\x07Example\x03com\x00")},
		{"the root", packed("."), []byte{0}},
		{"no question", make([]byte, 12), nil},
		{"cut in a label", packed("www.example.com.")[:20], nil},
		{"no root label", packed("www.example.com.")[:28], nil},
		{"a compression pointer", append(make([]byte, 12), 0xc0, 12), nil},
		{"an extended label type", append(make([]byte, 12), 0x41, 'a'), nil},
		{"longer than 255 bytes", append(append(make([]byte, 12), long...), 0, 0, 1, 0, 1), nil},
	} {
		if got := questionName(c.msg); !bytes.Equal(got, c.want) {
			t.Errorf("%s: questionName = %q, want %q", c.desc, got, c.want)
		}
	}
}

// FuzzQuestionName: questionName and question read datagrams from anyone.
// They return the name (and type) the pipeline's parser finds whenever
// that parser accepts the question, and otherwise nothing longer than a name may be, never
// reading out of bounds.
func FuzzQuestionName(f *testing.F) {
	for _, n := range []string{"www.example.com.", ".", "a.b.c.d.e.f.g."} {
		m := new(dns.Msg)
		m.SetQuestion(n, dns.TypeA)
		b, _ := m.Pack()
		f.Add(b)
	}
	f.Add(append(make([]byte, 12), 0xc0, 12))
	f.Fuzz(func(t *testing.T, msg []byte) {
		got := questionName(msg)
		name, qtype := question(msg)
		var lower [wire.MaxNameLen]byte
		q, err := wire.ParseQuestion(msg, 12, &lower)
		switch {
		case !bytes.Equal(name, got):
			t.Fatalf("question's name %q, questionName %q", name, got)
		case err == nil && !bytes.Equal(got, q.Name):
			t.Fatalf("questionName %q, the parser's name %q", got, q.Name)
		case err == nil && qtype != q.Type:
			t.Fatalf("question's type %d, the parser's %d", qtype, q.Type)
		case got != nil && (len(got) > wire.MaxNameLen || got[len(got)-1] != 0):
			t.Fatalf("questionName %q: not a wire name", got)
		case got != nil && err != nil && !errors.Is(err, wire.ErrShort):
			t.Fatalf("questionName %q where the parser says %v", got, err)
		}
	})
}
