// Package truncate cuts text to a number of bytes, at a character boundary, marking
// the cut.
package truncate

import "unicode/utf8"

// Marks that String appends to a string it cuts.
const (
	// Mark ends a cut condition message.
	Mark = " [truncated]"
	// Ellipsis ends a cut message read from a server (health, provider, status).
	Ellipsis = "..."
)

// String returns s if it has at most n bytes. Otherwise it cuts s at a character
// boundary and appends mark, so that the result has at most n bytes; when n cannot
// hold the mark, the result is only the cut prefix, without mark.
func String(s string, n int, mark string) string {
	if len(s) <= n {
		return s
	}
	if n < len(mark) {
		mark = ""
	}
	cut := max(n-len(mark), 0)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}
