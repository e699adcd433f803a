package catalogue

import (
	"fmt"
	"html"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

var hexColor = regexp.MustCompile(`^#[0-9a-fA-F]{6}$`)

// generatedIcon draws a rounded square with the service's initials in its
// category colour. The dark variant draws the initials in the colour on a
// dark square so the icon keeps its contrast on a dark background.
func generatedIcon(name, color string, onDark bool) []byte {
	if !hexColor.MatchString(color) {
		color = "#607D8B"
	}
	bg, fg := color, "#FFFFFF"
	if onDark {
		bg, fg = "#1E1E1E", color
	}
	return fmt.Appendf(nil, `<svg xmlns="http://www.w3.org/2000/svg" width="64" height="64" viewBox="0 0 64 64">`+
		`<rect x="2" y="2" width="60" height="60" rx="14" fill="%s" stroke="%s" stroke-width="2"/>`+
		`<text x="32" y="41" text-anchor="middle" font-family="system-ui,sans-serif" font-size="24" font-weight="700" fill="%s">%s</text></svg>`,
		bg, color, fg, html.EscapeString(initials(name)))
}

// initials takes the first letter or digit of the first two words, or the
// first two of a single word.
func initials(name string) string {
	words := strings.FieldsFunc(name, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '+' })
	var out []rune
	for _, w := range words {
		r, _ := utf8.DecodeRuneInString(w)
		if r == '+' {
			continue
		}
		out = append(out, unicode.ToUpper(r))
		if len(out) == 2 {
			break
		}
	}
	if len(out) == 1 && len(words) == 1 {
		rs := []rune(words[0])
		if len(rs) > 1 {
			out = append(out, unicode.ToLower(rs[1]))
		}
	}
	if len(out) == 0 {
		return "?"
	}
	return string(out)
}
