//go:build bench

package bench

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// requestCounts are request counts by "verb resource[/subresource] code".
type requestCounts map[string]int

// minus returns the requests of r that were not yet in before.
func (r requestCounts) minus(before requestCounts) requestCounts {
	out := requestCounts{}
	for k, v := range r {
		if d := v - before[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}

// request is one key of requestCounts, split.
type request struct {
	verb, resource, code string
}

func parseKey(k string) request {
	f := strings.Fields(k)
	for len(f) < 3 {
		f = append(f, "")
	}
	return request{f[0], f[1], f[2]}
}

func (q request) watch() bool { return q.verb == "watch" }

// event is a write of an Event: counted apart from the budgets (decisions.md).
func (q request) event() bool { return strings.HasPrefix(q.resource, "events") }

func (q request) read() bool { return q.verb == "get" || q.verb == "list" }

func (q request) mutating() bool { return !q.watch() && !q.read() && !q.event() }

// filter sums the counts of the requests keep accepts.
func (r requestCounts) filter(keep func(request) bool) requestCounts {
	out := requestCounts{}
	for k, v := range r {
		if keep(parseKey(k)) {
			out[k] = v
		}
	}
	return out
}

func (r requestCounts) total() int {
	n := 0
	for _, v := range r {
		n += v
	}
	return n
}

// largestFirst returns the keys, the largest count first, ties by key.
func (r requestCounts) largestFirst() []string {
	keys := make([]string, 0, len(r))
	for k := range r {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if r[a] != r[b] {
			return r[b] - r[a]
		}
		return strings.Compare(a, b)
	})
	return keys
}

// String lists the counts, largest first, as "n× verb resource code".
func (r requestCounts) String() string {
	keys := r.largestFirst()
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%d× %s", r[k], k))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// perCR lists the counts divided by n, largest first, as "x.xx verb resource code".
func (r requestCounts) perCR(n int) string {
	keys := r.largestFirst()
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%.2f %s", float64(r[k])/float64(n), k))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// thousands writes n with a comma every three digits.
func thousands(n int) string { return thousandsInt(int64(n)) }

// ms is d in milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
