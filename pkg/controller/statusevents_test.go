package controller

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/llamastack/llama-stack-controller/pkg/apis/llamastack/v1alpha2"
)

// atVersion is the CR app of UID uid at resourceVersion rv, in phase.
func atVersion(uid types.UID, rv string, phase v1alpha2.Phase) *v1alpha2.LlamaStackDistribution {
	l := newLLSD("app")
	l.UID, l.ResourceVersion, l.Status.Phase = uid, rv, phase
	return l
}

// With a versioned store, a cached copy at a version the writes were made over has not
// seen the last write, whatever its status says: written Ready -> Failed -> Ready over a
// cache that stays at the first Ready, then moves to the Failed one, the sync starts from
// the last write (Ready) each time, so that a second failure is written, not taken for
// stored.
func TestLastStatusWritesFollowVersions(t *testing.T) {
	var s lastStatusWrites
	first := atVersion("u", "10", v1alpha2.PhaseReady)
	l := s.sinceCached(first)
	s.remember(l, atVersion("u", "11", v1alpha2.PhaseFailed))
	l = s.sinceCached(first)
	assert.Equal(t, "11", l.ResourceVersion)
	s.remember(l, atVersion("u", "12", v1alpha2.PhaseReady))

	l = s.sinceCached(first)
	assert.Equal(t, "12", l.ResourceVersion, "the cache at 10, the same status as the write at 12: not seen")
	failed := atVersion("u", "11", v1alpha2.PhaseFailed)
	s.seen(failed)
	l = s.sinceCached(failed)
	assert.Equal(t, "12", l.ResourceVersion, "the cache at 11 has not seen 12")
	assert.Equal(t, v1alpha2.PhaseReady, l.Status.Phase)

	// The cache has the write: it is dropped, and the cached copy is the CR.
	s.seen(atVersion("u", "12", v1alpha2.PhaseReady))
	_, kept := s.m.Load(cache.ObjectName{Namespace: testNamespace, Name: "app"})
	assert.False(t, kept, "dropped once the cache has it")
	assert.Equal(t, "10", s.sinceCached(first).ResourceVersion, "nothing kept: the cached copy")

	// A later version (someone's edit after the write) and another CR of the same name
	// (deleted and created again) are the cache's to say.
	s.remember(first, atVersion("u", "11", v1alpha2.PhaseFailed))
	assert.Equal(t, "13", s.sinceCached(atVersion("u", "13", v1alpha2.PhaseReady)).ResourceVersion)
	s.remember(first, atVersion("u", "11", v1alpha2.PhaseFailed))
	assert.Equal(t, types.UID("v"), s.sinceCached(atVersion("v", "10", v1alpha2.PhaseReady)).UID)
}

// Past maxStatusWritesOver writes the cache has not seen, the oldest version it was at
// is taken for current again.
func TestLastStatusWritesAreBounded(t *testing.T) {
	var s lastStatusWrites
	first := atVersion("u", "100", v1alpha2.PhaseReady)
	l := s.sinceCached(first)
	for i := 1; i <= maxStatusWritesOver; i++ {
		s.remember(l, atVersion("u", fmt.Sprint(100+i), v1alpha2.PhaseReady))
		l = s.sinceCached(first)
	}
	assert.Equal(t, "108", l.ResourceVersion)
	s.remember(l, atVersion("u", "109", v1alpha2.PhaseReady))
	assert.Equal(t, "109", s.sinceCached(atVersion("u", "101", v1alpha2.PhaseReady)).ResourceVersion)
	assert.Equal(t, "100", s.sinceCached(first).ResourceVersion, "the ninth write forgets the first version")
}

// The CR informer's update handler drops the kept write once the cache has it, also for
// a status-only update (which it does not enqueue).
func TestUpdateLLSDDropsTheSeenStatusWrite(t *testing.T) {
	f := newFixture(t)
	key := cache.ObjectName{Namespace: testNamespace, Name: "app"}
	first := atVersion("u", "10", v1alpha2.PhaseInitializing)
	f.c.statusWrites.remember(first, atVersion("u", "11", v1alpha2.PhaseReady))

	f.c.updateLLSD(atVersion("u", "9", v1alpha2.PhaseInitializing), first)
	_, kept := f.c.statusWrites.m.Load(key)
	assert.True(t, kept, "the cache at 10 has not seen the write")
	f.c.updateLLSD(first, atVersion("u", "11", v1alpha2.PhaseReady))
	_, kept = f.c.statusWrites.m.Load(key)
	assert.False(t, kept, "the cache has it")
	assert.Empty(t, f.queued(), "a status-only update is not queued")
}
