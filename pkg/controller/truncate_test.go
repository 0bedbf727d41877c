package controller

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/fault"
	"github.com/llamastack/llama-stack-controller/pkg/controller/internal/truncate"
	"github.com/llamastack/llama-stack-controller/pkg/controller/status"
)

// A condition message longer than the API accepts is cut, so that the status write
// still succeeds.
func TestConditionMessageIsTruncated(t *testing.T) {
	f := newFixture(t)
	long := strings.Repeat("é", status.MaxConditionMessage)
	st := f.c.calculateStatus(newLLSD("app"), status.Observed{Problems: []fault.Problem{{Reason: "Invalid", Message: long}}}, metav1.Now())
	cut := 0
	for _, c := range st.Conditions {
		assert.LessOrEqual(t, len(c.Message), status.MaxConditionMessage, "condition %s", c.Type)
		if strings.HasSuffix(c.Message, truncate.Mark) {
			cut++
			assert.True(t, strings.HasPrefix(long, strings.TrimSuffix(c.Message, truncate.Mark)))
		}
	}
	assert.Positive(t, cut, "no condition carries the cut message: %+v", st.Conditions)
}
