package truncate

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestString(t *testing.T) {
	cases := []struct {
		name string
		s    string
		n    int
		mark string
		want string
	}{
		{"fits", "abc", 3, Ellipsis, "abc"},
		{"empty", "", 0, Ellipsis, ""},
		{"cut with Ellipsis", "abcde", 4, Ellipsis, "a..."},
		{"cut with truncated mark", "the message is long", 16, Mark, "the " + Mark},
		{"two-byte runes that fit", "ééé", 6, Ellipsis, "ééé"},
		{"cut does not split a two-byte rune", "éééé", 6, Ellipsis, "é..."},
		{"cut backs over a whole rune", "aééé", 6, Ellipsis, "aé..."},
		{"cut does not split a four-byte rune", "a😀😀", 7, Ellipsis, "a..."},
		{"only the mark fits", "abcdef", 3, Ellipsis, "..."},
		{"no character fits before the mark", "éééé", 4, Ellipsis, "..."},
		{"mark longer than n", "abcdef", 2, Ellipsis, "ab"},
		{"mark longer than n, rune boundary", "ééé", 2, Ellipsis, "é"},
		{"mark longer than n, inside a rune", "ééé", 1, Ellipsis, ""},
		{"n zero", "abc", 0, Ellipsis, ""},
		{"no mark", "abcdef", 4, "", "abcd"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := String(tc.s, tc.n, tc.mark)
			assert.Equal(t, tc.want, got)
			assert.LessOrEqual(t, len(got), max(tc.n, 0))
		})
	}
}
