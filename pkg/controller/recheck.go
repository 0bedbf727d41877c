package controller

import (
	"time"

	"k8s.io/client-go/tools/cache"
)

// Rechecks: a CR blocked by something no event announces the end of is synced again
// after a growing backoff.

// scheduleRecheck queues the CR again after a backoff that grows with each recheck (2s
// doubling to 5 minutes). Syncs for other reasons in between do not grow it, but they
// re-arm it: the delaying queue keeps one entry per key and moves it to the earliest
// time asked for, so a rate-limited retry can consume a pending recheck.
func (c *Controller) scheduleRecheck(key cache.ObjectName) {
	c.recheckMu.Lock()
	defer c.recheckMu.Unlock()
	at, pending := c.recheckAt[key]
	if !pending || !time.Now().Before(at) {
		at = time.Now().Add(c.recheck.When(key))
		c.recheckAt[key] = at
	}
	c.queue.AddAfter(key, time.Until(at))
}

func (c *Controller) forgetRecheck(key cache.ObjectName) {
	c.recheckMu.Lock()
	defer c.recheckMu.Unlock()
	delete(c.recheckAt, key)
	c.recheck.Forget(key)
}
