package controller

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// gauge reads a series of Registry by metric name and label values, or -1 if absent.
func gauge(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := Registry.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if labels[l.GetName()] != l.GetValue() {
					continue series
				}
			}
			return m.GetGauge().GetValue()
		}
	}
	return -1
}

// client-go's elector reports leading and standing by through the registered provider.
func TestLeaderMetric(t *testing.T) {
	RegisterMetrics()
	m := leaderMetricsProvider{}.NewLeaderMetric()
	m.On("test-lease")
	assert.Equal(t, 1.0, gauge(t, "leader_election_master_status", map[string]string{"name": "test-lease"}))
	m.Off("test-lease")
	assert.Equal(t, 0.0, gauge(t, "leader_election_master_status", map[string]string{"name": "test-lease"}))
}
