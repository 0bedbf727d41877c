//go:build e2e

package e2e

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// scrape returns the controller's /metrics page.
func scrape(t *testing.T) string {
	t.Helper()
	resp, err := http.Get("http://" + env.metricsAddr + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(body)
}

// sample returns the value of the first series matching the pattern (metric name and
// label matchers as a regexp), or -1.
func sample(page, series string) float64 {
	m := regexp.MustCompile(`(?m)^` + series + ` ([0-9.e+-]+)$`).FindStringSubmatch(page)
	if m == nil {
		return -1
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}

// The key series are present and move when the controller works.
func TestMetricsAreScraped(t *testing.T) {
	ns := newNamespace(t)
	before := scrape(t)
	for _, series := range []string{
		`workqueue_adds_total\{name="llama-stack-controller"\}`,
		`workqueue_depth\{name="llama-stack-controller"\}`,
		`workqueue_retries_total\{name="llama-stack-controller"\}`,
		`llama_stack_controller_syncs_total\{result="success"\}`,
		`rest_client_requests_total\{code="200",host="[^"]+",method="GET"\}`,
		`rest_client_rate_limiter_duration_seconds_count\{verb="GET"\}`,
	} {
		assert.GreaterOrEqual(t, sample(before, series), 0.0, "series %s is missing", series)
	}
	assert.Equal(t, 1.0, sample(before, `leader_election_master_status\{name="llama-stack-controller"\}`), "the suite's controller leads")
	adds := sample(before, `workqueue_adds_total\{name="llama-stack-controller"\}`)
	syncs := sample(before, `llama_stack_controller_syncs_total\{result="success"\}`)

	create(t, llsd(ns, "app"))
	waitReady(t, ns, "app")
	eventually(t, 10*time.Second, "the counters move", func(context.Context) (bool, error) {
		after := scrape(t)
		return sample(after, `workqueue_adds_total\{name="llama-stack-controller"\}`) > adds &&
			sample(after, `llama_stack_controller_syncs_total\{result="success"\}`) > syncs &&
			sample(after, `llama_stack_controller_llamastackdistribution_ready\{name="app",namespace="`+ns+`"\}`) == 1, nil
	})
	assert.Greater(t, sample(scrape(t), `llama_stack_controller_sync_duration_seconds_count\{result="success"\}`), 0.0)
}
