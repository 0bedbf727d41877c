package controller

import (
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// series is the first series of Registry's metric name whose labels include labels;
// nil if there is none.
func series(t *testing.T, name string, labels map[string]string) *dto.Metric {
	t.Helper()
	families, err := Registry.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	next:
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if v, ok := labels[l.GetName()]; ok && v != l.GetValue() {
					continue next
				}
			}
			return m
		}
	}
	return nil
}

// gauge reads a gauge of Registry by metric name and label values, or -1 if absent.
func gauge(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	if m := series(t, name, labels); m != nil {
		return m.GetGauge().GetValue()
	}
	return -1
}

// counter reads a counter of Registry by metric name and label values, or 0 if absent.
func counter(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	if m := series(t, name, labels); m != nil {
		return m.GetCounter().GetValue()
	}
	return 0
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
