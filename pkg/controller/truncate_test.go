package controller

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestTruncate(t *testing.T) {
	cases := []struct {
		name string
		s    string
		n    int
		mark string
		want string
	}{
		{"fits", "abc", 3, ellipsis, "abc"},
		{"empty", "", 0, ellipsis, ""},
		{"cut with ellipsis", "abcde", 4, ellipsis, "a..."},
		{"cut with truncated mark", "the message is long", 16, truncatedMark, "the " + truncatedMark},
		{"two-byte runes that fit", "ééé", 6, ellipsis, "ééé"},
		{"cut does not split a two-byte rune", "éééé", 6, ellipsis, "é..."},
		{"cut backs over a whole rune", "aééé", 6, ellipsis, "aé..."},
		{"cut does not split a four-byte rune", "a😀😀", 7, ellipsis, "a..."},
		{"only the mark fits", "abcdef", 3, ellipsis, "..."},
		{"no character fits before the mark", "éééé", 4, ellipsis, "..."},
		{"mark longer than n", "abcdef", 2, ellipsis, "ab"},
		{"mark longer than n, rune boundary", "ééé", 2, ellipsis, "é"},
		{"mark longer than n, inside a rune", "ééé", 1, ellipsis, ""},
		{"n zero", "abc", 0, ellipsis, ""},
		{"no mark", "abcdef", 4, "", "abcd"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := truncate(tc.s, tc.n, tc.mark)
			assert.Equal(t, tc.want, got)
			assert.LessOrEqual(t, len(got), max(tc.n, 0))
		})
	}
}

// A condition message longer than the API accepts is cut, so that the status write
// still succeeds.
func TestConditionMessageIsTruncated(t *testing.T) {
	f := newFixture(t)
	long := strings.Repeat("é", maxConditionMessage)
	st := f.c.calculateStatus(newLLSD("app"), observed{problems: []userError{{reason: "Invalid", message: long}}}, metav1.Now())
	cut := 0
	for _, c := range st.Conditions {
		assert.LessOrEqual(t, len(c.Message), maxConditionMessage, "condition %s", c.Type)
		if strings.HasSuffix(c.Message, truncatedMark) {
			cut++
			assert.True(t, strings.HasPrefix(long, strings.TrimSuffix(c.Message, truncatedMark)))
		}
	}
	assert.Positive(t, cut, "no condition carries the cut message: %+v", st.Conditions)
}
